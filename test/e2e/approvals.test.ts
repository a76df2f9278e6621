import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue, type Job } from 'bullmq';
import { specialistQueue } from '@bosun/contract';
import { ApprovalStore, type Approval } from '@bosun/transport';
import {
  callLog,
  startClusterTest,
  startService,
  waitUntil,
  type ClusterTest,
  type TestCluster,
  type CallLog,
  type Client,
  type TestContext,
} from '../helpers/index.js';

// Human approval of mutating calls, with the services as separate processes: approve all,
// approve some, deny, time out, and restart every process while an approval is pending. (That
// the wait for an operator does not count against the task's deadline is tested with simulated
// clocks: libs/agent/src/run.test.ts, "moves a task deadline while the task waits for an
// approval…", and libs/agent/src/task.test.ts, "is the job deadline, moved by decided approval
// waits and by the wait under way"; the e2e case waited 7 s for the coordinator's backstop.)

const MARKER = 'An operator has APPROVED the following calls';

let t: ClusterTest;
let ctx: TestContext;
let cluster: TestCluster;
let env: Record<string, string>;
let client: Client;
let approvals: ApprovalStore;
let toolLog: CallLog;

/** The arguments of each call of `tool` logged so far. */
const logged = (tool: string): Record<string, unknown>[] => toolLog.calls(tool).map((c) => c.args);

const restart = (reason: string) => ({ tool: 'demo__restart_pod', args: { service: 'checkout', pod: 'checkout-7c9d6f8b4-9mz4q', reason } });
const rollback = { tool: 'demo__rollback_deployment', args: { service: 'checkout', toVersion: 'v41' } };

function publish(
  id: string,
  calls: { tool: string; args: Record<string, unknown> }[],
  parallel = false,
): Promise<{ job: Job; runId: string }> {
  return client.publish({
    id,
    source: 'test',
    reason: 'PodCrashLooping',
    summary: 'x',
    payload: { fake: { calls: { kubernetes: calls }, ...(parallel ? { parallel: ['kubernetes'] } : {}) } },
  });
}

async function requested(runId: string): Promise<Approval> {
  const e = await client.events.waitFor((x) => x.runId === runId && x.type === 'approval.requested', 20_000, 'approval.requested');
  const a = await approvals.get(String(e.data.approvalId));
  expect(a).not.toBeNull();
  return a!;
}

async function parked(a: Approval): Promise<void> {
  // The task waits as a delayed job (no worker held) until the decision.
  const q = new Queue(specialistQueue('kubernetes'), { connection: ctx.redis, prefix: ctx.prefix });
  let state = '';
  try {
    await waitUntil(
      async () => (state = (await (await q.getJob(a.taskId))?.getState()) ?? '') === 'delayed',
      10_000,
      () => `task ${a.taskId} parked as a delayed job (state: ${state})`,
      50,
    );
  } finally {
    await q.close();
  }
  expect(state).toBe('delayed');
}

async function userMessages(taskId: string): Promise<string[]> {
  const raw = await ctx.redis.get(`${ctx.prefix}:ckpt:task:${taskId}`);
  const ckpt = JSON.parse(raw ?? '{}') as { messages: { role: string; text?: string }[] };
  return ckpt.messages.filter((m) => m.role === 'user').map((m) => m.text ?? '');
}

beforeAll(async () => {
  t = await startClusterTest('approvals', (config, c) => {
    toolLog = callLog(join(c.dir, 'calls.jsonl'));
    config.mcpServers.demo.env = { DEMO_MCP_CALL_LOG: toolLog.path };
    // restart_pod and rollback_deployment are `ask` in the demo config; rollback times out fast here.
    config.mcpServers.demo.tools = { restart_pod: 'ask', rollback_deployment: { state: 'ask', approvalTimeoutMs: 3_000 } };
    config.workers = { lockDurationMs: 3_000, stalledIntervalMs: 1_000, maxStalledCount: 2 };
  });
  ({ ctx, cluster, client, env } = t);
  approvals = new ApprovalStore({ redis: ctx.redis, prefix: ctx.prefix });
});

afterAll(async () => {
  await approvals?.close();
  await t?.close();
});

describe('approvals', () => {
  it('parks the task, and on approval executes exactly the approved call, once', async () => {
    const { job, runId } = await publish('ap-all', [{ tool: 'demo__get_pods', args: { service: 'checkout' } }, restart('ap-all')]);
    const a = await requested(runId);
    expect(a.status).toBe('pending');
    // Each call with the key it will run under (the approval authorises that key, once).
    expect(a.calls).toEqual([
      {
        index: 0,
        tool: 'demo__restart_pod',
        args: restart('ap-all').args,
        needsApproval: true,
        key: `${a.taskId}-s2-c0`,
        digest: expect.stringMatching(/^[0-9a-f]{64}$/),
      },
    ]);
    await parked(a);
    expect(logged('restart_pod').filter((x) => x.reason === 'ap-all')).toHaveLength(0);
    await approvals.decide(a.id, { approve: true, by: 'alice' });
    const result = await client.result(job, 30_000);
    expect(result.status).toBe('completed');
    expect(logged('restart_pod').filter((x) => x.reason === 'ap-all')).toHaveLength(1);
    const told = (await userMessages(a.taskId)).find((t) => t.startsWith(MARKER));
    expect(told).toContain('demo__restart_pod');
    expect(told).toContain('by alice');
    // The audit stream has the call with its approval and approver.
    const audit = await ctx.redis.xrange(`${ctx.prefix}:audit`, '-', '+');
    const entry = audit
      .map(([, f]) =>
        Object.fromEntries(f.reduce<[string, string][]>((acc, v, i, arr) => (i % 2 === 0 ? [...acc, [v, arr[i + 1]!]] : acc), [])),
      )
      .find((e) => e.approvalId === a.id);
    expect(entry).toMatchObject({ tool: 'demo__restart_pod', status: 'ok', approver: 'alice', runId });
  });

  it('executes only the calls approved with --only, and tells the model which were not', async () => {
    const { job, runId } = await publish(
      'ap-some',
      [restart('ap-some'), { tool: 'demo__rollback_deployment', args: { service: 'search', toVersion: 'v8' } }],
      true,
    );
    const a = await requested(runId);
    expect(a.calls.map((c) => [c.index, c.tool, c.needsApproval])).toEqual([
      [0, 'demo__restart_pod', true],
      [1, 'demo__rollback_deployment', true],
    ]);
    await parked(a);
    await approvals.decide(a.id, { approve: true, only: [0], by: 'bob' });
    const result = await client.result(job, 30_000);
    expect(result.status).toBe('completed');
    expect(logged('restart_pod').filter((x) => x.reason === 'ap-some')).toHaveLength(1);
    expect(logged('rollback_deployment').filter((x) => x.service === 'search')).toHaveLength(0);
    const messages = await userMessages(a.taskId);
    const told = messages.find((t) => t.startsWith(MARKER))!;
    expect(told).toContain('[0] demo__restart_pod');
    expect(told).toMatch(/did NOT approve the following calls \(not included in the approval\)[\s\S]*\[1\] demo__rollback_deployment/);
  });

  it('on denial tells the model the reason and runs nothing', async () => {
    const { job, runId } = await publish('ap-deny', [restart('ap-deny')]);
    const a = await requested(runId);
    await parked(a);
    await approvals.decide(a.id, { approve: false, reason: 'change freeze until 18:00', by: 'carol' });
    const result = await client.result(job, 30_000);
    expect(result.status).toBe('completed');
    expect(logged('restart_pod').filter((x) => x.reason === 'ap-deny')).toHaveLength(0);
    const messages = await userMessages(a.taskId);
    expect(messages.some((t) => t.startsWith(MARKER))).toBe(false);
    expect(messages.some((t) => t.includes('denied: change freeze until 18:00'))).toBe(true);
    expect(JSON.stringify(result.specialists[0]?.output)).toContain('change freeze until 18:00');
  });

  it('resolves an approval nobody decides as denied with reason timeout; the run goes on', async () => {
    const t0 = Date.now();
    const { job, runId } = await publish('ap-timeout', [rollback]);
    const a = await requested(runId);
    const result = await client.result(job, 30_000);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(3_000);
    expect(result.status).toBe('completed');
    const after = await approvals.get(a.id);
    expect(after).toMatchObject({ status: 'denied', denyReason: 'timeout' });
    expect(logged('rollback_deployment').filter((x) => x.service === 'checkout')).toHaveLength(0);
    const resolved = await client.events.waitFor((e) => e.runId === runId && e.type === 'approval.resolved', 5_000);
    expect(resolved.data).toMatchObject({ status: 'denied', denyReason: 'timeout' });
  });

  it('survives a restart of every process while pending, and executes the approved call exactly once', async () => {
    const { job, runId } = await publish('ap-restart', [restart('ap-restart')]);
    const a = await requested(runId);
    await parked(a);
    for (const p of cluster.processes) p.kill('SIGKILL');
    await Promise.all(cluster.processes.map((p) => p.exited));
    // Decided while nothing runs: the decision waits in Redis with the parked task.
    await approvals.decide(a.id, { approve: true, by: 'dave' });
    // All three at once: a specialist that resumes the task before the new gateway answers on
    // NATS sends the call by the queue, where the gateway finds it (test/integration/tools-nats.test.ts).
    await Promise.all(
      [startService('gateway', env), startService('coordinator', env), startService('specialist', env, { name: 'specialist-2' })].map((p) =>
        cluster.add(p).ready(),
      ),
    );
    const result = await client.result(job);
    expect(result.status).toBe('completed');
    expect(logged('restart_pod').filter((x) => x.reason === 'ap-restart')).toHaveLength(1);
  }, 90_000);
});
