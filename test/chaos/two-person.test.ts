import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue, type Job } from 'bullmq';
import { specialistQueue, type Actor } from '@bosun/contract';
import { ApprovalStore, type Approval } from '@bosun/transport';
import {
  callLog,
  startClusterTest,
  waitUntil,
  type CallLog,
  type Client,
  type ClusterTest,
  type TestCluster,
  type TestContext,
} from '../helpers/index.js';

// The two-person rule across a full restart (issue 23, item 4): a rollback whose policy says
// `approvals: {required: 2, distinctFrom: requester}`. The requester is refused, the first
// approval leaves it at 1 of 2, every process is SIGKILLed and started again, and the second
// approval — given after the restart — runs the call exactly once.

let t: ClusterTest;
let ctx: TestContext;
let cluster: TestCluster;
let client: Client;
let approvals: ApprovalStore;
let toolLog: CallLog;

const person = (name: string): Actor => ({ name, verified: true, path: 'http' });
const approveAs = (name: string) => ({ approve: true as const, by: name, actor: person(name) });
const rollback = { tool: 'demo__rollback_deployment', args: { service: 'checkout', toVersion: 'v41' } };

beforeAll(async () => {
  t = await startClusterTest('two-person', (config, c) => {
    toolLog = callLog(join(c.dir, 'calls.jsonl'));
    config.mcpServers.demo.env = { DEMO_MCP_CALL_LOG: toolLog.path };
    config.mcpServers.demo.tools = { rollback_deployment: { state: 'ask', approvals: { required: 2, distinctFrom: 'requester' } } };
    config.workers = { lockDurationMs: 3_000, stalledIntervalMs: 1_000, maxStalledCount: 2 };
  });
  ({ ctx, cluster, client } = t);
  approvals = new ApprovalStore({ redis: ctx.redis, prefix: ctx.prefix });
});

afterAll(async () => {
  await approvals?.close();
  await t?.close();
});

async function parked(a: Approval): Promise<void> {
  const q = new Queue(specialistQueue('kubernetes'), { connection: ctx.redis, prefix: ctx.prefix });
  try {
    await waitUntil(
      async () => (await (await q.getJob(a.taskId))?.getState()) === 'delayed',
      20_000,
      () => `task ${a.taskId} parked`,
      50,
    );
  } finally {
    await q.close();
  }
}

describe('two-person rule', () => {
  it('refuses the requester, holds at 1 of 2 across a SIGKILL of every process, and runs the call once after the second', async () => {
    // Published as carol would with her own token (`bosun publish` sets requestedBy from it).
    const { job, runId }: { job: Job; runId: string } = await client.publish({
      id: 'two-person-1',
      source: 'test',
      reason: 'PodCrashLooping',
      summary: 'x',
      requestedBy: 'carol',
      payload: { fake: { calls: { kubernetes: [rollback] } } },
    });
    const e = await client.events.waitFor((x) => x.runId === runId && x.type === 'approval.requested', 30_000, 'approval.requested');
    const a = (await approvals.get(String(e.data.approvalId)))!;
    expect(a).toMatchObject({ status: 'pending', rule: { required: 2, distinctFrom: 'requester' }, requester: 'carol' });
    await parked(a);

    await expect(approvals.decide(a.id, approveAs('carol'))).rejects.toMatchObject({ code: 'forbidden' });
    const first = await approvals.decide(a.id, approveAs('alice'));
    expect(first.status).toBe('pending');
    expect(first.votes?.map((v) => v.actor.name)).toEqual(['alice']);

    for (const p of cluster.processes) p.kill('SIGKILL');
    await Promise.all(cluster.processes.map((p) => p.exited));
    await Promise.all(
      (cluster.layout === 'colocated'
        ? [cluster.replace('coordinator')]
        : [cluster.replace('gateway'), cluster.replace('coordinator'), cluster.replace('specialist')]
      ).map((p) => p.ready()),
    );
    // Still 1 of 2 after the restart, and nothing ran.
    expect((await approvals.get(a.id))!).toMatchObject({ status: 'pending', votes: [{ actor: { name: 'alice' } }] });
    expect(toolLog.calls('rollback_deployment')).toHaveLength(0);

    const second = await approvals.decide(a.id, approveAs('bob'));
    expect(second).toMatchObject({ status: 'approved', decidedBy: 'alice, bob' });
    const result = await client.result(job);
    expect(result.status).toBe('completed');
    expect(toolLog.calls('rollback_deployment')).toHaveLength(1);
  }, 120_000);
});
