import { describe, expect, it } from 'vitest';
import { parseClusterConfig, type ClusterConfig } from '@bosun/config';

import { approvalTimeoutFor, decideCall, offeredTools, specialistCaller, toolState, type PolicyTool } from './policy.js';

// Names from outside (a model's reply, job data, an MCP server's tool list) that are properties
// of every JavaScript object must never pass for configured callers or tool entries. (The same
// names as config keys: libs/config/src/names.test.ts.)

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
  it('are not callers', () => {
    const config = parse(raw());
    expect(PROTO_NAMES).toEqual(expect.arrayContaining(['constructor', 'toString', '__proto__', 'hasOwnProperty', 'valueOf']));
    for (const name of PROTO_NAMES) {
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
    expect(specialistCaller(config, 'constructor')).toMatchObject({ mode: 'read-only' });
    expect(toolState(config, tool('constructor'))).toBe('off');
    expect(toolState(config, tool('toString'))).toBe('allow');
    expect(toolState(config, tool('valueOf'))).toBe('ask');
    expect(approvalTimeoutFor(config, specialistCaller(config, 'kubernetes')!, tool('toString'))).toBe(1234);
  });
});
