import { describe, expect, it } from 'vitest';
import { parseClusterConfig, type ClusterConfig } from '@bosun/config';

import {
  decideCall,
  isReadOnlyTool,
  offeredTools,
  ruleToStore,
  specialistCaller,
  toolAllowed,
  toolState,
  type Caller,
  type PolicyTool,
} from './policy.js';

const REPORT = { type: 'object', required: ['summary'], properties: { summary: { type: 'string' } } };

/** A `demo` server (capability allow) with one `ask` and one `off` tool, a read-write and a read-only specialist. */
function config(): ClusterConfig {
  return parseClusterConfig(
    {
      coordinator: { routes: {}, defaultRoute: ['writer'] },
      specialists: {
        writer: { description: 'w', tools: ['demo__*'], outputSchema: REPORT, mode: 'read-write' },
        reader: { description: 'r', tools: ['demo__*'], outputSchema: REPORT, mode: 'read-only' },
        narrow: { description: 'n', tools: ['demo__get_pods'], outputSchema: REPORT },
      },
      mcpServers: {
        demo: {
          transport: 'stdio',
          command: 'node',
          args: ['main.js'],
          capability: 'allow',
          tools: { restart_pod: 'ask', drop_db: 'off' },
        },
      },
    },
    { file: 'policy.json', env: {} },
  );
}

function tool(remoteName: string, readOnlyHint?: boolean): PolicyTool {
  return { name: `demo__${remoteName}`, server: 'demo', remoteName, annotations: readOnlyHint === undefined ? {} : { readOnlyHint } };
}

const GET_PODS = tool('get_pods', true);
const SCALE = tool('scale', false);
const RESTART = tool('restart_pod', false);
const DROP = tool('drop_db', false);

describe('toolAllowed', () => {
  it('matches exact names and server__* patterns', () => {
    expect(toolAllowed(['demo__get_pods'], 'demo__get_pods')).toBe(true);
    expect(toolAllowed(['demo__get_pods'], 'demo__get_logs')).toBe(false);
    expect(toolAllowed(['demo__*'], 'demo__get_logs')).toBe(true);
    expect(toolAllowed(['demo__*'], 'demox__get_logs')).toBe(false);
    expect(toolAllowed(['demo__*'], 'other__get_logs')).toBe(false);
    expect(toolAllowed([], 'demo__get_pods')).toBe(false);
    expect(toolAllowed(['db__query', 'demo__*'], 'db__query')).toBe(true);
  });
});

describe('isReadOnlyTool', () => {
  it('trusts only an explicit readOnlyHint: true; an unannotated tool counts as mutating', () => {
    expect(isReadOnlyTool(GET_PODS)).toBe(true);
    expect(isReadOnlyTool(SCALE)).toBe(false);
    expect(isReadOnlyTool(tool('unannotated'))).toBe(false);
  });
});

describe('toolState', () => {
  it("takes the tool's own entry, else its server's capability; a tool of an unknown server is off", () => {
    const c = config();
    expect(toolState(c, RESTART)).toBe('ask');
    expect(toolState(c, DROP)).toBe('off');
    expect(toolState(c, SCALE)).toBe('allow');
    expect(toolState(c, { ...SCALE, server: 'nowhere' })).toBe('off');
  });
});

describe('decideCall', () => {
  const c = config();
  const writer = specialistCaller(c, 'writer');
  const reader = specialistCaller(c, 'reader');

  it('refuses an unknown caller and a tool outside its patterns, naming both', () => {
    expect(decideCall(c, undefined, 'ghost', GET_PODS)).toEqual({
      decision: 'refuse',
      reason: 'tool "demo__get_pods" is not allowed for agent "ghost"',
    });
    expect(decideCall(c, specialistCaller(c, 'narrow'), 'narrow', SCALE)).toEqual({
      decision: 'refuse',
      reason: 'tool "demo__scale" is not allowed for agent "narrow"',
    });
  });

  it('refuses an off tool, then a mutating tool for a read-only caller; asks for an ask tool; allows the rest', () => {
    expect(decideCall(c, writer, 'writer', DROP)).toEqual({ decision: 'refuse', reason: 'tool "demo__drop_db" is off by policy' });
    expect(decideCall(c, reader, 'reader', DROP)).toEqual({ decision: 'refuse', reason: 'tool "demo__drop_db" is off by policy' });
    expect(decideCall(c, reader, 'reader', SCALE)).toEqual({
      decision: 'refuse',
      reason: 'tool "demo__scale" may change things and agent "reader" is read-only',
    });
    expect(decideCall(c, writer, 'writer', RESTART)).toEqual({ decision: 'ask' });
    expect(decideCall(c, writer, 'writer', SCALE)).toEqual({ decision: 'allow' });
    expect(decideCall(c, reader, 'reader', GET_PODS)).toEqual({ decision: 'allow' });
  });
});

describe('offeredTools', () => {
  it('offers what the patterns allow, minus off tools, and only read-only tools in read-only mode', () => {
    const c = config();
    const all = [GET_PODS, SCALE, RESTART, DROP];
    const names = (caller: Caller | undefined) => offeredTools(c, caller!, all).map((t) => t.remoteName);
    expect(names(specialistCaller(c, 'writer'))).toEqual(['get_pods', 'scale', 'restart_pod']);
    expect(names(specialistCaller(c, 'reader'))).toEqual(['get_pods']);
    expect(names(specialistCaller(c, 'narrow'))).toEqual(['get_pods']);
  });
});

describe('ruleToStore', () => {
  it('is the strictest rule of the calls, or nothing for one person with nobody excluded', () => {
    const one = { required: 1, distinctFrom: 'none' as const };
    expect(ruleToStore([one, one])).toBeUndefined();
    expect(ruleToStore([])).toBeUndefined();
    expect(ruleToStore([one, { required: 2, distinctFrom: 'none' }, { required: 1, distinctFrom: 'requester' }])).toEqual({
      required: 2,
      distinctFrom: 'requester',
    });
    expect(ruleToStore([{ required: 1, distinctFrom: 'requester' }])).toEqual({ required: 1, distinctFrom: 'requester' });
  });
});
