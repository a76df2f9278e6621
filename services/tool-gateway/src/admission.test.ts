import { describe, expect, it } from 'vitest';
import type { CatalogTool, ToolCallJob } from '@bosun/contract';
import { parseClusterConfig } from '@bosun/config';
import type { Approval } from '@bosun/transport';

import { MCP_CLIENT, admit, approvalToRead, policyView } from './admission.js';

// Admission on data alone: the policy's decision and the approval, no I/O.

const REPORT = { type: 'object', required: ['summary'], properties: { summary: { type: 'string' } } };

const config = parseClusterConfig(
  {
    coordinator: { routes: {}, defaultRoute: ['ops'] },
    specialists: {
      ops: { description: 'ops', tools: ['demo__*'], outputSchema: REPORT, mode: 'read-write' },
      viewer: { description: 'looks', tools: ['demo__*'], outputSchema: REPORT, mode: 'read-only' },
      other: { description: 'elsewhere', tools: ['demo__restart_pod'], outputSchema: REPORT, mode: 'read-write' },
    },
    mcpServers: { demo: { transport: 'stdio', command: 'node', args: ['x.js'], tools: { scale: 'ask', drop_db: 'off' } } },
    gateway: { mcpServer: { port: 0, token: 'face-token', tools: ['demo__get_pods'], mode: 'read-only' } },
  },
  { file: 'unit.json', env: {} },
);

function tool(remoteName: string, readOnlyHint: boolean): CatalogTool {
  return {
    name: `demo__${remoteName}`,
    server: 'demo',
    remoteName,
    description: '',
    inputSchema: { type: 'object' },
    annotations: { readOnlyHint },
  };
}
const TOOLS = [tool('get_pods', true), tool('restart_pod', false), tool('scale', false), tool('drop_db', false)];

function call(remoteName: string, extra: Partial<ToolCallJob> = {}): ToolCallJob {
  return {
    v: 1,
    key: 'k-1',
    runId: 'r-1',
    incidentId: 'inc-1',
    agent: 'ops',
    tool: `demo__${remoteName}`,
    args: { replicas: 3 },
    ...extra,
  };
}

function approval(extra: Partial<Approval> = {}): Approval {
  return {
    id: 'ap-1',
    status: 'approved',
    runId: 'r-1',
    incidentId: 'inc-1',
    agent: 'ops',
    taskId: 't-1',
    calls: [{ index: 0, tool: 'demo__scale', args: { replicas: 3 }, needsApproval: true, key: 'k-1' }],
    reason: 'scale',
    createdAt: '2026-03-01T10:00:00.000Z',
    timeoutAt: '2026-03-01T11:00:00.000Z',
    approved: [0],
    decidedBy: 'alice',
    ...extra,
  };
}

const decide = (c: ToolCallJob, a: Approval | null = null) => admit({ call: c, view: policyView(config, c, TOOLS), approval: a });

describe('admit', () => {
  it('admits an allowed call, read-only or not', () => {
    expect(decide(call('restart_pod'))).toMatchObject({ admitted: true, readOnly: false, tool: { name: 'demo__restart_pod' } });
    expect(decide(call('get_pods', { agent: 'viewer' }))).toMatchObject({ admitted: true, readOnly: true });
  });

  it('refuses an unknown tool (not audited), and a refused mutating call (audited) but not a refused read-only one', () => {
    expect(decide(call('nope'))).toMatchObject({
      admitted: false,
      code: 'unknown_tool',
      reason: 'unknown tool "demo__nope"',
      audit: false,
    });
    expect(decide(call('restart_pod', { agent: 'viewer' }))).toMatchObject({ admitted: false, code: 'refused', audit: true });
    expect(decide(call('drop_db'))).toMatchObject({ admitted: false, code: 'refused', reason: 'tool "demo__drop_db" is off by policy' });
    expect(decide(call('get_pods', { agent: 'other' }))).toMatchObject({ admitted: false, code: 'refused', audit: false, readOnly: true });
  });

  it('an ask tool: needs_approval without an approval id, denied under one that does not cover the call, admitted under one that does', () => {
    expect(decide(call('scale'))).toMatchObject({
      code: 'needs_approval',
      audit: true,
      reason: `tool "demo__scale" needs an operator's approval`,
    });
    const named = call('scale', { approvalId: 'ap-1' });
    expect(decide(named, null)).toMatchObject({ code: 'denied', reason: 'approval ap-1 does not exist' });
    expect(decide(named, approval({ status: 'pending' }))).toMatchObject({
      code: 'denied',
      reason: 'approval ap-1 is pending, not approved',
    });
    expect(decide({ ...named, key: 'k-2' }, approval())).toMatchObject({
      code: 'denied',
      reason: expect.stringContaining('does not cover this call (key k-2)'),
    });
    expect(decide({ ...named, runId: 'r-2' }, approval())).toMatchObject({ code: 'denied', reason: expect.stringContaining('of run r-1') });
    expect(decide({ ...named, args: { replicas: 9 } }, approval())).toMatchObject({
      code: 'denied',
      reason: expect.stringContaining('with these arguments'),
    });
    expect(decide(named, approval({ approved: [] }))).toMatchObject({
      code: 'denied',
      reason: expect.stringContaining('it approved no call'),
    });
    expect(decide(named, approval())).toMatchObject({ admitted: true, approval: { id: 'ap-1', decidedBy: 'alice' } });
  });

  it("decides the gateway's own MCP face's calls by the face's policy", () => {
    expect(decide(call('get_pods', { agent: MCP_CLIENT }))).toMatchObject({ admitted: true });
    expect(decide(call('restart_pod', { agent: MCP_CLIENT }))).toMatchObject({ admitted: false, code: 'refused' });
  });
});

describe('approvalToRead', () => {
  it('is the approval an ask call names, and none for any other call', () => {
    const view = (c: ToolCallJob) => policyView(config, c, TOOLS);
    expect(approvalToRead(call('scale', { approvalId: 'ap-1' }), view(call('scale')))).toBe('ap-1');
    expect(approvalToRead(call('scale'), view(call('scale')))).toBeUndefined();
    const allowed = call('restart_pod', { approvalId: 'ap-1' });
    expect(approvalToRead(allowed, view(allowed))).toBeUndefined();
  });
});
