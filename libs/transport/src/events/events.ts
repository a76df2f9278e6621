import type { RedisClient } from '../base/connections.js';
import { createInbox, headers, type Msg, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import { boundJson, errorMessage, eventSubject, jsonDepth, type EventType, type RunEvent, sleep } from '@bosun/contract';
import type { Logger } from '@bosun/config';
import { keys } from '../keys.js';
import { metrics } from '../base/metrics.js';

/** Fields of an event that the emitter supplies. */
export interface EmitInput {
  type: EventType;
  runId: string;
  incidentId: string;
  agent?: string | undefined;
  data?: Record<string, unknown>;
}

/** The event `input` becomes under number `seq`, stamped now. */
function runEvent(input: EmitInput, seq: number): RunEvent {
  return {
    v: 1,
    type: input.type,
    runId: input.runId,
    incidentId: input.incidentId,
    seq,
    at: new Date().toISOString(),
    ...(input.agent === undefined ? {} : { agent: input.agent }),
    data: input.data ?? {},
  };
}

/** Something that publishes run events. Emitting never blocks the caller. */
export interface EventSink {
  emit(event: EmitInput): void;
  /** Resolves once everything emitted so far has been handed to NATS. */
  flush(): Promise<void>;
  /**
   * Resolves once every event emitted so far has its `seq` (not once NATS has it). A process that
   * hands its part of a run on awaits it first, so what it emitted is numbered before anything a
   * later step of the run emits in another process (`agent.completed` before `run.completed`).
   */
  numbered?(): Promise<void>;
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
  /**
   * Largest message the NATS server accepts, in bytes. Default: the connected server's
   * `max_payload`, or {@link DEFAULT_MAX_PAYLOAD} while there is no connection.
   */
  maxPayloadBytes?: number;
  /** How long a run's event counter is kept after its first event; default 8 days (a day past the checkpoints). */
  seqTtlSeconds?: number;
  /** How long an event waits for the stream's ack before it is sent again; default 5 s. */
  ackTimeoutMs?: number;
}

const SEQ_TTL_SECONDS = 8 * 24 * 3600;

/** The max payload assumed while no NATS server has said its own: 1 MiB, nats-server's default. */
export const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

/** Bytes of a message kept for its headers (`Nats-Msg-Id`), which count against the max payload. */
export const EVENT_HEADER_ROOM = 512;

/** Levels of objects and arrays an event's `data` keeps; deeper ones are cut with a marker. */
export const EVENT_DATA_DEPTH = 64;

/**
 * An event as the JSON body of a NATS message of at most `maxBytes` UTF-8 bytes. An event that
 * fits (and nests at most {@link EVENT_DATA_DEPTH} levels) is sent as it is. Otherwise its `data`
 * is cut with `boundJson` — the longest strings shortened, each ending with a
 * `[TRUNCATED by bosun: …]` marker, then long arrays, then deep nesting — and the event gets
 * `truncated`, the list of what was cut. The envelope (`type`, `runId`, `seq`, …) is never cut,
 * so the event still parses as a `RunEvent`. Never throws.
 */
export function encodeEvent(event: RunEvent, maxBytes: number): { body: string; truncated?: string[] } {
  if (jsonDepth(event.data, EVENT_DATA_DEPTH) <= EVENT_DATA_DEPTH) {
    try {
      const body = JSON.stringify(event);
      if (Buffer.byteLength(body, 'utf8') <= maxBytes) return { body };
    } catch {
      // Not serialisable as it is (a bigint, a cycle): bounded below.
    }
  }
  const { data, truncated: _earlier, ...envelope } = event;
  const shell = Buffer.byteLength(JSON.stringify({ ...envelope, data: {}, truncated: [] }), 'utf8');
  // Room for the notes of what was cut; what the notes do not use is not given back to data.
  const notesRoom = Math.min(4096, Math.floor(maxBytes / 8));
  const bounded = boundJson(data, { maxDepth: EVENT_DATA_DEPTH, maxBytes: Math.max(0, maxBytes - shell - notesRoom), path: 'data' });
  const kept =
    bounded.value !== null && typeof bounded.value === 'object' && !Array.isArray(bounded.value)
      ? (bounded.value as Record<string, unknown>)
      : {};
  let notes = bounded.cut;
  for (;;) {
    const body = JSON.stringify({ ...envelope, data: kept, truncated: notes });
    if (Buffer.byteLength(body, 'utf8') <= maxBytes || notes.length <= 1) return { body, truncated: notes };
    const half = Math.ceil(notes.length / 2) - 1;
    notes = [...notes.slice(0, half), `… and ${notes.length - half} more cuts`];
  }
}

/**
 * Publishes run events on `<prefix>.runs.<runId>.<type>`. `seq` comes from a RedisClient counter per
 * run, so events from different processes of one run are numbered in one sequence; the events a
 * process emits for a run in one tick take one INCRBY (a block of consecutive numbers). A run never
 * waits on this: {@link emit} returns at once, and while NATS is away events are kept up to a
 * bound and then dropped with a counter.
 */
export class EventPublisher implements EventSink {
  readonly stats: EventStats = { published: 0, dropped: 0 };
  private readonly prefix: string;
  private readonly redis: RedisClient;
  private readonly log: Logger;
  private readonly bufferLimit: number;
  private readonly buffer: Outgoing[] = [];
  private nc: NatsConnection | null = null;
  /** The subscription the stream's acks come to, `<inbox>.<token>`, one per connection. */
  private acks: { inbox: string; sub: Subscription } | null = null;
  /** Events sent and not yet acked by the stream, by the token of their reply subject. */
  private readonly unacked = new Map<string, Unacked>();
  private tokens = 0;
  private sweeper: NodeJS.Timeout | null = null;
  private readonly ackTimeoutMs: number;
  private readonly maxPayloadBytes: number | undefined;
  private readonly seqTtl: number;
  /** Events whose retry is waiting out its backoff. */
  private inflight = 0;
  private pending = new Set<Promise<void>>();
  /** Events emitted this tick, by run, waiting for their numbers (see {@link number}). */
  private readonly unnumbered = new Map<string, EmitInput[]>();

  constructor(options: EventPublisherOptions) {
    this.prefix = options.prefix;
    this.redis = options.redis;
    this.log = options.log;
    this.bufferLimit = options.bufferLimit ?? 10_000;
    this.maxPayloadBytes = options.maxPayloadBytes;
    this.seqTtl = options.seqTtlSeconds ?? SEQ_TTL_SECONDS;
    this.ackTimeoutMs = options.ackTimeoutMs ?? 5_000;
    this.connect(options.nats);
  }

  /** Hands over a (new) NATS connection and flushes the buffer into it. */
  attach(nats: NatsConnection | null): void {
    this.connect(nats);
    if (nats) this.drainBuffer();
  }

  private connect(nats: NatsConnection | null): void {
    if (this.acks) {
      // The old connection's subscription; a connection already closed has dropped it itself.
      try {
        this.acks.sub.unsubscribe();
      } catch (err) {
        this.log.debug({ err }, 'could not unsubscribe from the acks of the earlier NATS connection');
      }
      this.acks = null;
    }
    this.nc = nats;
    if (!nats) return;
    const inbox = createInbox((nats as { options?: { inboxPrefix?: string } }).options?.inboxPrefix);
    const sub = nats.subscribe(`${inbox}.*`, {
      callback: (err, msg) => {
        // The subscription itself failed (a permissions violation, say): the events wait for
        // acks that cannot come, are sent again, and are dropped and counted; the cause is here.
        if (err) return this.log.warn({ err, inbox }, 'the subscription to the stream acks of events failed');
        this.acked(msg, inbox);
      },
    });
    this.acks = { inbox, sub };
  }

  /** The largest body an event may have now: the server's max payload less room for headers. */
  private bodyLimit(): number {
    return (this.maxPayloadBytes ?? this.nc?.info?.max_payload ?? DEFAULT_MAX_PAYLOAD) - EVENT_HEADER_ROOM;
  }

  /** The event's body within the current limit; a cut is logged (it is also in the event). */
  private encode(event: RunEvent): Outgoing['body'] {
    const limit = this.bodyLimit();
    const { body, truncated } = encodeEvent(event, limit);
    if (truncated)
      this.log.warn({ runId: event.runId, type: event.type, seq: event.seq, limit, truncated }, 'event cut to fit the NATS max payload');
    return { text: body, limit };
  }

  emit(input: EmitInput): void {
    metrics.event(input.type);
    const waiting = this.unnumbered.get(input.runId);
    if (waiting) {
      waiting.push(input);
      return;
    }
    this.unnumbered.set(input.runId, [input]);
    // Numbered once the code running now is done (before any I/O): the events this process emits
    // for the run meanwhile share one INCRBY, in the order they were emitted.
    process.nextTick(() => this.number(input.runId));
  }

  /**
   * Numbers the run's events emitted since the last numbering with one INCRBY on the run's counter
   * — a block of consecutive numbers, so the sequence has no gaps — and sends them in order.
   */
  private number(runId: string): void {
    const batch = this.unnumbered.get(runId) ?? [];
    this.unnumbered.delete(runId);
    const seqKey = keys.seq(this.prefix, runId);
    const p = this.redis
      .incrby(seqKey, batch.length)
      .then((last) => {
        const first = last - batch.length + 1;
        // The counter's expiry is housekeeping: a failed EXPIRE leaves a key that lives on, never a lost
        // event, so it is only logged at debug (as a failed count of dropped events is, below).
        if (first === 1)
          void this.redis
            .expire(seqKey, this.seqTtl)
            .catch((err: unknown) => this.log.debug({ err, runId }, 'could not set the expiry of the run event counter'));
        batch.forEach((input, i) => {
          const event = runEvent(input, first + i);
          this.send({
            subject: eventSubject(this.prefix, runId, input.type),
            event,
            body: this.encode(event),
            msgID: `${runId}-${first + i}`,
          });
        });
      })
      .catch((err: unknown) => {
        for (const input of batch) {
          this.stats.dropped++;
          metrics.eventsDropped.inc();
          this.log.warn({ err, type: input.type, runId }, 'event dropped: could not number it');
        }
      })
      .finally(() => this.pending.delete(p));
    this.pending.add(p);
  }

  /**
   * Publishes to the stream with a reply subject on this publisher's one ack subscription, so an
   * event is known to be stored — a publish without an ack would be lost silently while a
   * clustered stream elects a new leader. No event waits on its own ack (a JetStream publish
   * apiece costs a request, a timer and a promise: twice the client CPU): {@link acked} confirms
   * them as the acks come, and one timer sends again those with no ack after `ackTimeoutMs`. A
   * failed or unanswered publish is retried with backoff under the same message id (the stream
   * drops duplicates); past the retries, or while NATS is away, events wait in a bounded buffer.
   */
  private send(item: Outgoing, attempt = 0): void {
    const nc = this.nc;
    const acks = this.acks;
    if (!nc || !acks) return this.keep(item);
    // Encoded for another server's limit (kept while NATS was away): encoded again for this one.
    if (item.body.limit > this.bodyLimit()) item.body = this.encode(item.event);
    const token = String(++this.tokens);
    const h = headers();
    h.set('Nats-Msg-Id', item.msgID);
    this.unacked.set(token, { item, attempt, sentAt: Date.now() });
    try {
      nc.publish(item.subject, item.body.text, { headers: h, reply: `${acks.inbox}.${token}` });
    } catch (err) {
      // A connection closing or draining refuses at once: retried, as an unanswered one is.
      this.unacked.delete(token);
      return this.retry(item, attempt, err);
    }
    this.sweeper ??= setInterval(() => this.sweep(), Math.min(1_000, this.ackTimeoutMs)).unref();
  }

  /** The stream's answer to the event sent under `<inbox>.<token>`: stored, or to be sent again. */
  private acked(msg: Msg, inbox: string): void {
    const token = msg.subject.slice(inbox.length + 1);
    const entry = this.unacked.get(token);
    // An ack that came after its event was given up on and sent again: the resend has its own token.
    if (!entry) return;
    this.unacked.delete(token);
    const problem = ackProblem(msg);
    if (problem === undefined) this.stats.published++;
    else this.retry(entry.item, entry.attempt, new Error(problem));
    this.idle();
  }

  /** Sends again the events whose ack is overdue. */
  private sweep(): void {
    const overdue = Date.now() - this.ackTimeoutMs;
    for (const [token, entry] of this.unacked) {
      if (entry.sentAt > overdue) continue;
      this.unacked.delete(token);
      this.retry(entry.item, entry.attempt, new Error(`no ack from the stream in ${this.ackTimeoutMs} ms`));
    }
    this.idle();
  }

  private idle(): void {
    if (this.unacked.size > 0 || !this.sweeper) return;
    clearInterval(this.sweeper);
    this.sweeper = null;
  }

  private retry(item: Outgoing, attempt: number, err: unknown): void {
    if (attempt >= 7) return this.drop(err);
    const delay = Math.min(250 * 2 ** attempt, 4_000);
    // Still on its way while it waits to be retried: flush() waits for it too.
    this.inflight++;
    const t = setTimeout(() => {
      this.inflight--;
      this.send(item, attempt + 1);
    }, delay);
    t.unref();
  }

  private keep(item: Outgoing): void {
    if (this.buffer.length >= this.bufferLimit) {
      this.buffer.shift();
      this.drop(new Error('event buffer full while NATS is unreachable'));
    }
    this.buffer.push(item);
  }

  private drop(err: unknown): void {
    this.stats.dropped++;
    metrics.eventsDropped.inc();
    // Counted where operators can see it (`bosun stats`), not only in this process.
    void this.redis.hincrby(keys.events(this.prefix), 'dropped', 1).catch((e: unknown) => {
      // Redis away too: the drop is still counted in this process's stats and logged below.
      this.log.debug({ err: e }, 'could not count a dropped event in Redis');
    });
    if (this.stats.dropped % 1000 === 1) this.log.warn({ dropped: this.stats.dropped, err }, 'events dropped');
  }

  private drainBuffer(): void {
    const items = this.buffer.splice(0, this.buffer.length);
    for (const item of items) this.send(item);
  }

  /** See {@link EventSink.numbered}; waits at most `timeoutMs` (a Redis that does not answer never holds a task). */
  async numbered(timeoutMs = 5_000): Promise<void> {
    // Events emitted in this tick are numbered on the next one (their INCRBY is then pending).
    if (this.unnumbered.size > 0) await new Promise((r) => process.nextTick(r));
    if (this.pending.size === 0) return;
    const settled = new AbortController();
    await Promise.race([
      Promise.allSettled([...this.pending]).then(() => settled.abort()),
      sleep(timeoutMs, settled.signal, { unref: true }),
    ]);
  }

  /** Waits (at most `timeoutMs`) until every event emitted so far is stored or given up on. */
  async flush(timeoutMs = 10_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    // Events emitted in this tick are numbered on the next one.
    if (this.unnumbered.size > 0) await new Promise((r) => process.nextTick(r));
    while (this.pending.size > 0 && Date.now() < until) await Promise.race([Promise.allSettled([...this.pending]), sleep(100)]);
    if (this.nc) this.drainBuffer();
    while (this.inflight + this.unacked.size > 0 && Date.now() < until) await sleep(20);
  }
}

/** An event on its way to NATS: its body, and the body limit it was encoded for. */
interface Outgoing {
  subject: string;
  event: RunEvent;
  body: { text: string; limit: number };
  msgID: string;
}

/** An event sent and waiting for the stream's ack: which try it is, and when it went. */
interface Unacked {
  item: Outgoing;
  attempt: number;
  sentAt: number;
}

/**
 * Why the stream's answer is not an ack of a stored event, or undefined when it is: a status
 * message (503, no stream took the subject) or a JetStream API error (`{"error": …}`).
 */
function ackProblem(msg: Msg): string | undefined {
  if (msg.headers?.hasError) return `the stream answered ${msg.headers.code} ${msg.headers.description}`;
  try {
    const ack = JSON.parse(new TextDecoder().decode(msg.data)) as { error?: { description?: string }; seq?: unknown };
    if (ack.error) return `the stream refused the event: ${ack.error.description ?? JSON.stringify(ack.error)}`;
    return typeof ack.seq === 'number' ? undefined : 'the stream answered without a sequence number';
  } catch (err) {
    return `the stream's answer is not JSON: ${errorMessage(err)}`;
  }
}

/** An {@link EventSink} that keeps events in memory (unit tests). */
export class MemoryEventSink implements EventSink {
  readonly events: RunEvent[] = [];
  private seq = new Map<string, number>();

  emit(input: EmitInput): void {
    const seq = (this.seq.get(input.runId) ?? 0) + 1;
    this.seq.set(input.runId, seq);
    this.events.push(runEvent(input, seq));
  }

  async flush(): Promise<void> {}
}
