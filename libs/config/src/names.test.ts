import { describe, expect, it } from 'vitest';

import { ConfigError, mcpServerConfig, parseClusterConfig, specialistConfig, type ClusterConfig } from './cluster.js';

// Names from outside (routes, a model's reply, job data, an MCP server's tool list) that are
// properties of every JavaScript object must never pass for configured ones. (The same names as
// callers and tools of the policy: libs/policy/src/names.test.ts.)

/** `constructor`, `toString`, `__proto__`, `hasOwnProperty`, `valueOf`, … */
const PROTO_NAMES = Object.getOwnPropertyNames(Object.prototype);

const REPORT = { type: 'object', required: ['summary'], properties: { summary: { type: 'string' } } };

function raw(): Record<string, any> {
  return {
    coordinator: { routes: { PodCrashLooping: ['kubernetes'] }, defaultRoute: ['kubernetes'] },
    specialists: { kubernetes: { description: 'pods', tools: ['demo__*'], outputSchema: REPORT } },
    mcpServers: { demo: { transport: 'stdio', command: 'node', args: ['main.js'], capability: 'ask', tools: { get_pods: 'allow' } } },
  };
}

const parse = (r: unknown): ClusterConfig => parseClusterConfig(r, { file: 'names.json', env: {} });

describe('names that are Object.prototype properties', () => {
  it('are not specialists or servers', () => {
    const config = parse(raw());
    expect(PROTO_NAMES).toEqual(expect.arrayContaining(['constructor', 'toString', '__proto__', 'hasOwnProperty', 'valueOf']));
    for (const name of PROTO_NAMES) {
      expect(specialistConfig(config, name), name).toBeUndefined();
      expect(mcpServerConfig(config, name), name).toBeUndefined();
    }
  });

  it('in config keys: a specialist named constructor is an ordinary name', () => {
    const r = raw();
    r.specialists.constructor = { description: 'named like a property', tools: ['demo__*'], outputSchema: REPORT, mode: 'read-only' };
    r.coordinator.routes.Odd = ['constructor'];
    const config = parse(r);
    expect(specialistConfig(config, 'constructor')?.description).toBe('named like a property');
  });

  it('in routes, name unknown specialists', () => {
    for (const name of PROTO_NAMES) {
      const r = raw();
      r.coordinator.routes.PodCrashLooping = [name];
      expect(() => parse(r), name).toThrow(`coordinator.routes.PodCrashLooping: unknown specialist "${name}"`);
      const d = raw();
      d.coordinator.defaultRoute = [name];
      expect(() => parse(d), name).toThrow(/coordinator\.defaultRoute: unknown specialist/);
    }
  });

  it('a __proto__ key anywhere in the config file is refused, naming where', () => {
    // As YAML and JSON parsers give it: an own property, which a schema would drop silently.
    const r = JSON.parse(JSON.stringify(raw()).replace('"get_pods":"allow"', '"get_pods":"allow","__proto__":"off"')) as Record<
      string,
      unknown
    >;
    expect(() => parse(r)).toThrow(ConfigError);
    expect(() => parse(r)).toThrow('names.json: mcpServers.demo.tools.__proto__: "__proto__" cannot be used as a name');
  });
});
