import type { Redis } from 'ioredis';
import type { NatsConnection } from '@nats-io/transport-node';
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
  redis: Redis;
  /** May be null while NATS is unreachable: events are buffered (bounded). */
  nats: NatsConnection | null;
  log: Logger;
  /** Events kept while NATS is not connected; older ones are dropped past it. Default 10,000. */
  bufferLimit?: number;
}

const SEQ_TTL_SECONDS = 8 * 24 * 3600;

/**
 * Publishes run events on `<prefix>.runs.<runId>.<type>`. `seq` comes from a Redis counter per
 * run, so events from different processes of one run are numbered in one sequence. A run never
 * waits on this: {@link emit} returns at once, and while NATS is away events are kept up to a
 * bound and then dropped with a counter.
 */
export class EventPublisher implements EventSink {
  readonly stats: EventStats = { published: 0, dropped: 0 };
  private readonly prefix: string;
  private readonly redis: Redis;
  private nats: NatsConnection | null;
  private readonly log: Logger;
  private readonly bufferLimit: number;
  private readonly buffer: { subject: string; body: string }[] = [];
  private pending = new Set<Promise<void>>();

  constructor(options: EventPublisherOptions) {
    this.prefix = options.prefix;
    this.redis = options.redis;
    this.nats = options.nats;
    this.log = options.log;
    this.bufferLimit = options.bufferLimit ?? 10_000;
  }

  /** Hands over a (new) NATS connection and flushes the buffer into it. */
  attach(nats: NatsConnection | null): void {
    this.nats = nats;
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
        this.send(eventSubject(this.prefix, input.runId, input.type), JSON.stringify(event));
      })
      .catch((err: unknown) => {
        this.stats.dropped++;
        this.log.warn({ err, type: input.type, runId: input.runId }, 'event dropped: could not number it');
      })
      .finally(() => this.pending.delete(p));
    this.pending.add(p);
  }

  private send(subject: string, body: string): void {
    const nc = this.nats;
    if (nc && !nc.isClosed()) {
      try {
        nc.publish(subject, body);
        this.stats.published++;
        return;
      } catch (err) {
        this.log.debug({ err }, 'publish failed; buffering');
      }
    }
    if (this.buffer.length >= this.bufferLimit) {
      this.buffer.shift();
      this.stats.dropped++;
      // Counted where operators can see it (`bosun stats`), not only in this process.
      void this.redis.hincrby(keys.events(this.prefix), 'dropped', 1).catch(() => undefined);
      if (this.stats.dropped % 1000 === 1) this.log.warn({ dropped: this.stats.dropped }, 'NATS unreachable: events dropped');
    }
    this.buffer.push({ subject, body });
  }

  private drainBuffer(): void {
    const items = this.buffer.splice(0, this.buffer.length);
    for (const { subject, body } of items) this.send(subject, body);
  }

  async flush(): Promise<void> {
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
    const nc = this.nats;
    if (nc && !nc.isClosed()) {
      this.drainBuffer();
      await nc.flush().catch(() => undefined);
    }
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
