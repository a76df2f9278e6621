import { describe, expect, it, vi } from 'vitest';
import { headers, type Msg, type MsgHdrs, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import { RunEvent } from '@bosun/contract';
import { createLogger } from '@bosun/config';
import type { RedisClient } from '../base/connections.js';
import { EventPublisher } from './events.js';
import { keys } from '../keys.js';

// The event publisher with in-memory stand-ins: a Redis that counts, and a NATS connection that
// answers JetStream publishes with an ack (or fails, or never answers).

const PREFIX = 'unit';
const RUN = 'r0123456789abcdef0123';

/** The Redis commands the publisher uses: INCRBY/EXPIRE for `seq`, HINCRBY for the drop counter. */
class FakeRedis {
  readonly strings = new Map<string, number>();
  readonly hashes = new Map<string, Map<string, number>>();
  /** The INCRBYs made, as `[key, increment]`. */
  readonly incrbys: [string, number][] = [];
  readonly expires: string[] = [];
  failIncr = false;
  hangIncr = false;

  incrby(key: string, by: number): Promise<number> {
    if (this.failIncr) return Promise.reject(new Error('redis is away'));
    if (this.hangIncr) return new Promise(() => undefined);
    this.incrbys.push([key, by]);
    const n = (this.strings.get(key) ?? 0) + by;
    this.strings.set(key, n);
    return Promise.resolve(n);
  }

  expire(key: string): Promise<number> {
    this.expires.push(key);
    return Promise.resolve(1);
  }

  hincrby(key: string, field: string, by: number): Promise<number> {
    const h = this.hashes.get(key) ?? new Map<string, number>();
    this.hashes.set(key, h);
    h.set(field, (h.get(field) ?? 0) + by);
    return Promise.resolve(h.get(field)!);
  }

  asClient(): RedisClient {
    return this as unknown as RedisClient;
  }
}

interface Published {
  subject: string;
  event: RunEvent;
  msgId: string | undefined;
}

/**
 * What the publisher needs of a connection: a publish with a reply subject, which the stream
 * answers on the publisher's ack subscription (with an ack, an error, or not at all).
 */
class FakeNats {
  readonly published: Published[] = [];
  readonly options = { inboxPrefix: '_INBOX' };
  readonly info = { max_payload: 1024 * 1024 };
  /** How the next publishes are answered, one per publish; past the list, with an ack. */
  answers: ('ack' | 'fail' | 'no-stream' | 'hang')[] = [];
  publishes = 0;
  private readonly subs = new Map<string, (err: Error | null, msg: Msg) => void>();

  subscribe(subject: string, opts: { callback: (err: Error | null, msg: Msg) => void }): Subscription {
    this.subs.set(subject.replace(/\.\*$/, ''), opts.callback);
    return { unsubscribe: () => void this.subs.delete(subject.replace(/\.\*$/, '')) } as unknown as Subscription;
  }

  publish(subject: string, data: string, opts: { headers: MsgHdrs; reply: string }): void {
    this.publishes++;
    const answer = this.answers.shift() ?? 'ack';
    if (answer === 'hang') return;
    const inbox = opts.reply.slice(0, opts.reply.lastIndexOf('.'));
    const reply = (body: unknown, hdrs?: MsgHdrs) =>
      queueMicrotask(() =>
        this.subs.get(inbox)?.(null, {
          subject: opts.reply,
          data: new TextEncoder().encode(body === undefined ? '' : JSON.stringify(body)),
          headers: hdrs,
        } as unknown as Msg),
      );
    if (answer === 'fail') return reply({ error: { code: 503, err_code: 10077, description: 'JetStream system temporarily unavailable' } });
    if (answer === 'no-stream') return reply(undefined, headers(503, 'No Responders'));
    this.published.push({ subject, event: RunEvent.parse(JSON.parse(data)), msgId: opts.headers.get('Nats-Msg-Id') });
    reply({ stream: `${PREFIX}-runs`, seq: this.published.length });
  }

  asConnection(): NatsConnection {
    return this as unknown as NatsConnection;
  }
}

function logLines() {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger({ service: 'unit', destination: { write: (s: string) => void lines.push(JSON.parse(s)) } });
  return { log, lines };
}

function publisher(redis: FakeRedis, nats: FakeNats | null, bufferLimit?: number, ackTimeoutMs?: number) {
  const { log, lines } = logLines();
  const events = new EventPublisher({
    prefix: PREFIX,
    redis: redis.asClient(),
    nats: nats?.asConnection() ?? null,
    log,
    bufferLimit,
    ...(ackTimeoutMs === undefined ? {} : { ackTimeoutMs }),
  });
  return { events, lines };
}

const emit = (events: EventPublisher, n: number) => {
  for (let i = 0; i < n; i++) events.emit({ type: 'model.called', runId: RUN, incidentId: 'inc-1', agent: 'kubernetes', data: { i } });
};

describe('EventPublisher', () => {
  it("numbers a run's events from its Redis counter and publishes each on its subject, with <runId>-<seq> as the message id", async () => {
    const redis = new FakeRedis();
    const nats = new FakeNats();
    const { events } = publisher(redis, nats);
    emit(events, 3);
    await events.flush(2_000);
    expect(nats.published.map((p) => [p.subject, p.event.seq, p.msgId, p.event.data.i])).toEqual([
      [`${PREFIX}.runs.${RUN}.model.called`, 1, `${RUN}-1`, 0],
      [`${PREFIX}.runs.${RUN}.model.called`, 2, `${RUN}-2`, 1],
      [`${PREFIX}.runs.${RUN}.model.called`, 3, `${RUN}-3`, 2],
    ]);
    expect(nats.published[0]!.event).toMatchObject({ v: 1, runId: RUN, incidentId: 'inc-1', agent: 'kubernetes' });
    expect(redis.strings.get(keys.seq(PREFIX, RUN))).toBe(3);
    expect(events.stats).toEqual({ published: 3, dropped: 0 });
  });

  it('numbers the events a process emits for a run in one tick with one INCRBY, and later ones after them, with no gap', async () => {
    const redis = new FakeRedis();
    const nats = new FakeNats();
    const { events } = publisher(redis, nats);
    const other = publisher(redis, nats).events;
    emit(events, 3);
    events.emit({ type: 'run.started', runId: 'r-other', incidentId: 'inc-2', data: {} });
    await new Promise((r) => setImmediate(r));
    other.emit({ type: 'agent.started', runId: RUN, incidentId: 'inc-1', data: {} });
    emit(events, 2);
    await Promise.all([events.flush(2_000), other.flush(2_000)]);
    const seqKey = keys.seq(PREFIX, RUN);
    expect(redis.incrbys).toEqual([
      [seqKey, 3],
      [keys.seq(PREFIX, 'r-other'), 1],
      [seqKey, 1],
      [seqKey, 2],
    ]);
    // The counter's expiry is set once, by the block that starts at 1.
    expect(redis.expires).toEqual([seqKey, keys.seq(PREFIX, 'r-other')]);
    const run = nats.published.filter((p) => p.event.runId === RUN);
    expect(run.map((p) => [p.event.seq, p.event.type, p.event.data.i])).toEqual([
      [1, 'model.called', 0],
      [2, 'model.called', 1],
      [3, 'model.called', 2],
      [4, 'agent.started', undefined],
      [5, 'model.called', 0],
      [6, 'model.called', 1],
    ]);
  });

  it('numbered() resolves once every event emitted so far has its seq, before NATS has acked any', async () => {
    const redis = new FakeRedis();
    const nats = new FakeNats();
    nats.answers.push('hang', 'hang');
    const { events } = publisher(redis, nats);
    emit(events, 2);
    expect(redis.incrbys).toEqual([]);
    await events.numbered();
    expect(redis.strings.get(keys.seq(PREFIX, RUN))).toBe(2);
    expect(events.stats.published).toBe(0);
  });

  it('numbered() gives up at its deadline when Redis does not answer: it never holds a task', async () => {
    const redis = new FakeRedis();
    redis.hangIncr = true;
    const { events } = publisher(redis, new FakeNats());
    emit(events, 1);
    const started = Date.now();
    await events.numbered(50);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('keeps events while NATS is away and publishes them, in order, once a connection is attached', async () => {
    const redis = new FakeRedis();
    const { events } = publisher(redis, null);
    emit(events, 3);
    await events.flush(500);
    expect(events.stats).toEqual({ published: 0, dropped: 0 });
    const nats = new FakeNats();
    events.attach(nats.asConnection());
    await events.flush(2_000);
    expect(nats.published.map((p) => p.event.seq)).toEqual([1, 2, 3]);
    expect(events.stats).toEqual({ published: 3, dropped: 0 });
  });

  it('drops the oldest events past the buffer bound, counting each drop in Redis where operators see it', async () => {
    const redis = new FakeRedis();
    const { events } = publisher(redis, null, 2);
    emit(events, 5);
    await events.flush(500);
    expect(events.stats.dropped).toBe(3);
    expect(redis.hashes.get(keys.events(PREFIX))?.get('dropped')).toBe(3);
    const nats = new FakeNats();
    events.attach(nats.asConnection());
    await events.flush(2_000);
    // The newest two were kept.
    expect(nats.published.map((p) => p.event.seq)).toEqual([4, 5]);
  });

  it('drops (and counts, and logs) the events it cannot number, without throwing at the caller', async () => {
    const redis = new FakeRedis();
    redis.failIncr = true;
    const nats = new FakeNats();
    const { events, lines } = publisher(redis, nats);
    expect(() => emit(events, 2)).not.toThrow();
    await events.flush(500);
    expect(events.stats).toEqual({ published: 0, dropped: 2 });
    expect(nats.publishes).toBe(0);
    expect(lines).toContainEqual(expect.objectContaining({ msg: 'event dropped: could not number it', runId: RUN }));
  });

  it.each([
    ['refused by the stream (a JetStream API error)', 'fail'],
    ['answered by no stream (503, no responders)', 'no-stream'],
  ] as const)('retries a publish %s under the same message id, so the stream keeps one copy', async (_, answer) => {
    const redis = new FakeRedis();
    const nats = new FakeNats();
    nats.answers = [answer];
    const { events } = publisher(redis, nats);
    emit(events, 1);
    await events.flush(5_000);
    expect(nats.publishes).toBe(2);
    expect(nats.published.map((p) => p.msgId)).toEqual([`${RUN}-1`]);
    expect(events.stats).toEqual({ published: 1, dropped: 0 });
  });

  it('sends an event again under the same message id when its ack does not come in time, and waits on no ack of its own', async () => {
    const redis = new FakeRedis();
    const nats = new FakeNats();
    nats.answers = ['hang', 'ack', 'ack'];
    const { events } = publisher(redis, nats, undefined, 100);
    emit(events, 3);
    await events.numbered();
    // All three went out at once; only the first is left without an answer.
    expect(nats.publishes).toBe(3);
    await events.flush(5_000);
    expect(nats.publishes).toBe(4);
    expect(nats.published.map((p) => p.msgId)).toEqual([`${RUN}-2`, `${RUN}-3`, `${RUN}-1`]);
    expect(events.stats).toEqual({ published: 3, dropped: 0 });
  });

  it('drops (and counts) an event the stream refused eight times', async () => {
    const redis = new FakeRedis();
    const nats = new FakeNats();
    nats.answers = Array.from({ length: 8 }, () => 'fail' as const);
    // The backoffs between the eight tries add up to 15.75 s: on a fake clock.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
    try {
      const { events } = publisher(redis, nats);
      emit(events, 1);
      await vi.advanceTimersByTimeAsync(15_700);
      expect(nats.publishes).toBe(7);
      expect(events.stats.dropped).toBe(0);
      await vi.advanceTimersByTimeAsync(100);
      expect(nats.publishes).toBe(8);
      expect(events.stats).toEqual({ published: 0, dropped: 1 });
      expect(redis.hashes.get(keys.events(PREFIX))?.get('dropped')).toBe(1);
    } finally {
      vi.useRealTimers();
    }
  });

  it('never holds up the caller: emit returns at once, and flush gives up at its deadline when NATS does not answer', async () => {
    const redis = new FakeRedis();
    const nats = new FakeNats();
    nats.answers = ['hang'];
    const { events } = publisher(redis, nats);
    const t0 = performance.now();
    emit(events, 1);
    expect(performance.now() - t0).toBeLessThan(50);
    await events.flush(300);
    const waited = performance.now() - t0;
    expect(waited).toBeGreaterThanOrEqual(250);
    expect(waited).toBeLessThan(2_000);
    expect(events.stats.published).toBe(0);
  });
});
