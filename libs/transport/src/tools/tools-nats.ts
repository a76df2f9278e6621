import { createInbox, headers, type Msg, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import { BosunError, ToolCallResult, abortable, parseWith, type Catalog, type ToolCallJob, errorMessage } from '@bosun/contract';
import type { Logger } from '@bosun/config';
import { SpanKind, inSpan, traceCarrier } from '../base/tracing.js';
import { toolOutcome, type ToolCallOptions, type ToolClient } from './tools.js';

/** The subject tool calls are requested on: `<prefix>.tools.call` (docs/protocol.md). */
export const toolCallSubject = (prefix: string) => `${prefix}.tools.call`;

/** The queue group the gateways answer tool calls in: each request reaches one gateway. */
export const TOOL_CALL_QUEUE_GROUP = 'tool-gateway';

/** How often a gateway tells the caller that a call it runs is still running. */
export const TOOL_CALL_HEARTBEAT_MS = 1_000;

/**
 * How long a caller waits for the first word from a gateway, and then between two of its words
 * (heartbeats or the result), before it takes the gateway for lost and re-sends the call by the
 * queue. A gateway does not start a request older than this less {@link TOOL_CALL_HEARTBEAT_MS}.
 */
export const TOOL_CALL_LAPSE_MS = 5_000;

/** Header of a request: when (epoch ms, the caller's clock) the caller stops waiting for a first word. */
const EXPIRES_HEADER = 'Bosun-Expires';
/** Header of a reply refusing a request that is not a tool call (the reply has no data). */
const REFUSED_HEADER = 'Bosun-Refused';

/** What one request over NATS came to. */
type Outcome =
  | { kind: 'result'; result: ToolCallResult }
  | { kind: 'no-responders' }
  | { kind: 'lapsed'; heard: boolean }
  | { kind: 'refused'; reason: string }
  | { kind: 'timeout' };

/** Options of {@link NatsToolClient}. */
export interface NatsToolClientOptions {
  /** The NATS connection, null while there is none (calls then go by the queue). */
  nats: () => NatsConnection | null;
  prefix: string;
  /** Where the catalog is read (the queue path is not involved). */
  catalog: Pick<ToolClient, 'catalog'>;
  /** The queue path: when no gateway answers on NATS, and to re-send a call whose gateway was lost. */
  fallback: Pick<ToolClient, 'call'>;
  log: Pick<Logger, 'warn'>;
  /** Default {@link TOOL_CALL_LAPSE_MS} (tests shorten it). */
  lapseMs?: number;
}

/**
 * Calls tools by NATS request/reply to the gateways' queue group, falling back to the queue path
 * (same call, same idempotency key) when no gateway is subscribed, there is no NATS connection, or
 * the gateway that took the call falls silent (no heartbeat for {@link TOOL_CALL_LAPSE_MS}): the
 * gateway that takes the re-sent job answers from the call's record, or declares a mutating call
 * found in flight in doubt (docs/durability.md, "Tool calls").
 */
export class NatsToolClient implements ToolClient {
  private readonly options: NatsToolClientOptions;
  private readonly lapseMs: number;
  private mux: { nc: NatsConnection; sub: Subscription; inbox: string } | undefined;
  private readonly waiting = new Map<string, (msg: Msg) => void>();
  private nextToken = 0;

  constructor(options: NatsToolClientOptions) {
    this.options = options;
    this.lapseMs = options.lapseMs ?? TOOL_CALL_LAPSE_MS;
  }

  /** The catalog, from {@link NatsToolClientOptions.catalog}. */
  catalog(): Promise<Catalog> {
    return this.options.catalog.catalog();
  }

  async call(call: ToolCallJob, options: ToolCallOptions = {}): Promise<ToolCallResult> {
    const nc = this.options.nats();
    if (!nc || nc.isClosed() || nc.isDraining()) return this.options.fallback.call(call, options);
    const attributes = {
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': call.tool,
      'bosun.tool.key': call.key,
      'bosun.tool.transport': 'nats',
    };
    const outcome = await inSpan(`execute_tool ${call.tool}`, { kind: SpanKind.PRODUCER, attributes }, async (span) => {
      const out = await abortable(this.request(nc, call, options.timeoutMs), options.signal, `tool call ${call.key}`);
      span.setAttribute('bosun.tool.outcome', out.kind === 'result' ? toolOutcome(out.result) : out.kind);
      return out;
    });
    switch (outcome.kind) {
      case 'result':
        return outcome.result;
      case 'no-responders':
        return this.options.fallback.call(call, options);
      case 'lapsed':
        this.options.log.warn(
          { key: call.key, tool: call.tool, heard: outcome.heard },
          'the tool gateway fell silent on NATS; re-sending the call by the queue (its record answers it)',
        );
        return this.options.fallback.call(call, options);
      case 'refused':
        throw new BosunError('invalid_input', `the tool gateway refused the call ${call.key}: ${outcome.reason}`);
      case 'timeout':
        throw new BosunError('retryable', `the tool call ${call.key} (${call.tool}) did not finish within ${options.timeoutMs} ms`);
    }
  }

  /** Sends one request and waits for its result, its refusal, or silence. */
  private request(nc: NatsConnection, call: ToolCallJob, timeoutMs: number | undefined): Promise<Outcome> {
    const { inbox } = this.subscribed(nc);
    const token = String(this.nextToken++);
    const h = headers();
    h.set(EXPIRES_HEADER, String(Date.now() + this.lapseMs));
    return new Promise<Outcome>((resolve) => {
      let heard = false;
      let lapse: NodeJS.Timeout | undefined;
      const deadline = timeoutMs === undefined ? undefined : setTimeout(() => done({ kind: 'timeout' }), timeoutMs);
      const done = (outcome: Outcome) => {
        clearTimeout(lapse);
        clearTimeout(deadline);
        this.waiting.delete(token);
        resolve(outcome);
      };
      const listen = () => {
        clearTimeout(lapse);
        lapse = setTimeout(() => done({ kind: 'lapsed', heard }), this.lapseMs);
      };
      this.waiting.set(token, (msg) => {
        if (msg.headers?.code === 503) return done({ kind: 'no-responders' });
        const refused = msg.headers?.get(REFUSED_HEADER);
        if (refused) return done({ kind: 'refused', reason: refused });
        if (msg.data.length === 0) {
          heard = true;
          return listen();
        }
        try {
          done({ kind: 'result', result: parseWith(ToolCallResult, msg.json(), 'tool call result') });
        } catch (err) {
          done({ kind: 'refused', reason: `its reply is not a tool call result (${errorMessage(err)})` });
        }
      });
      listen();
      try {
        nc.publish(toolCallSubject(this.options.prefix), JSON.stringify({ ...call, ...traceCarrier() }), {
          reply: `${inbox}.${token}`,
          headers: h,
        });
      } catch {
        // Closed or draining since it was checked: the queue takes the call.
        done({ kind: 'no-responders' });
      }
    });
  }

  /** The reply subscription on this connection (one for every call: `<inbox>.<token>`). */
  private subscribed(nc: NatsConnection): { inbox: string } {
    if (this.mux?.nc === nc) return this.mux;
    this.mux?.sub.unsubscribe();
    const inbox = createInbox();
    const sub = nc.subscribe(`${inbox}.*`, {
      callback: (err, msg) => {
        if (err) return;
        const token = msg.subject.slice(inbox.length + 1);
        this.waiting.get(token)?.(msg);
      },
    });
    this.mux = { nc, sub, inbox };
    return this.mux;
  }

  /** Stops listening for replies (calls still waiting end by their lapse and go by the queue). */
  close(): void {
    this.mux?.sub.unsubscribe();
    this.mux = undefined;
  }
}

/** A request that is not a tool call: the reply refuses it with this reason. */
export class NotAToolCallError extends BosunError {
  constructor(message: string) {
    super('not_a_tool_call', message);
    this.name = 'NotAToolCallError';
  }
}

/** Options of {@link serveToolCalls}. */
export interface ToolCallResponderOptions {
  nc: NatsConnection;
  prefix: string;
  /** Calls run at once (the others wait in the subscription). */
  concurrency: number;
  /** Runs one request's data (parsed JSON). Throws {@link NotAToolCallError} for one that is not a call. */
  handle: (data: unknown) => Promise<ToolCallResult>;
  log: Pick<Logger, 'warn' | 'error' | 'debug'>;
  /** Default {@link TOOL_CALL_HEARTBEAT_MS}. */
  heartbeatMs?: number;
}

/** The gateway's side of {@link NatsToolClient}. */
export interface ToolCallResponder {
  /** Stops taking requests and waits for the calls under way to answer. */
  close(): Promise<void>;
}

/**
 * Answers tool-call requests in the gateways' queue group, at most `concurrency` at once,
 * sending a heartbeat (an empty message) every `heartbeatMs` while a call runs, so the caller
 * can tell a slow call from a lost gateway. A request whose caller stopped waiting before it
 * could start (see {@link TOOL_CALL_LAPSE_MS}; the callers' and gateways' clocks are taken to agree
 * within a second) is dropped unstarted: the caller has re-sent it
 * by the queue.
 */
export function serveToolCalls(options: ToolCallResponderOptions): ToolCallResponder {
  const heartbeatMs = options.heartbeatMs ?? TOOL_CALL_HEARTBEAT_MS;
  const running = new Set<Promise<void>>();
  const slots: (() => void)[] = [];
  let closing = false;
  const sub = options.nc.subscribe(toolCallSubject(options.prefix), { queue: TOOL_CALL_QUEUE_GROUP });

  const answer = async (msg: Msg): Promise<void> => {
    const header = msg.headers?.get(EXPIRES_HEADER);
    const expires = header ? Number(header) : Infinity;
    // Too late for the first heartbeat to reach the caller before it gives up (with a heartbeat
    // of margin for the network and the clocks): leave it to the queue.
    if (closing || !(Date.now() <= expires - 2 * heartbeatMs)) {
      options.log.debug({ subject: msg.subject }, 'dropping a tool call request its caller no longer waits for');
      return;
    }
    const beat = setInterval(() => msg.respond(), heartbeatMs);
    try {
      let data: unknown;
      try {
        data = msg.json();
      } catch {
        data = msg.string();
      }
      const result = await options.handle(data);
      msg.respond(JSON.stringify(result));
    } catch (err) {
      const h = headers();
      h.set(REFUSED_HEADER, errorMessage(err).replace(/[\r\n]+/g, ' '));
      if (!(err instanceof NotAToolCallError)) options.log.error({ err }, 'could not answer a tool call request');
      msg.respond(undefined, { headers: h });
    } finally {
      clearInterval(beat);
    }
  };

  const loop = (async () => {
    for await (const msg of sub) {
      if (running.size >= options.concurrency) await new Promise<void>((r) => slots.push(r));
      const p: Promise<void> = answer(msg).finally(() => {
        running.delete(p);
        slots.shift()?.();
      });
      running.add(p);
    }
  })();
  loop.catch((err: unknown) => options.log.warn({ err }, 'the tool call subscription ended'));

  return {
    async close() {
      closing = true;
      if (!sub.isClosed())
        await sub.drain().catch((err: unknown) => options.log.warn({ err }, 'could not drain the tool call subscription'));
      // Its end was logged where it was started (above); close only waits for it.
      await loop.catch(() => undefined);
      await Promise.all(running);
    },
  };
}
