import { BosunError } from '@bosun/contract';
import type { EventId, EventStore, StreamId } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** Options of a {@link SessionEventStore}. */
export interface SessionEventStoreOptions {
  /** How long the events of an answered request stay replayable. Default 5 min. */
  retainMs?: number;
  /**
   * The most bytes (as JSON) kept for the session. Past it, the oldest answered requests' events
   * are dropped first. Default 1 MiB.
   */
  maxBytes?: number;
  /** The most events kept per stream (the oldest go first). Default 100. */
  maxEventsPerStream?: number;
  /** The clock (tests). */
  now?: () => number;
}

interface StoredEvent {
  seq: number;
  message: JSONRPCMessage;
  bytes: number;
}

interface Stream {
  events: StoredEvent[];
  bytes: number;
  /** When the last event was a response: the request is answered. */
  answeredAt?: number;
}

/**
 * The MCP face's SSE event store: what the face sent on one session's streams, so that a client
 * whose stream broke reconnects with `Last-Event-ID` and gets what it missed, the call's outcome
 * included (see the SDK's `StreamableHTTPServerTransport` option `eventStore`).
 *
 * One store per session, in the gateway process's memory: it ends with the session. That is
 * enough because the session itself lives in one process (a reconnect reaches only the process
 * that holds the session; any other answers 404, and the client starts a new session and presents
 * its approval id). Memory is bounded: answered requests are dropped after `retainMs`, the
 * session's total after `maxBytes`, and each stream after `maxEventsPerStream` events.
 *
 * Event ids are `<streamId>.<n>`, `n` counting up in the session.
 */
export class SessionEventStore implements EventStore {
  private readonly streams = new Map<StreamId, Stream>();
  private readonly retainMs: number;
  private readonly maxBytes: number;
  private readonly maxEventsPerStream: number;
  private readonly now: () => number;
  private seq = 0;
  private bytes = 0;

  constructor(options: SessionEventStoreOptions = {}) {
    this.retainMs = options.retainMs ?? 5 * 60_000;
    this.maxBytes = options.maxBytes ?? 1024 * 1024;
    this.maxEventsPerStream = options.maxEventsPerStream ?? 100;
    this.now = options.now ?? Date.now;
  }

  /** Bytes held (as JSON), for tests and diagnostics. */
  get size(): number {
    return this.bytes;
  }

  storeEvent(streamId: StreamId, message: JSONRPCMessage): Promise<EventId> {
    const now = this.now();
    let stream = this.streams.get(streamId);
    if (!stream) {
      stream = { events: [], bytes: 0 };
      this.streams.set(streamId, stream);
    }
    const event: StoredEvent = { seq: ++this.seq, message, bytes: JSON.stringify(message).length };
    stream.events.push(event);
    stream.bytes += event.bytes;
    this.bytes += event.bytes;
    stream.answeredAt = 'id' in message && ('result' in message || 'error' in message) ? now : undefined;
    while (stream.events.length > this.maxEventsPerStream) this.dropOldest(stream);
    this.prune(now, streamId);
    return Promise.resolve(`${streamId}.${event.seq}`);
  }

  getStreamIdForEventId(eventId: EventId): Promise<StreamId | undefined> {
    const parsed = parseEventId(eventId);
    return Promise.resolve(parsed && this.streams.has(parsed.streamId) ? parsed.streamId : undefined);
  }

  async replayEventsAfter(
    lastEventId: EventId,
    { send }: { send: (eventId: EventId, message: JSONRPCMessage) => Promise<void> },
  ): Promise<StreamId> {
    const parsed = parseEventId(lastEventId);
    const stream = parsed && this.streams.get(parsed.streamId);
    if (!parsed || !stream) throw new BosunError('not_found', `unknown event id ${JSON.stringify(lastEventId)}`);
    // A copy: events stored while a send awaits are written by the transport itself.
    for (const event of [...stream.events]) {
      // Priming events carry no message (`{}`): they only give the client an id to resume from.
      if (event.seq > parsed.seq && 'jsonrpc' in event.message) await send(`${parsed.streamId}.${event.seq}`, event.message);
    }
    return parsed.streamId;
  }

  private dropOldest(stream: Stream): void {
    const dropped = stream.events.shift();
    if (!dropped) return;
    stream.bytes -= dropped.bytes;
    this.bytes -= dropped.bytes;
  }

  /** Drops answered requests past `retainMs`, then the oldest answered ones while over `maxBytes`. */
  private prune(now: number, keep: StreamId): void {
    for (const [id, stream] of this.streams) {
      const expired = stream.answeredAt !== undefined && now - stream.answeredAt > this.retainMs;
      if (id !== keep && (expired || (this.bytes > this.maxBytes && stream.answeredAt !== undefined))) this.drop(id, stream);
    }
  }

  private drop(id: StreamId, stream: Stream): void {
    this.bytes -= stream.bytes;
    this.streams.delete(id);
  }
}

function parseEventId(eventId: string): { streamId: StreamId; seq: number } | undefined {
  const dot = eventId.lastIndexOf('.');
  const seq = Number(eventId.slice(dot + 1));
  return dot > 0 && /^[1-9][0-9]*$/.test(eventId.slice(dot + 1)) && Number.isSafeInteger(seq)
    ? { streamId: eventId.slice(0, dot), seq }
    : undefined;
}
