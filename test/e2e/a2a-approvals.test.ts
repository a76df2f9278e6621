import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TaskState, type Task } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { ApprovalStore } from '@bosun/transport';
import {
  a2aClient,
  callLog,
  dataPart,
  freePort,
  sendRequest,
  startClusterTest,
  startService,
  tokenEntry,
  userMessage,
  type CallLog,
  type ClusterTest,
} from '../helpers/index.js';

// Approvals through A2A: a run waiting for an approval is an `input-required` task whose status
// message lists the proposed calls; an operator answers with a DataPart decision, which is the
// same durable approval as `bosun approve` (stored once, the parked task woken, the call run
// exactly as approved). A caller without the operator right cannot answer.

const OPERATOR = 'a2a-operator-token-0001';
const VIEWER = 'a2a-viewer-token-0001';

let t: ClusterTest;
let operator: Client;
let viewer: Client;
let toolLog: CallLog;
let approvals: ApprovalStore;

const restart = (reason: string) => ({ tool: 'demo__restart_pod', args: { service: 'checkout', pod: 'checkout-7c9d6f8b4-9mz4q', reason } });
const incident = (reason: string) => ({
  source: 'a2a-test',
  reason: 'PodCrashLooping',
  summary: 'checkout crash loop',
  labels: { service: 'checkout' },
  payload: { fake: { calls: { kubernetes: [restart(reason)] } } },
});
const statusText = (task: Task) => {
  const c = task.status?.message?.parts[0]?.content;
  return c?.$case === 'text' ? c.value : '';
};

beforeAll(async () => {
  const port = await freePort();
  t = await startClusterTest('a2a-approvals', (config, ctx) => {
    toolLog = callLog(join(ctx.dir, 'calls.jsonl'));
    config.mcpServers.demo.env = { DEMO_MCP_CALL_LOG: toolLog.path };
    config.a2a = { port, tokens: [tokenEntry(OPERATOR, 'ops', true), tokenEntry(VIEWER, 'ops', false)], blockingWaitMs: 60_000 };
  });
  await t.cluster.add(startService('a2a', t.env)).ready();
  operator = await a2aClient(`http://127.0.0.1:${port}`, OPERATOR);
  viewer = await a2aClient(`http://127.0.0.1:${port}`, VIEWER);
  approvals = new ApprovalStore({ redis: t.ctx.redis, prefix: t.ctx.prefix });
}, 120_000);

afterAll(async () => {
  await approvals?.close();
  await t?.close();
});

describe('an approval answered through A2A', () => {
  it('the task is input-required with the proposed calls; a viewer cannot answer; the operator approves and the call runs once', async () => {
    const task = (await operator.sendMessage(sendRequest(userMessage([dataPart(incident('a2a-approve'))])))) as Task;
    expect(task.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(statusText(task)).toMatch(/\[0\] demo__restart_pod .*\(needs approval\)/);
    // The context: when it times out and how far it has got.
    expect(statusText(task)).toMatch(/waits for an operator until \d{4}-\d\d-\d\dT/);
    expect(statusText(task)).toContain('Approvals: 0 of 1.');
    const approval = task.status?.message?.parts[1]?.content;
    const approvalId = approval?.$case === 'data' ? (approval.value as { approval: { id: string } }).approval.id : '';
    expect(approvalId).toMatch(/^ap-/);
    expect(toolLog.count('restart_pod')).toBe(0);

    const answer = (decision: unknown) => userMessage([dataPart(decision)], { taskId: task.id, contextId: task.contextId });
    await expect(viewer.sendMessage(sendRequest(answer({ decision: 'approve' })))).rejects.toThrow(/operator right/);
    await expect(operator.sendMessage(sendRequest(answer({ decision: 'maybe' })))).rejects.toThrow(/decision/);
    // A decision that names the task with a foreign context is refused (spec: a mismatch MUST be rejected), and runs nothing.
    const foreign = userMessage([dataPart({ decision: 'approve' })], { taskId: task.id, contextId: 'someone-elses-context' });
    await expect(operator.sendMessage(sendRequest(foreign))).rejects.toThrow(/contextId/);
    expect(await approvals.get(approvalId)).toMatchObject({ status: 'pending' });
    expect(toolLog.count('restart_pod')).toBe(0);

    const done = (await operator.sendMessage(sendRequest(answer({ decision: 'approve' })))) as Task;
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(toolLog.calls('restart_pod').map((c) => c.args.reason)).toEqual(['a2a-approve']);
    const stored = await approvals.get(approvalId);
    expect(stored).toMatchObject({ status: 'approved', decidedBy: 'a2a:ops', approved: [0] });
    // The answer is in the task's history, after the first message.
    expect(done.history.map((m) => m.role)).toEqual([1, 1, 2]);
    await expect(operator.sendMessage(sendRequest(answer({ decision: 'approve' })))).rejects.toThrow(/not waiting for input/);
  }, 120_000);

  it('a denial with a reason: the call never runs and the approval records the reason', async () => {
    const task = (await operator.sendMessage(sendRequest(userMessage([dataPart(incident('a2a-deny'))])))) as Task;
    expect(task.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const answer = userMessage([dataPart({ decision: 'deny', reason: 'not during the sale' })], { taskId: task.id });
    const done = (await operator.sendMessage(sendRequest(answer))) as Task;
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(toolLog.calls('restart_pod').filter((c) => c.args.reason === 'a2a-deny')).toEqual([]);
    const data = task.status?.message?.parts[1]?.content;
    const approvalId = data?.$case === 'data' ? (data.value as { approval: { id: string } }).approval.id : '';
    expect(await approvals.get(approvalId)).toMatchObject({ status: 'denied', decidedBy: 'a2a:ops', denyReason: 'not during the sale' });
  }, 120_000);
});
