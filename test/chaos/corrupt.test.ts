import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue, QueueEvents } from 'bullmq';
import { DEAD_LETTER_QUEUE, INCIDENTS_QUEUE, RunResult, runIdFor, type DeadLetter, type IncidentInput } from '@bosun/contract';
import { EventCollector, TestCluster, demoConfig, openContext, startService, writeConfig, type TestContext } from '../helpers/index.js';

// Chaos 5a: a checkpoint that does not parse fails its run (or task) with a clear error and a
// dead letter; it never crashes a worker or blocks other runs.

let ctx: TestContext;
let cluster: TestCluster;
let incidents: Queue;
let deadLetters: Queue;
let queueEvents: QueueEvents;
let events: EventCollector;
let env: Record<string, string>;

async function publish(incident: IncidentInput) {
  const job = await incidents.add('incident', incident, { jobId: incident.id });
  return { job, runId: runIdFor(incident.id, job.timestamp) };
}

const slowPlan = { fake: { calls: { kubernetes: [{ tool: 'demo__get_pods', args: { service: 'checkout' } }, { tool: 'demo__get_deployments', args: { service: 'checkout' } }] } } };

beforeAll(async () => {
  ctx = await openContext('chaos-corrupt');
  const config = demoConfig();
  config.mcpServers.demo.env = { DEMO_MCP_SLOW_MS: '1000' };
  config.workers = { lockDurationMs: 3_000, stalledIntervalMs: 1_000, maxStalledCount: 2 };
  env = { ...ctx.env, BOSUN_CONFIG: writeConfig(ctx, config) };
  cluster = await TestCluster.start(env, { specialists: 1 });
  incidents = new Queue(INCIDENTS_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
  incidents.setMaxListeners(0);
  deadLetters = new Queue(DEAD_LETTER_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
  queueEvents = new QueueEvents(INCIDENTS_QUEUE, { connection: ctx.redis.duplicate(), prefix: ctx.prefix });
  await queueEvents.waitUntilReady();
  events = new EventCollector(ctx.nats, ctx.prefix);
});

afterAll(async () => {
  events?.close();
  await queueEvents?.close();
  await incidents?.close();
  await deadLetters?.close();
  await cluster?.stop();
  await ctx?.close();
});

describe('corrupted checkpoints', () => {
  it("fails a run whose coordinator checkpoint is not JSON, with a clear error and a dead letter, and goes on", async () => {
    const { job, runId } = await publish({ id: 'corrupt-run', source: 'chaos', reason: 'PodCrashLooping', summary: 'x', labels: { service: 'checkout' }, payload: slowPlan });
    await events.waitFor((e) => e.runId === runId && e.type === 'agent.delegated', 20_000);
    await ctx.redis.set(`${ctx.prefix}:ckpt:run:${runId}`, '{"v":1, "phase": "wait');
    await expect(job.waitUntilFinished(queueEvents, 60_000)).rejects.toThrow(`checkpoint run:${runId} is not valid JSON`);
    const failed = await events.waitFor((e) => e.runId === runId && e.type === 'run.failed', 10_000);
    expect(String(failed.data.reason)).toContain('not valid JSON');
    const entries = (await deadLetters.getWaiting(0, 100)).map((j) => j.data as DeadLetter).filter((d) => d.runId === runId);
    expect(entries).toEqual([expect.objectContaining({ kind: 'failure', incidentId: 'corrupt-run' })]);
    const next = await publish({ id: 'after-corrupt', source: 'chaos', reason: 'HighLatency', summary: 'x', labels: { service: 'payments' } });
    expect(RunResult.parse(await next.job.waitUntilFinished(queueEvents, 60_000)).status).toBe('completed');
    expect(cluster.get('coordinator').running).toBe(true);
  });

  it('fails a task resumed from an incompatible checkpoint with an INCOMPLETE result; the run ends partial', async () => {
    const { job, runId } = await publish({ id: 'corrupt-task', source: 'chaos', reason: 'PodCrashLooping', summary: 'x', labels: { service: 'checkout' }, payload: slowPlan });
    const started = await events.waitFor((e) => e.runId === runId && e.type === 'tool.started', 20_000);
    const taskId = String(started.data.key).replace(/-s\d+-c\d+$/, '');
    // A checkpoint from an incompatible version, then the process dies: the next one must not trust it.
    const specialist = cluster.processes.find((p) => p.running && p.name.startsWith('specialist'))!;
    specialist.kill('SIGKILL');
    await specialist.exited;
    await ctx.redis.set(`${ctx.prefix}:ckpt:task:${taskId}`, JSON.stringify({ v: 2, taskId, state: 'from the future' }));
    const replacement = cluster.add(startService('specialist', env, { name: 'specialist-2' }));
    await replacement.ready();
    const result = RunResult.parse(await job.waitUntilFinished(queueEvents, 60_000));
    expect(result.status).toBe('partial');
    expect(result.specialists[0]).toMatchObject({ name: 'kubernetes', status: 'failed' });
    expect(JSON.stringify(result.specialists[0]!.output)).toContain(`checkpoint task:${taskId} cannot be used`);
    const entries = (await deadLetters.getWaiting(0, 100)).map((j) => j.data as DeadLetter).filter((d) => d.runId === runId);
    expect(entries).toEqual([expect.objectContaining({ kind: 'failure', agent: 'kubernetes' })]);
    expect(replacement.running).toBe(true);
  });
});
