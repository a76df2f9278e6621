import { DeliverPolicy, jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { RunEvent, allRunsSubject, runSubject, runsStreamName } from '@bosun/contract';
import { escapeControl } from './terminal.js';

/** Options of {@link followEvents}. */
export interface FollowOptions {
  prefix: string;
  /** Only this run's events; all runs when absent. */
  runId?: string;
  /** Replay from the start of the stream (default), or only new events. */
  from?: 'start' | 'new';
  signal?: AbortSignal;
}

/**
 * Follows run events from the JetStream stream with an ordered consumer: a late subscriber
 * replays what it missed, in stream order. Messages that do not parse are skipped.
 */
export async function* followEvents(nc: NatsConnection, options: FollowOptions): AsyncGenerator<RunEvent> {
  const js = jetstream(nc);
  const consumer = await js.consumers.get(runsStreamName(options.prefix), {
    filter_subjects: options.runId ? runSubject(options.prefix, options.runId) : allRunsSubject(options.prefix),
    deliver_policy: options.from === 'new' ? DeliverPolicy.New : DeliverPolicy.All,
  });
  const messages = await consumer.consume();
  const stop = () => void messages.close();
  options.signal?.addEventListener('abort', stop, { once: true });
  try {
    for await (const m of messages) {
      let value: unknown;
      try {
        value = m.json();
      } catch {
        continue;
      }
      const parsed = RunEvent.safeParse(value);
      if (parsed.success) yield parsed.data;
    }
  } finally {
    options.signal?.removeEventListener('abort', stop);
    // Done following (aborted, or the caller stopped): a failure to close the consumer changes nothing read.
    await messages.close().catch(() => undefined);
  }
}

export { SeqOrder } from '@bosun/transport';

const short = (v: unknown, n = 160) => {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  const flat = (s ?? '').replace(/\s+/g, ' ');
  return flat.length > n ? `${flat.slice(0, n)}…` : flat;
};

/**
 * A field of an event's data as text, whole: a string as it is, another value as JSON (not
 * `[object Object]`); `undefined` for a field that is not there.
 */
const text = (v: unknown): string => (typeof v === 'string' ? v : (JSON.stringify(v) ?? 'undefined'));

type EventData = RunEvent['data'];

/** The `[i] tool args` of the calls of an `approval.requested` event that need approval. */
function callsNeedingApproval(d: EventData): string {
  const calls = (d.calls as { index: number; tool: string; args: unknown; needsApproval: boolean }[] | undefined) ?? [];
  return calls
    .filter((c) => c.needsApproval)
    .map((c) => `[${c.index}] ${c.tool} ${short(c.args, 80)}`)
    .join(', ');
}

/** The detail of a `run.completed` or `run.failed` event: status, cancellation, incomplete parts, calls in doubt, reason. */
function runEnd(d: EventData): string {
  const c = d.cancelled as { by?: unknown; reason?: unknown } | undefined;
  const cancelled = c ? ` by ${text(c.by ?? '?')}: ${short(c.reason ?? '', 120)}` : '';
  const inDoubt = inDoubtCount(d.inDoubt);
  return `${text(d.status ?? '')}${cancelled}${d.stalled ? ` (${text(d.stalled)} incomplete)` : ''}${inDoubt ? ` (${inDoubt} in doubt)` : ''}${d.reason ? ` ${short(d.reason)}` : ''}`;
}

/** What each event type shows after its type and agent; types not named here show nothing more. */
const DETAIL: Partial<Record<RunEvent['type'], (d: EventData) => string>> = {
  'run.started': (d) => short((d.incident as { summary?: unknown } | undefined)?.summary ?? ''),
  'run.routed': (d) => `→ ${(d.specialists as string[] | undefined)?.join(', ') ?? ''}`,
  'agent.progress': (d) => `${text(d.state ?? '')} ${short(d.message ?? '', 100)}`,
  'agent.delegated': (d) => short(d.task, 100),
  'model.called': (d) =>
    `${text(d.model)} ${text(d.durationMs)}ms${Array.isArray(d.calls) && d.calls.length ? ` calls ${d.calls.join(', ')}` : ''}`,
  'model.context_trimmed': (d) =>
    `${text(d.action)} (${text(d.cause)}) ${text(d.beforeTokens)} → ${text(d.afterTokens)} tokens of ${text(d.contextTokens)}`,
  'tool.started': (d) => `${text(d.tool)} ${short(d.args, 80)}`,
  'tool.completed': (d) => `${text(d.tool)} ${text(d.durationMs)}ms${d.isError ? ' (tool error)' : ''}`,
  'tool.failed': (d) => `${text(d.tool)} ${short(d.error ?? '', 120)}`,
  'tool.in_doubt': (d) => `${text(d.tool)} ${short(d.error ?? '', 120)}`,
  'approval.requested': (d) => `${text(d.approvalId)}: ${callsNeedingApproval(d)}`,
  'approval.resolved': (d) =>
    `${text(d.approvalId)} ${text(d.status)} by ${text(d.decidedBy ?? '?')}${d.denyReason ? ` (${text(d.denyReason)})` : ''}`,
  'tool.progress': (d) => `${text(d.tool)} ${text(d.progress)}${d.total ? `/${text(d.total)}` : ''}`,
  'tool.routing': (d) => `${text(d.action)}${Array.isArray(d.loaded) ? ` ${d.loaded.join(', ')}` : ''}`,
  'agent.stalled': (d) => `INCOMPLETE: ${short(d.lastWords, 120)}`,
  'agent.failed': (d) => `INCOMPLETE: ${short(d.reason, 120)}`,
  'codeact.script': (d) => `step ${text(d.step)}, ${text(d.chars)} chars: ${short(d.script, 100)}`,
  'codeact.result': (d) => `${text(d.tag)} after ${text(d.toolCalls)} calls: ${short(d.message ?? d.value ?? '', 100)}`,
  'codeact.output': (d) => short(d.console, 120),
  'codeact.replayed': (d) =>
    d.key === undefined
      ? `step ${text(d.step)} run again (${text(d.calls)} calls in its journal)`
      : `call ${text(d.index)} ${text(d.tool)} from the ${text(d.source)}`,
  'codeact.limit': (d) => `${text(d.limit)}: ${short(d.message, 100)}`,
  'run.completed': runEnd,
  'run.failed': runEnd,
};

/**
 * One line describing an event, for terminals. Whatever comes from the event's data (incident
 * text, model output, arguments) is printed with its control characters escaped: an event is one
 * line, and nothing in it can drive the terminal.
 */
export function formatEvent(e: RunEvent): string {
  const who = e.agent ? ` ${e.agent}` : '';
  const detail = DETAIL[e.type]?.(e.data) ?? '';
  return escapeControl(
    `${e.at.slice(11, 23)} ${e.runId} #${String(e.seq).padStart(3)} ${e.type.padEnd(15)}${who}${detail ? `  ${detail}` : ''}`,
  );
}

/** The `count` of a run event's `inDoubt` field, 0 when there is none. */
function inDoubtCount(v: unknown): number {
  const n = v !== null && typeof v === 'object' ? (v as { count?: unknown }).count : undefined;
  return typeof n === 'number' ? n : 0;
}
