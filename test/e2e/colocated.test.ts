import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue } from 'bullmq';
import { TOOLS_QUEUE, specialistQueue } from '@bosun/contract';
import { ApprovalStore } from '@bosun/transport';
import { callLog, runCli, startClusterTest, type CallLog, type ClusterTest } from '../helpers/index.js';

// The co-located layout (`bosun serve`, docs/scaling.md "Layouts"): coordinator, specialists and
// tool gateway in one process. The same run as in the split layout — same events, records, audit
// and approvals in Redis — with the tool calls as function calls: no job on the tools queue, no
// NATS request. What a kill of such a process does is in test/chaos/kill-colocated.test.ts.

let t: ClusterTest;
let toolLog: CallLog;

const restart = (reason: string) => ({ tool: 'demo__restart_pod', args: { service: 'checkout', pod: 'checkout-7c9d6f8b4-9mz4q', reason } });

function incident(id: string, calls: { tool: string; args: Record<string, unknown> }[]) {
  return {
    id,
    source: 'test',
    reason: 'PodCrashLooping',
    summary: 'x',
    labels: { service: 'checkout' },
    payload: { fake: { calls: { kubernetes: calls } } },
  };
}

beforeAll(async () => {
  t = await startClusterTest(
    'colocated',
    (config, c) => {
      toolLog = callLog(join(c.dir, 'calls.jsonl'));
      config.mcpServers.demo.env = { DEMO_MCP_CALL_LOG: toolLog.path };
    },
    { layout: 'colocated' },
  );
});

afterAll(async () => {
  // SIGTERM drains all three services of the process: it exits 0.
  const codes = await Promise.all(t?.cluster.processes.map(async (p) => (await p.stop()).code) ?? []);
  await t?.close();
  expect(codes).toEqual([0]);
});

describe('bosun serve: the three services in one process', () => {
  it('answers an incident with its tool calls made in-process, recorded and evented as in the split layout', async () => {
    const { job, runId } = await t.client.publish(
      incident('co-1', [
        { tool: 'demo__get_pods', args: { service: 'checkout' } },
        { tool: 'demo__get_logs', args: { service: 'checkout', lines: 5 } },
      ]),
    );
    const result = await t.client.result(job);
    expect(result).toMatchObject({ runId, status: 'completed' });
    expect(result.specialists).toEqual([expect.objectContaining({ name: 'kubernetes', status: 'completed' })]);
    expect(toolLog.count('get_pods')).toBe(1);
    expect(toolLog.count('get_logs')).toBe(1);
    const events = await t.client.events.complete(runId);
    const keys = events.filter((e) => e.type === 'tool.started').map((e) => String(e.data.key));
    expect(keys).toHaveLength(2);
    expect(events.filter((e) => e.type === 'tool.completed')).toHaveLength(2);
    // Each call has its record under its key, and none was a job on the tools queue.
    const tools = new Queue(TOOLS_QUEUE, { connection: t.ctx.redis, prefix: t.ctx.prefix });
    for (const key of keys) {
      expect(await t.ctx.redis.hget(`${t.ctx.prefix}:toolcall:${key}`, 'state')).toBe('done');
      expect(await tools.getJob(key)).toBeUndefined();
    }
    expect(await tools.getJobCountByTypes('completed', 'waiting', 'active', 'failed')).toBe(0);
    await tools.close();
    // The task ran in the run's process, with no child job: delegated as a local task, its
    // result in its task checkpoint only, and nothing on the specialist's queue.
    const delegated = events.filter((e) => e.type === 'agent.delegated');
    expect(delegated.map((e) => e.data.local)).toEqual([true]);
    const taskId = String(delegated[0]!.data.taskId);
    const tasks = new Queue(specialistQueue('kubernetes'), { connection: t.ctx.redis, prefix: t.ctx.prefix });
    expect(await tasks.getJob(taskId)).toBeUndefined();
    expect(await tasks.getJobCountByTypes('completed', 'waiting', 'active', 'failed', 'delayed')).toBe(0);
    await tasks.close();
    const ckpt = JSON.parse((await t.ctx.redis.get(`${t.ctx.prefix}:ckpt:run:${runId}`))!) as { delegations: object[] };
    expect(ckpt.delegations).toEqual([
      expect.objectContaining({ taskId, result: expect.objectContaining({ outputIn: 'checkpoint', output: null }) }),
    ]);
    expect(ckpt.delegations[0]).not.toHaveProperty('local');
  });

  it('parks a mutating call for approval (no worker held), and runs exactly the approved call once', async () => {
    const approvals = new ApprovalStore({ redis: t.ctx.redis, prefix: t.ctx.prefix });
    try {
      const { job, runId } = await t.client.publish(incident('co-approve', [restart('co-approve')]));
      const asked = await t.client.events.waitFor(
        (e) => e.runId === runId && e.type === 'approval.requested',
        20_000,
        'approval.requested',
      );
      const approvalId = String(asked.data.approvalId);
      expect(toolLog.count('restart_pod')).toBe(0);
      await approvals.decide(approvalId, { approve: true, by: 'alice' });
      const result = await t.client.result(job);
      expect(result.status).toBe('completed');
      expect(toolLog.calls('restart_pod').map((c) => c.args.reason)).toEqual(['co-approve']);
      // The gateway audited it, with the person who approved it.
      const audit = await runCli(t.env, ['audit', '--run', runId, '--json']);
      expect(audit.code, audit.stderr).toBe(0);
      const entries = JSON.parse(audit.stdout) as { tool: string; status: string }[];
      expect(entries.map((e) => [e.tool, e.status])).toEqual([['demo__restart_pod', 'ok']]);
      // The task began in the run's process; waiting for a person, it went to its queue (so no
      // worker waits), as a child job that resumed from the task's checkpoint.
      const taskId = String(asked.data.taskId);
      const delegated = t.client.events.forRun(runId).filter((e) => e.type === 'agent.delegated');
      expect(delegated.map((e) => [e.data.taskId, e.data.local])).toEqual([[taskId, true]]);
      const tasks = new Queue(specialistQueue('kubernetes'), { connection: t.ctx.redis, prefix: t.ctx.prefix });
      const child = await tasks.getJob(taskId);
      await tasks.close();
      expect(child?.data).toMatchObject({ taskId, resumed: true });
      expect(t.client.events.forRun(runId).filter((e) => e.type === 'agent.started')).toHaveLength(1);
    } finally {
      await approvals.close();
    }
  });

  it('--check checks all three services and takes no work; a bad option is a usage error', async () => {
    const check = await runCli(t.env, ['serve', '--check']);
    expect(check.code, check.stderr).toBe(0);
    expect(check.stdout).toMatch(
      /^bosun-serve: check ok: tool-gateway: .*MCP servers: demo.* \| coordinator: .* \| specialist: .*kubernetes/,
    );
    const bad = await runCli(t.env, ['serve', '--only-some']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/bosun-serve: .*--only-some.*\(options: --check, --only\)/);
    const unknown = await runCli(t.env, ['serve', '--only', 'nobody']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('--only: unknown specialist(s) nobody');
  });
});
