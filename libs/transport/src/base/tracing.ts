import {
  INVALID_SPAN_CONTEXT,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  context,
  isSpanContextValid,
  propagation,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
} from '@opentelemetry/api';
import type { RedisClient } from './connections.js';

/**
 * Bosun's spans, through `@opentelemetry/api` only: without an SDK (a service starts one only
 * when the OTEL_* variables ask, `@bosun/otel`) every span is a no-op and nothing is carried.
 * docs/observability.md ("Traces") lists the spans.
 */
export const tracer = trace.getTracer('bosun');

export { SpanKind };

/** The W3C trace context a job carries at the top of its data (`traceparent`, `tracestate`). */
export interface TraceCarrier {
  traceparent?: string;
  tracestate?: string;
}

/** A W3C traceparent: version 00, a trace id and a span id that are not all zeros, flags. */
const TRACEPARENT = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;

/** The active trace context as job data fields (empty without an SDK or outside a span). */
export function traceCarrier(ctx: Context = context.active()): TraceCarrier {
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  const out: TraceCarrier = {};
  if (carrier.traceparent) out.traceparent = carrier.traceparent;
  if (carrier.tracestate) out.tracestate = carrier.tracestate;
  return out;
}

/**
 * The trace context carried by job data (any value): its `traceparent` when it is a valid W3C
 * one, else undefined. A malformed one is ignored, never a reason to refuse the job.
 */
export function carriedContext(data: unknown): Context | undefined {
  if (data === null || typeof data !== 'object') return undefined;
  const { traceparent, tracestate } = data as Record<string, unknown>;
  if (typeof traceparent !== 'string' || !TRACEPARENT.test(traceparent)) return undefined;
  const carrier: Record<string, string> = { traceparent };
  if (typeof tracestate === 'string' && tracestate.length <= 512) carrier.tracestate = tracestate;
  const ctx = propagation.extract(ROOT_CONTEXT, carrier);
  return trace.getSpanContext(ctx) ? ctx : undefined;
}

/** Options of {@link inSpan}. */
export interface SpanOptions {
  kind?: SpanKind;
  attributes?: Attributes;
  /** The parent; default the active context. */
  parent?: Context;
  links?: Link[];
  /** Errors that end the work without failing it (a job parked or handed back): the span ends without an error status. */
  expected?: (err: unknown) => boolean;
}

/**
 * Runs `fn` in a new span (its context active inside), ends the span when `fn` settles, and
 * marks it failed with the exception when `fn` throws (the error is thrown on unchanged).
 */
export async function inSpan<T>(name: string, options: SpanOptions, fn: (span: Span) => Promise<T>): Promise<T> {
  // Without an SDK: no span, no context switch, the work runs as it would without tracing.
  if (!recording()) return fn(NO_SPAN);
  const parent = options.parent ?? context.active();
  const span = tracer.startSpan(
    name,
    {
      kind: options.kind ?? SpanKind.INTERNAL,
      ...(options.attributes ? { attributes: options.attributes } : {}),
      links: options.links ?? [],
    },
    parent,
  );
  try {
    return await context.with(trace.setSpan(parent, span), () => fn(span));
  } catch (err) {
    if (options.expected?.(err)) throw err;
    if (err instanceof Error) span.recordException(err);
    span.setStatus({ code: SpanStatusCode.ERROR, ...(err instanceof Error ? { message: err.message } : {}) });
    throw err;
  } finally {
    span.end();
  }
}

/** What {@link inSpan} hands `fn` when nothing records: a span that ignores what it is told. */
const NO_SPAN = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

/** The key of a run's trace notes: the first pass of the run and the last span of each part. */
function notesKey(prefix: string, runId: string): string {
  return `${prefix}:trace:${runId}`;
}

const NOTES_TTL_SECONDS = 8 * 24 * 3600;

/**
 * Where a run's trace goes on: what a new pass of the run (`part` `run`) or a new attempt of one
 * of its tasks (`part` = the task id) hangs under and links to. A process that resumes work after
 * a crash or a park starts a new span; it is linked to the span of the attempt before it (which
 * may never have ended, if its process died), so one incident stays one trace. Kept in Redis
 * (`<prefix>:trace:<runId>`, 8 days) only while an SDK is recording: without one this reads and
 * writes nothing.
 */
export class TraceNotes {
  constructor(private readonly options: { redis: RedisClient; prefix: string }) {}

  /** The span context of the previous attempt of `part`, as a link (undefined when there is none, or no SDK). */
  async previous(runId: string, part: string): Promise<{ first?: Context; link?: Link }> {
    if (!recording()) return {};
    const [first, last] = await this.options.redis.hmget(notesKey(this.options.prefix, runId), 'run', part);
    const firstCtx = first ? carriedContext({ traceparent: first }) : undefined;
    const lastCtx = last ? carriedContext({ traceparent: last }) : undefined;
    const lastSpan = lastCtx ? trace.getSpanContext(lastCtx) : undefined;
    return {
      ...(firstCtx ? { first: firstCtx } : {}),
      ...(lastSpan ? { link: { context: lastSpan, attributes: { 'bosun.link': 'previous attempt' } } } : {}),
    };
  }

  /** Notes `span` as the latest attempt of `part` (and as the run's first pass when `first`). */
  async note(runId: string, part: string, span: Span, first = false): Promise<void> {
    const tp = traceCarrier(trace.setSpan(ROOT_CONTEXT, span)).traceparent;
    if (!tp) return;
    const key = notesKey(this.options.prefix, runId);
    const fields: Record<string, string> = { [part]: tp };
    if (first) fields.run = tp;
    await this.options.redis.multi().hset(key, fields).expire(key, NOTES_TTL_SECONDS).exec();
  }
}

let recordingSeen: boolean | undefined;

/**
 * Whether an OpenTelemetry SDK is running in this process (whatever it samples). Asked once,
 * with a span that is never ended (so never exported): without an SDK the API's span has no
 * valid trace id; an SDK gives every span one, sampled or not. A service starts its SDK before
 * any work, so the answer does not change.
 */
export function recording(): boolean {
  recordingSeen ??= isSpanContextValid(tracer.startSpan('bosun.probe').spanContext());
  return recordingSeen;
}

/** Adds an event to the active span (nothing without an SDK or outside a span). */
export function spanEvent(name: string, attributes?: Attributes): void {
  trace.getActiveSpan()?.addEvent(name, attributes);
}

/** Sets attributes on the active span. */
export function spanAttributes(attributes: Attributes): void {
  trace.getActiveSpan()?.setAttributes(attributes);
}
