import { Queue, type QueueEvents } from 'bullmq';
import { openQueueEvents } from '../base/queue-events.js';
import type { RedisClient } from '../base/connections.js';
import {
  BosunError,
  Catalog,
  TOOLS_QUEUE,
  TOOL_CALL_JOB,
  ToolCallResult,
  abortable,
  parseWith,
  sleep,
  type ToolCallJob,
} from '@bosun/contract';
import { keys } from '../keys.js';
import type { ToolOutcome } from '../base/metrics.js';
import { SpanKind, inSpan, traceCarrier } from '../base/tracing.js';

/** How agents reach tools. The real one goes through the gateway; tests may use a fake. */
export interface ToolClient {
  /** The current tool catalog. */
  catalog(): Promise<Catalog>;
  /**
   * Executes one call (idempotent by `call.key`) and returns its result. `signal`: stop waiting
   * for the answer (a drain or a lost lock hands the task over; the gateway still records the
   * outcome under the key, and the task's next owner is answered from that record).
   */
  call(call: ToolCallJob, options?: ToolCallOptions): Promise<ToolCallResult>;
}

/** Options of {@link ToolClient.call}. */
export interface ToolCallOptions {
  /** How long to wait for the answer. Default: no limit. */
  timeoutMs?: number;
  /** Aborted: stop waiting for the answer (the call rejects). */
  signal?: AbortSignal | undefined;
}

/**
 * A call's outcome, the one definition behind `bosun_tool_calls_total{outcome}`, the spans'
 * `bosun.tool.outcome` and what `bosun runs show` and the console show: `in_doubt`; `error` (it
 * could not run); `tool_error` (it ran and reported its own error, MCP `isError`); `ok`.
 */
export function toolOutcome(result: Pick<ToolCallResult, 'status' | 'isError' | 'inDoubt'>): ToolOutcome {
  return result.inDoubt ? 'in_doubt' : result.status === 'error' ? 'error' : result.isError ? 'tool_error' : 'ok';
}

/** Options of {@link ToolCatalog}. */
export interface ToolCatalogOptions {
  redis: RedisClient;
  prefix: string;
  /** How long to wait for the gateway's catalog to appear. Default 30 s. */
  catalogWaitMs?: number;
  /** How long a catalog read is reused. Default 2 s. */
  catalogCacheMs?: number;
}

/**
 * The gateway's tool catalog as the agents read it (one `GET` of `keys.catalog`), whatever path
 * their calls take: both tool clients hand their `catalog()` to one of these.
 */
export class ToolCatalog {
  private readonly redis: RedisClient;
  private readonly prefix: string;
  private readonly catalogWaitMs: number;
  private readonly catalogCacheMs: number;
  private cached: { at: number; text: string; catalog: Catalog } | undefined;
  /** The read under way: tasks that ask at once share it (and the parsed catalog) rather than each reading their own. */
  private reading: Promise<Catalog> | undefined;

  constructor(options: ToolCatalogOptions) {
    this.redis = options.redis;
    this.prefix = options.prefix;
    this.catalogWaitMs = options.catalogWaitMs ?? 30_000;
    this.catalogCacheMs = options.catalogCacheMs ?? 2_000;
  }

  /**
   * The catalog, reused for `catalogCacheMs`. Callers that ask while it is being read share that
   * read: thousands of tasks starting at once hold one parsed catalog, not one copy each.
   */
  async catalog(): Promise<Catalog> {
    if (this.cached && Date.now() - this.cached.at < this.catalogCacheMs) return this.cached.catalog;
    this.reading ??= this.readCatalog().finally(() => (this.reading = undefined));
    return this.reading;
  }

  private async readCatalog(): Promise<Catalog> {
    const started = Date.now();
    for (;;) {
      const text = await this.redis.get(keys.catalog(this.prefix));
      if (text !== null) {
        // An unchanged catalog stays the same object: what tasks derive from it can be shared.
        const catalog = text === this.cached?.text ? this.cached.catalog : parseWith(Catalog, JSON.parse(text), 'tool catalog');
        this.cached = { at: Date.now(), text, catalog };
        return catalog;
      }
      if (Date.now() - started > this.catalogWaitMs) {
        throw new BosunError(
          'no_catalog',
          `no tool catalog from the gateway after ${this.catalogWaitMs} ms: is the tool gateway running under BOSUN_PREFIX=${this.prefix}?`,
        );
      }
      await sleep(250);
    }
  }
}

/** Options of {@link QueueToolClient}. */
export interface QueueToolClientOptions extends ToolCatalogOptions {
  /** The catalog reader to share (default: one of its own from these options). */
  catalog?: ToolCatalog;
}

/** The BullMQ handles of the queue path, opened on first use. */
interface QueuePath {
  queue: Queue;
  events: QueueEvents;
}

/**
 * Calls tools by adding `tool-call` jobs to the `tools` queue, with the idempotency key as the
 * job id (a call re-sent after a crash is the same job), and waiting for the gateway's result.
 * Its `Queue` and `QueueEvents` (with the blocking connection BullMQ makes for it) open on the first call (or
 * {@link ready}): a specialist whose calls go over NATS opens them only if it falls back.
 */
export class QueueToolClient implements ToolClient {
  private readonly redis: RedisClient;
  private readonly prefix: string;
  private readonly reader: ToolCatalog;
  private path: Promise<QueuePath> | undefined;

  constructor(options: QueueToolClientOptions) {
    this.redis = options.redis;
    this.prefix = options.prefix;
    this.reader = options.catalog ?? new ToolCatalog(options);
  }

  /** Opens the queue path now and resolves when its events listener is connected. */
  async ready(): Promise<void> {
    await this.opened();
  }

  /** The queue path, opened once; a failed open is tried again by the next call. */
  private opened(): Promise<QueuePath> {
    this.path ??= this.open().catch((err: unknown) => {
      this.path = undefined;
      throw err;
    });
    return this.path;
  }

  private async open(): Promise<QueuePath> {
    const queue = new Queue(TOOLS_QUEUE, { connection: this.redis, prefix: this.prefix });
    try {
      // Listening from the stream's end as it is now, before the first job is added, so that
      // no completion is missed however late the listener's first read leaves. BullMQ reads
      // on a blocking duplicate of the client of its own, closed with the listener.
      const events = await openQueueEvents(queue, this.redis);
      return { queue, events };
    } catch (err) {
      await queue.close().catch(() => undefined);
      throw err;
    }
  }

  /** The catalog, from the shared {@link ToolCatalog}. */
  catalog(): Promise<Catalog> {
    return this.reader.catalog();
  }

  /** Sends the call as a `tool-call` job (carrying this span's trace context) and waits for its result. */
  async call(call: ToolCallJob, options: ToolCallOptions = {}): Promise<ToolCallResult> {
    const attributes = {
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': call.tool,
      'bosun.tool.key': call.key,
      'bosun.tool.transport': 'queue',
    };
    const { queue, events } = await this.opened();
    return inSpan(`execute_tool ${call.tool}`, { kind: SpanKind.PRODUCER, attributes }, async (span) => {
      const job = await queue.add(
        TOOL_CALL_JOB,
        { ...call, ...traceCarrier() },
        {
          jobId: call.key,
          attempts: 3,
          backoff: { type: 'exponential', delay: 500 },
          removeOnComplete: { age: 24 * 3600, count: 100_000 },
          removeOnFail: { age: 7 * 24 * 3600 },
        },
      );
      const value: unknown = await abortable(job.waitUntilFinished(events, options.timeoutMs), options.signal, `tool call ${call.key}`);
      const result = parseWith(ToolCallResult, value, 'tool call result');
      span.setAttribute('bosun.tool.outcome', toolOutcome(result));
      return result;
    });
  }

  /** Closes the queue path if it was opened (one still opening is closed once it is open). */
  async close(): Promise<void> {
    const path = this.path;
    this.path = undefined;
    if (!path) return;
    // An open that failed has closed what it made; there is nothing left to close.
    const opened = await path.catch(() => undefined);
    if (!opened) return;
    await opened.events.close();
    await opened.queue.close();
  }
}
