/**
 * The contract test: a client written only against docs/protocol.md, with the `bullmq` and
 * NATS client packages — no import from Bosun's own code. If this breaks, users' code breaks.
 * (The cluster itself is started by the shared test helper.)
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue, QueueEvents } from 'bullmq';
import { DeliverPolicy, jetstream } from '@nats-io/jetstream';
import { startClusterTest, waitUntil, type ClusterTest, type TestContext } from '../helpers/index.js';

interface WireEvent {
  v: number;
  type: string;
  runId: string;
  incidentId: string;
  seq: number;
  at: string;
  agent?: string;
  data: Record<string, unknown>;
}

let t: ClusterTest;
let ctx: TestContext;

beforeAll(async () => {
  t = await startClusterTest('contract', () => undefined);
  ctx = t.ctx;
});

afterAll(async () => {
  await t?.close();
});

describe('wire contract v1, from the documentation alone', () => {
  it('publishes an incident, receives every event of its run in order, and reads the run result', async () => {
    const prefix = ctx.prefix;
    const incidents = new Queue('incidents', { connection: ctx.redis, prefix });
    const queueEvents = new QueueEvents('incidents', { connection: ctx.redis, prefix });
    await queueEvents.waitUntilReady();

    // Live subscription, before publishing.
    const live: WireEvent[] = [];
    const sub = ctx.nats.subscribe(`${prefix}.runs.>`, { callback: (_err, msg) => void live.push(msg.json<WireEvent>()) });

    const incident = {
      id: 'contract-1',
      source: 'contract-test',
      reason: 'PodCrashLooping',
      summary: 'checkout restarting',
      severity: 'critical',
      labels: { service: 'checkout' },
    };
    const job = await incidents.add('incident', incident, { jobId: incident.id });
    // docs/protocol.md: runId = "r" + first 20 hex digits of sha256("<incidentId>\n<job timestamp ms>").
    const runId = `r${createHash('sha256').update(`${incident.id}\n${job.timestamp}`).digest('hex').slice(0, 20)}`;

    const result = (await job.waitUntilFinished(queueEvents, 60_000)) as Record<string, unknown>;
    expect(result).toMatchObject({ v: 1, runId, incidentId: 'contract-1', status: 'completed', stalled: 0 });
    expect(typeof result.answer).toBe('string');
    expect(result.specialists).toEqual([expect.objectContaining({ name: 'kubernetes', status: 'completed', attempts: 1 })]);
    expect((await incidents.getJob('contract-1'))?.progress).toMatchObject({ runId });

    // A late observer replays the whole run from the JetStream stream "<prefix>-runs".
    const js = jetstream(ctx.nats);
    const consumer = await js.consumers.get(`${prefix}-runs`, {
      filter_subjects: `${prefix}.runs.${runId}.>`,
      deliver_policy: DeliverPolicy.All,
    });
    // As docs/protocol.md says: the stream holds a run's events nearly in order (they come from
    // several processes); read until the last event and every seq before it are in, then sort.
    const received: WireEvent[] = [];
    const messages = await consumer.consume();
    let last: WireEvent | undefined;
    const done = setTimeout(() => void messages.close(), 20_000);
    for await (const m of messages) {
      const e = m.json<WireEvent>();
      expect(m.subject).toBe(`${prefix}.runs.${runId}.${e.type}`);
      received.push(e);
      if (e.type === 'run.completed' || e.type === 'run.failed') last = e;
      if (last && received.length >= last.seq) break;
    }
    clearTimeout(done);
    await messages.close();
    const replayed = [...received].sort((a, b) => a.seq - b.seq);

    expect(replayed[0]?.type).toBe('run.started');
    expect(replayed[replayed.length - 1]?.type).toBe('run.completed');
    expect(replayed.map((e) => e.seq)).toEqual(replayed.map((_, i) => i + 1));
    for (const e of replayed) {
      expect(e).toMatchObject({ v: 1, runId, incidentId: 'contract-1' });
      expect(Number.isNaN(Date.parse(e.at))).toBe(false);
    }
    const types = new Set(replayed.map((e) => e.type));
    for (const t of ['run.routed', 'agent.delegated', 'model.called', 'tool.started', 'tool.completed', 'agent.completed'])
      expect(types.has(t)).toBe(true);
    // The live subscriber saw the same events (wait, with a deadline, for the last to arrive).
    await waitUntil(
      () => live.filter((e) => e.runId === runId).length >= replayed.length,
      10_000,
      'the live subscriber saw every event',
      20,
    );
    expect(
      live
        .filter((e) => e.runId === runId)
        .map((e) => `${e.seq}:${e.type}`)
        .sort(),
    ).toEqual(replayed.map((e) => `${e.seq}:${e.type}`).sort());

    sub.unsubscribe();
    await queueEvents.close();
    await incidents.close();
  });
});
