import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue, QueueEvents } from 'bullmq';
import { DEAD_LETTER_QUEUE, INCIDENTS_QUEUE, RunResult, isStalled, runIdFor, type DeadLetter, type IncidentInput } from '@bosun/contract';
import { EventCollector, TestCluster, demoConfig, openContext, writeConfig, type TestContext } from '../helpers/index.js';

// The coordinator's backstops, with no specialist process running at all: nobody will ever
// report, and runs still end — at the task's deadline, or at the run's.

let ctx: TestContext;
let cluster: TestCluster;
let incidents: Queue;
let deadLetters: Queue;
let queueEvents: QueueEvents;
let events: EventCollector;

async function publish(incident: IncidentInput) {
  const job = await incidents.add('incident', incident, { jobId: incident.id });
  return { job, runId: runIdFor(incident.id, job.timestamp) };
}

beforeAll(async () => {
  ctx = await openContext('chaos-backstop');
  const config = demoConfig();
  config.coordinator.runDeadlineMs = 12_000;
  config.specialists.database.deadlineMs = 2_000;
  config.specialists.kubernetes.deadlineMs = 120_000;
  cluster = await TestCluster.start({ ...ctx.env, BOSUN_CONFIG: writeConfig(ctx, config) }, { specialistArgs: [] });
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

describe('no specialist ever answers', () => {
  it("ends the delegation at the task's deadline (coordinator timer) and the run partial", async () => {
    const t0 = Date.now();
    const { job, runId } = await publish({ id: 'backstop-task', source: 'chaos', reason: 'HighLatency', summary: 'x', labels: { service: 'payments' } });
    const result = RunResult.parse(await job.waitUntilFinished(queueEvents, 40_000));
    const elapsed = Date.now() - t0;
    expect(result.status).toBe('partial');
    expect(result.specialists).toEqual([expect.objectContaining({ name: 'database', status: 'stalled', attempts: 0 })]);
    expect(isStalled(result.specialists[0]!.output)).toBe(true);
    // Deadline 2 s + the coordinator's 5 s grace for the specialist to report it itself.
    expect(elapsed).toBeGreaterThanOrEqual(7_000);
    expect(elapsed).toBeLessThan(20_000);
    const entries = (await deadLetters.getWaiting(0, 100)).map((j) => j.data as DeadLetter).filter((d) => d.runId === runId);
    expect(entries).toEqual([expect.objectContaining({ kind: 'timeout', agent: 'database' })]);
  });

  it("ends the run at the run's deadline with what it has", async () => {
    const t0 = Date.now();
    const { job, runId } = await publish({ id: 'backstop-run', source: 'chaos', reason: 'PodCrashLooping', summary: 'x', labels: { service: 'checkout' } });
    const result = RunResult.parse(await job.waitUntilFinished(queueEvents, 40_000));
    expect(Date.now() - t0).toBeGreaterThanOrEqual(11_000);
    expect(result.status).toBe('partial');
    expect(result.specialists).toEqual([expect.objectContaining({ name: 'kubernetes', status: 'stalled' })]);
    expect(result.answer).toMatch(/The run reached its deadline/);
    const stalled = await events.waitFor((e) => e.runId === runId && e.type === 'agent.stalled', 5_000);
    expect(stalled.data).toMatchObject({ kind: 'timeout', reason: 'the run reached its deadline' });
  });
});
