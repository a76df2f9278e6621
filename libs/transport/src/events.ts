import type { RedisClient } from './connections.js';
import type { NatsConnection } from '@nats-io/transport-node';
import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import { eventSubject, type EventType, type RunEvent } from '@bosun/contract';
import type { Logger } from '@bosun/config';
import { keys } from './keys.js';

/** Fields of an event that the emitter supplies. */
export interface EmitInput {
  type: EventType;
  runId: string;
  incidentId: string;
  agent?: string | undefined;
  data?: Record<string, unknown>;
}

/** Something that publishes run events. Emitting never blocks the caller. */
export interface EventSink {
  emit(event: EmitInput): void;
  /** Resolves once everything emitted so far has been handed to NATS. */
  flush(): Promise<void>;
}

/** Counters of an {@link EventPublisher}. */
export interface EventStats {
  published: number;
  /** Events dropped because NATS was unreachable and the buffer was full, or sequencing failed. */
  dropped: number;
}

/** Options of {@link EventPublisher}. */
export interface EventPublisherOptions {
  prefix: string;
  redis: RedisClient;
  /** May be null while NATS is unreachable: events are buffered (bounded). */
  nats: NatsConnection | null;
  log: Logger;
  /** Events kept while NATS is not connected; older ones are dropped past it. Default 10,000. */
  bufferLimit?: number;
}

const SEQ_TTL_SECONDS = 8 * 24 * 3600;

/**
 * Publishes run events on `<prefix>.runs.<runId>.<type>`. `seq` comes from a RedisClient counter per
 * run, so events from different processes of one run are numbered in one sequence. A run never
 * waits on this: {@link emit} returns at once, and while NATS is away events are kept up to a
 * bound and then dropped with a counter.
 */
export class EventPublisher implements EventSink {
  readonly stats: EventStats = { published: 0, dropped: 0 };
  private readonly prefix: string;
  private readonly redis: RedisClient;
  private readonly log: Logger;
  private readonly bufferLimit: number;
  private readonly buffer: { subject: string; body: string; msgID: string }[] = [];
  private js: JetStreamClient | null = null;
  private inflight = 0;
  private pending = new Set<Promise<void>>();

  constructor(options: EventPublisherOptions) {
    this.prefix = options.prefix;
    this.redis = options.redis;
    this.js = options.nats ? jetstream(options.nats) : null;
    this.log = options.log;
    this.bufferLimit = options.bufferLimit ?? 10_000;
  }

  /** Hands over a (new) NATS connection and flushes the buffer into it. */
  attach(nats: NatsConnection | null): void {
    this.js = nats ? jetstream(nats) : null;
    if (nats) this.drainBuffer();
  }

  emit(input: EmitInput): void {
    const seqKey = keys.seq(this.prefix, input.runId);
    const p = this.redis
      .incr(seqKey)
      .then((seq) => {
        if (seq === 1) void this.redis.expire(seqKey, SEQ_TTL_SECONDS).catch(() => undefined);
        const event: RunEvent = {
          v: 1,
          type: input.type,
          runId: input.runId,
          incidentId: input.incidentId,
          seq,
          at: new Date().toISOString(),
          ...(input.agent === undefined ? {} : { agent: input.agent }),
          data: input.data ?? {},
        };
        this.send(eventSubject(this.prefix, input.runId, input.type), JSON.stringify(event), `${input.runId}-${seq}`);
      })
      .catch((err: unknown) => {
        this.stats.dropped++;
        this.log.warn({ err, type: input.type, runId: input.runId }, 'event dropped: could not number it');
      })
      .finally(() => this.pending.delete(p));
    this.pending.add(p);
  }

  /**
   * Publishes through JetStream and waits (asynchronously) for the stream's ack, so an event is
   * known to be stored — a core publish would be lost silently while a clustered stream elects a
   * new leader. A failed publish is retried with backoff under the same message id (the stream
   * drops duplicates); past the retries, or while NATS is away, events wait in a bounded buffer.
   */
  private send(subject: string, body: string, msgID: string, attempt = 0): void {
    const js = this.js;
    if (!js) return this.keep({ subject, body, msgID });
    this.inflight++;
    js.publish(subject, body, { msgID, timeout: 5_000 })
      .then(() => {
        this.stats.published++;
      })
      .catch((err: unknown) => {
        if (attempt >= 7) return this.drop(err);
        const delay = Math.min(250 * 2 ** attempt, 4_000);
        const t = setTimeout(() => this.send(subject, body, msgID, attempt + 1), delay);
        t.unref();
      })
      .finally(() => {
        this.inflight--;
      });
  }

  private keep(item: { subject: string; body: string; msgID: string }): void {
    if (this.buffer.length >= this.bufferLimit) {
      this.buffer.shift();
      this.drop(new Error('event buffer full while NATS is unreachable'));
    }
    this.buffer.push(item);
  }

  private drop(err: unknown): void {
    this.stats.dropped++;
    // Counted where operators can see it (`bosun stats`), not only in this process.
    void this.redis.hincrby(keys.events(this.prefix), 'dropped', 1).catch(() => undefined);
    if (this.stats.dropped % 1000 === 1) this.log.warn({ dropped: this.stats.dropped, err: (err as Error).message }, 'events dropped');
  }

  private drainBuffer(): void {
    const items = this.buffer.splice(0, this.buffer.length);
    for (const { subject, body, msgID } of items) this.send(subject, body, msgID);
  }

  /** Waits (at most `timeoutMs`) until every event emitted so far is stored or given up on. */
  async flush(timeoutMs = 10_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (this.pending.size > 0 && Date.now() < until) await Promise.race([Promise.allSettled([...this.pending]), new Promise((r) => setTimeout(r, 100))]);
    if (this.js) this.drainBuffer();
    while (this.inflight > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
  }
}

/** An {@link EventSink} that keeps events in memory (unit tests). */
export class MemoryEventSink implements EventSink {
  readonly events: RunEvent[] = [];
  private seq = new Map<string, number>();

  emit(input: EmitInput): void {
    const seq = (this.seq.get(input.runId) ?? 0) + 1;
    this.seq.set(input.runId, seq);
    this.events.push({
      v: 1,
      type: input.type,
      runId: input.runId,
      incidentId: input.incidentId,
      seq,
      at: new Date().toISOString(),
      ...(input.agent === undefined ? {} : { agent: input.agent }),
      data: input.data ?? {},
    });
  }

  async flush(): Promise<void> {}
}
