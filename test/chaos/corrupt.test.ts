import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startClusterTest, type Client, type ClusterTest, type TestCluster, type TestContext } from '../helpers/index.js';

// Chaos 5a: a checkpoint that does not parse fails its run (or task) with a clear error and a
// dead letter; it never crashes a worker or blocks other runs.

let t: ClusterTest;
let ctx: TestContext;
let cluster: TestCluster;
let client: Client;

const slowPlan = {
  fake: {
    calls: {
      kubernetes: [
        { tool: 'demo__get_pods', args: { service: 'checkout' } },
        { tool: 'demo__get_deployments', args: { service: 'checkout' } },
      ],
    },
  },
};

beforeAll(async () => {
  t = await startClusterTest('chaos-corrupt', (config) => {
    config.mcpServers.demo.env = { DEMO_MCP_SLOW_MS: '1000' };
    config.workers = { lockDurationMs: 3_000, stalledIntervalMs: 1_000, maxStalledCount: 2 };
  });
  ({ ctx, cluster, client } = t);
});

afterAll(async () => {
  await t?.close();
});

describe('corrupted checkpoints', () => {
  it('fails a run whose coordinator checkpoint is not JSON, with a clear error and a dead letter, and goes on', async () => {
    const { job, runId } = await client.publish({
      id: 'corrupt-run',
      source: 'chaos',
      reason: 'PodCrashLooping',
      summary: 'x',
      labels: { service: 'checkout' },
      payload: slowPlan,
    });
    await client.events.waitFor((e) => e.runId === runId && e.type === 'agent.delegated', 20_000);
    // Corrupt it once the coordinator has parked the run (its last write before the children report).
    await cluster.untilTasksOut(ctx.redis, ctx.prefix, job, runId);
    await ctx.redis.set(`${ctx.prefix}:ckpt:run:${runId}`, '{"v":1, "phase": "wait');
    if (cluster.layout === 'colocated') {
      // Its tasks run in the run's pass, which would write over the corruption: the process
      // dies instead, and the run's next owner reads the checkpoint.
      const host = cluster.host('coordinator');
      host.kill('SIGKILL');
      await host.exited;
      await cluster.replace('coordinator').ready();
    }
    await expect(job.waitUntilFinished(client.queueEvents, 60_000)).rejects.toThrow(`checkpoint run:${runId} is not valid JSON`);
    const failed = await client.events.waitFor((e) => e.runId === runId && e.type === 'run.failed', 10_000);
    expect(String(failed.data.reason)).toContain('not valid JSON');
    const entries = await client.deadLetters(runId);
    expect(entries).toEqual([expect.objectContaining({ kind: 'failure', incidentId: 'corrupt-run' })]);
    const next = await client.publish({
      id: 'after-corrupt',
      source: 'chaos',
      reason: 'HighLatency',
      summary: 'x',
      labels: { service: 'payments' },
    });
    expect((await client.result(next.job)).status).toBe('completed');
    expect(cluster.host('coordinator').running).toBe(true);
  });

  it('fails a task resumed from an incompatible checkpoint with an INCOMPLETE result; the run ends partial', async () => {
    const { job, runId } = await client.publish({
      id: 'corrupt-task',
      source: 'chaos',
      reason: 'PodCrashLooping',
      summary: 'x',
      labels: { service: 'checkout' },
      payload: slowPlan,
    });
    const started = await client.events.waitFor((e) => e.runId === runId && e.type === 'tool.started', 20_000);
    const taskId = String(started.data.key).replace(/-s\d+-c\d+$/, '');
    // A checkpoint from an incompatible version, then the process dies: the next one must not trust it.
    const specialist = cluster.host('specialist');
    specialist.kill('SIGKILL');
    await specialist.exited;
    await ctx.redis.set(`${ctx.prefix}:ckpt:task:${taskId}`, JSON.stringify({ v: 2, taskId, state: 'from the future' }));
    const replacement = cluster.replace('specialist');
    await replacement.ready();
    const result = await client.result(job);
    expect(result.status).toBe('partial');
    expect(result.specialists[0]).toMatchObject({ name: 'kubernetes', status: 'failed' });
    expect(JSON.stringify(result.specialists[0]!.output)).toContain(`checkpoint task:${taskId} cannot be used`);
    const entries = await client.deadLetters(runId);
    expect(entries).toEqual([expect.objectContaining({ kind: 'failure', agent: 'kubernetes' })]);
    expect(replacement.running).toBe(true);
  });
});
