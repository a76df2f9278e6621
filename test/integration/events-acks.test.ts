import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstreamManager } from '@nats-io/jetstream';
import { runsStreamName } from '@bosun/contract';
import { createLogger } from '@bosun/config';
import { EventPublisher, ensureRunsStream } from '@bosun/transport';
import { openContext, waitUntil, type TestContext } from '../helpers/index.js';

// The event publisher against a real nats-server with JetStream: no publish waits on its own ack;
// the acks come to one subscription. A publish no stream answered (503) is sent again, and the
// stream keeps one copy of each event.

let ctx: TestContext;
const log = createLogger({ service: 'events-acks-test', level: 'silent' });

beforeAll(async () => {
  ctx = await openContext('evacks');
});
afterAll(async () => {
  await ctx?.close();
});

/** The messages the run's stream holds for `runId`, by `seq`. */
async function stored(runId: string): Promise<number[]> {
  const jsm = await jetstreamManager(ctx.nats);
  const info = await jsm.streams.info(runsStreamName(ctx.prefix), { subjects_filter: `${ctx.prefix}.runs.${runId}.>` });
  const seqs: number[] = [];
  for (let seq = info.state.first_seq; info.state.messages > 0 && seq <= info.state.last_seq; seq++) {
    const m = await jsm.streams.getMessage(runsStreamName(ctx.prefix), { seq }).catch(() => null);
    const event = m?.json<{ runId: string; seq: number }>();
    if (event?.runId === runId) seqs.push(event.seq);
  }
  return seqs.sort((a, b) => a - b);
}

describe('EventPublisher against JetStream', () => {
  it('publishes 200 events of a run without waiting on each ack, and the stream holds each once', async () => {
    await ensureRunsStream(ctx.nats, ctx.prefix);
    const events = new EventPublisher({ prefix: ctx.prefix, redis: ctx.redis, nats: ctx.nats, log });
    const runId = 'r00000000000000000001';
    for (let i = 0; i < 200; i++) events.emit({ type: 'model.called', runId, incidentId: 'inc-acks', data: { i } });
    await events.flush(10_000);
    expect(events.stats).toEqual({ published: 200, dropped: 0 });
    expect(await stored(runId)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
  });

  it('sends again the events no stream answered (503, no responders) until a stream takes them, and it keeps one of each', async () => {
    const jsm = await jetstreamManager(ctx.nats);
    await jsm.streams.delete(runsStreamName(ctx.prefix)).catch(() => undefined);
    const events = new EventPublisher({ prefix: ctx.prefix, redis: ctx.redis, nats: ctx.nats, log });
    const runId = 'r00000000000000000002';
    for (let i = 0; i < 3; i++) events.emit({ type: 'tool.started', runId, incidentId: 'inc-acks', data: { i } });
    // Each event is refused at least once: no stream holds the subject yet. (`inflight` counts
    // the events waiting out a retry's backoff; read here, as the publisher exposes no such count.)
    await events.numbered();
    await waitUntil(() => (events as unknown as { inflight: number }).inflight === 3, 5_000, 'the three events waiting to be sent again');
    expect(events.stats.published).toBe(0);
    await ensureRunsStream(ctx.nats, ctx.prefix);
    await events.flush(15_000);
    expect(events.stats).toEqual({ published: 3, dropped: 0 });
    expect(await stored(runId)).toEqual([1, 2, 3]);
  });
});
