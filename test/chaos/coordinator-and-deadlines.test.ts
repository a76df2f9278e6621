import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue, QueueEvents } from 'bullmq';
import { DEAD_LETTER_QUEUE, INCIDENTS_QUEUE, RunResult, STALL_MARKER, isStalled, runIdFor, specialistQueue, type DeadLetter, type IncidentInput } from '@bosun/contract';
import { EventCollector, TestCluster, demoConfig, openContext, startService, writeConfig, type TestContext } from '../helpers/index.js';

// Chaos 3 and 4: the coordinator dies while runs wait for specialists; specialist tasks that
// never answer (a hanging tool, a process that keeps dying) become INCOMPLETE results in time.

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

async function dlq(runId: string): Promise<DeadLetter[]> {
  return (await deadLetters.getWaiting(0, 1000)).map((j) => j.data as DeadLetter).filter((d) => d.runId === runId);
}

beforeAll(async () => {
  ctx = await openContext('chaos-coord');
  const config = demoConfig();
  // get_logs never answers on this server; everything else takes 600 ms.
  config.mcpServers.demo.env = { DEMO_MCP_SLOW_MS: '600', DEMO_MCP_HANG_TOOLS: 'get_logs' };
  config.workers = { lockDurationMs: 3_000, stalledIntervalMs: 1_000, maxStalledCount: 1 };
  config.specialists.kubernetes.deadlineMs = 20_000;
  config.specialists.database.deadlineMs = 5_000;
  config.specialists.kubernetes.retries = 0;
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

describe('the coordinator dies while runs wait', () => {
  it('finishes the run after a restart, without delegating twice', async () => {
    const plan = [{ tool: 'demo__get_pods', args: { service: 'checkout' } }, { tool: 'demo__get_deployments', args: { service: 'checkout' } }];
    const { job, runId } = await publish({
      id: 'coord-kill',
      source: 'chaos',
      reason: 'ErrorRateHigh',
      summary: 'x',
      labels: { service: 'checkout' },
      payload: { fake: { calls: { kubernetes: plan, database: [{ tool: 'demo__get_metrics', args: { service: 'checkout' } }] } } },
    });
    await events.waitFor((e) => e.runId === runId && e.type === 'tool.started', 20_000);
    expect(await job.getState()).toBe('waiting-children');
    cluster.get('coordinator').kill('SIGKILL');
    await cluster.get('coordinator').exited;
    const restarted = cluster.add(startService('coordinator', env));
    await restarted.ready();
    const result = RunResult.parse(await job.waitUntilFinished(queueEvents, 60_000));
    expect(result.status).toBe('completed');
    expect(result.specialists.map((s) => s.name).sort()).toEqual(['database', 'kubernetes']);
    await events.waitFor((e) => e.runId === runId && e.type === 'run.completed', 10_000);
    const run = events.forRun(runId);
    expect(run.filter((e) => e.type === 'agent.delegated')).toHaveLength(2);
    expect(run.filter((e) => e.type === 'run.started')).toHaveLength(1);
    for (const agent of ['kubernetes', 'database']) {
      const q = new Queue(specialistQueue(agent), { connection: ctx.redis, prefix: ctx.prefix });
      const jobs = (await q.getJobs(['completed', 'failed', 'active', 'waiting', 'delayed'])).filter((j) => (j.data as { runId: string }).runId === runId);
      await q.close();
      expect(jobs).toHaveLength(1);
    }
  });
});

describe('a specialist task that never answers', () => {
  it('turns a hanging tool into an INCOMPLETE timeout within the deadline, and the run ends partial', async () => {
    const started = Date.now();
    const { job, runId } = await publish({
      id: 'hang-1',
      source: 'chaos',
      reason: 'HighLatency',
      summary: 'slow',
      labels: { service: 'payments' },
      payload: { fake: { calls: { database: [{ tool: 'demo__get_logs', args: { service: 'payments' } }] } } },
    });
    const result = RunResult.parse(await job.waitUntilFinished(queueEvents, 60_000));
    const elapsed = Date.now() - started;
    expect(result.status).toBe('partial');
    expect(result.stalled).toBe(1);
    expect(result.specialists[0]).toMatchObject({ name: 'database', status: 'stalled' });
    expect(isStalled(result.specialists[0]!.output)).toBe(true);
    // The deadline is 5 s; the coordinator's backstop fires 5 s after it.
    expect(elapsed).toBeLessThan(5_000 + 5_000 + 5_000);
    const entries = await dlq(runId);
    expect(entries).toEqual([expect.objectContaining({ kind: 'timeout', agent: 'database', marker: STALL_MARKER })]);
    const stalled = await events.waitFor((e) => e.runId === runId && e.type === 'agent.stalled', 5_000);
    expect(stalled.data.kind).toBe('timeout');
  });

  it('turns a task whose process keeps dying into an INCOMPLETE result once it is lost more than the stalled-job limit', async () => {
    const { job, runId } = await publish({
      id: 'dying-1',
      source: 'chaos',
      reason: 'PodCrashLooping',
      summary: 'x',
      labels: { service: 'checkout' },
      payload: { fake: { calls: { kubernetes: [{ tool: 'demo__get_pods', args: { service: 'checkout' } }, { tool: 'demo__get_pods', args: { service: 'search' } }] } } },
    });
    let kills = 0;
    let finished = false;
    const killer = (async () => {
      while (!finished && kills < 6) {
        const since = Date.now();
        try {
          await events.waitFor((e) => e.runId === runId && e.type === 'model.called' && e.agent === 'kubernetes' && Date.parse(e.at) >= since, 20_000);
        } catch {
          return;
        }
        if (finished) return;
        const victim = cluster.processes.find((p) => p.running && p.name.startsWith('specialist'));
        victim?.kill('SIGKILL');
        await victim?.exited;
        kills++;
        await cluster.add(startService('specialist', env, { name: `specialist-d${kills}` })).ready();
      }
    })();
    const result = RunResult.parse(await job.waitUntilFinished(queueEvents, 90_000));
    finished = true;
    await killer;
    expect(kills).toBeGreaterThanOrEqual(2);
    expect(result.status).toBe('partial');
    expect(result.specialists[0]).toMatchObject({ name: 'kubernetes', status: 'stalled' });
    expect(isStalled(result.specialists[0]!.output)).toBe(true);
    const entries = await dlq(runId);
    expect(entries).toEqual([expect.objectContaining({ kind: 'stall', agent: 'kubernetes' })]);
    expect(entries[0]!.reason).toMatch(/stalled more than allowable limit/);
  }, 120_000);
});
