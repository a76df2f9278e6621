import { describe, expect, it } from 'vitest';

import { ConfigError, mcpServerConfig, parseClusterConfig, specialistConfig, type ClusterConfig } from './cluster.js';
import { approvalTimeoutFor, decideCall, offeredTools, specialistCaller, toolState, type PolicyTool } from './policy.js';

// Names from outside (routes, a model's reply, job data, an MCP server's tool list) that are
// properties of every JavaScript object must never pass for configured ones.

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

function tool(remoteName: string, server = 'demo'): PolicyTool {
  return { name: `${server}__${remoteName}`, server, remoteName, annotations: { readOnlyHint: false } };
}

describe('names that are Object.prototype properties', () => {
  it('are not specialists, servers or callers', () => {
    const config = parse(raw());
    expect(PROTO_NAMES).toEqual(expect.arrayContaining(['constructor', 'toString', '__proto__', 'hasOwnProperty', 'valueOf']));
    for (const name of PROTO_NAMES) {
      expect(specialistConfig(config, name), name).toBeUndefined();
      expect(mcpServerConfig(config, name), name).toBeUndefined();
      expect(specialistCaller(config, name), name).toBeUndefined();
      // The gateway's decision for such an agent: a refusal naming it, never a TypeError.
      expect(decideCall(config, specialistCaller(config, name), name, tool('restart_pod')), name).toEqual({
        decision: 'refuse',
        reason: `tool "demo__restart_pod" is not allowed for agent "${name}"`,
      });
      // A tool on an unknown server is off.
      expect(toolState(config, tool('get_pods', name)), name).toBe('off');
    }
  });

  it("as an MCP server's tool names, take the server's capability, not a made-up entry", () => {
    const config = parse(raw());
    const caller = specialistCaller(config, 'kubernetes')!;
    for (const name of PROTO_NAMES) {
      // capability: ask — a tool named `constructor` must not slip through as `allow`.
      expect(toolState(config, tool(name)), name).toBe('ask');
      expect(decideCall(config, caller, 'kubernetes', tool(name)), name).toEqual({ decision: 'ask' });
      expect(approvalTimeoutFor(config, caller, tool(name)), name).toBe(caller.approvalTimeoutMs);
    }
    expect(
      offeredTools(
        config,
        caller,
        PROTO_NAMES.map((n) => tool(n)),
      ).map((t) => t.remoteName),
    ).toEqual(PROTO_NAMES);
  });

  it('in config keys: a specialist or a tool entry named constructor is an ordinary name', () => {
    const r = raw();
    r.specialists.constructor = { description: 'named like a property', tools: ['demo__*'], outputSchema: REPORT, mode: 'read-only' };
    r.coordinator.routes.Odd = ['constructor'];
    r.mcpServers.demo.tools = { constructor: 'off', toString: { state: 'allow', approvalTimeoutMs: 1234 } };
    const config = parse(r);
    expect(specialistConfig(config, 'constructor')?.description).toBe('named like a property');
    expect(specialistCaller(config, 'constructor')).toMatchObject({ mode: 'read-only' });
    expect(toolState(config, tool('constructor'))).toBe('off');
    expect(toolState(config, tool('toString'))).toBe('allow');
    expect(toolState(config, tool('valueOf'))).toBe('ask');
    expect(approvalTimeoutFor(config, specialistCaller(config, 'kubernetes')!, tool('toString'))).toBe(1234);
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
