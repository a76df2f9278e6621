/**
 * The tool-call record: what the tool gateway stores under each call's idempotency key, and the
 * states it goes through. A stored format (a Redis hash); the code that changes it is
 * `libs/transport/src/tool-records.ts`, used by the gateway and by `bosun ack`.
 */
import { z } from 'zod';
import { ToolCallJob, ToolCallResult } from './schemas.js';
import { flag, jsonText } from './hash-fields.js';

/**
 * The Redis key of the record of one call: `<prefix>:toolcall:<key>`, a hash of the fields of
 * {@link ToolCallRecord}.
 */
export function toolCallRecordKey(prefix: string, key: string): string {
  return `${prefix}:toolcall:${key}`;
}

/** How long a record is kept after it was last claimed or finished: 7 days. */
export const TOOL_CALL_RECORD_TTL_SECONDS = 7 * 24 * 3600;

/**
 * The states of a record:
 * - `inflight`: the gateway claimed the call and may have sent it to its MCP server;
 * - `done`: `result` holds the recorded result (the tool's answer, a failure, or an operator's resolution);
 * - `in-doubt`: a mutating call was sent, and nobody knows whether it took effect;
 * - `retry`: an operator asked for one more attempt (`bosun ack --retry`).
 */
export const TOOL_CALL_STATES = ['inflight', 'done', 'in-doubt', 'retry'] as const;
export const ToolCallState = z.enum(TOOL_CALL_STATES);
export type ToolCallState = z.infer<typeof ToolCallState>;

/** A state, or `none` for a key that has no record yet. */
export type ToolCallStateOrNone = ToolCallState | 'none';

/** Who moves a record: the gateway, or an operator through `bosun ack`. */
export type ToolCallActor = 'gateway' | 'operator';

/** One allowed change of state. */
export interface ToolCallTransition {
  from: ToolCallStateOrNone;
  to: ToolCallState;
  by: ToolCallActor;
  /** When it happens. */
  when: string;
}

/**
 * Every change of state a record may go through; nothing else moves a record. The claim and the
 * operator's changes check the state they start from in the same atomic script that changes it
 * (`libs/transport/src/tool-records.ts`). The gateway's own outcome writes (`done`, `in-doubt`) do
 * not: the gateway that claimed and sent the call is the one that writes them.
 */
export const TOOL_CALL_TRANSITIONS: readonly ToolCallTransition[] = [
  { from: 'none', to: 'inflight', by: 'gateway', when: 'a new call is claimed' },
  { from: 'retry', to: 'inflight', by: 'gateway', when: "the operator's retry job is claimed" },
  { from: 'inflight', to: 'inflight', by: 'gateway', when: 'a read-only call found in flight is claimed again (its earlier attempt died)' },
  { from: 'inflight', to: 'done', by: 'gateway', when: 'the call ended: answered, failed, or never sent' },
  { from: 'inflight', to: 'in-doubt', by: 'gateway', when: 'a mutating call was sent and its outcome is unknown' },
  { from: 'in-doubt', to: 'done', by: 'operator', when: '`bosun ack --done` (it took effect) or `--skip` (treat it as not executed)' },
  { from: 'in-doubt', to: 'retry', by: 'operator', when: '`bosun ack --retry`' },
  { from: 'retry', to: 'in-doubt', by: 'operator', when: '`bosun ack --retry` could not add the retry job' },
];

/** The transition from `from` to `to`, or undefined when the record may not change so. */
export function toolCallTransition(from: ToolCallStateOrNone, to: ToolCallState): ToolCallTransition | undefined {
  return TOOL_CALL_TRANSITIONS.find((t) => t.from === from && t.to === to);
}

/** What an operator did with an in-doubt call (`bosun ack`). */
export const ToolCallResolution = z.object({
  action: z.enum(['done', 'retry', 'skip']),
  by: z.string(),
  /** ISO time. */
  at: z.string(),
});
export type ToolCallResolution = z.infer<typeof ToolCallResolution>;

/**
 * The record of one tool call: the Redis hash at {@link toolCallRecordKey}, every field a string.
 * Parsing turns the JSON fields into values and the flags into booleans. Only `state` is always
 * there: the claim writes the call's fields, an outcome adds `result`, an operator `resolution`.
 */
export const ToolCallRecord = z.object({
  state: ToolCallState,
  /** Namespaced tool name. */
  tool: z.string().optional(),
  /** The call's arguments (JSON), with secrets redacted. */
  args: jsonText(ToolCallJob.shape.args).optional(),
  runId: z.string().optional(),
  incidentId: z.string().optional(),
  agent: z.string().optional(),
  /** ISO time of the claim. */
  startedAt: z.string().optional(),
  readOnly: flag.optional(),
  /** The approval the call ran under; empty when none. */
  approvalId: z.string().optional(),
  /** `true` when `args` had secrets redacted: the stored arguments are not the real ones. */
  argsRedacted: flag.optional(),
  /** The recorded result (JSON), once `done`. */
  result: jsonText(ToolCallResult).optional(),
  /** The operator's resolution (JSON), once resolved. */
  resolution: jsonText(ToolCallResolution).optional(),
});
export type ToolCallRecord = z.output<typeof ToolCallRecord>;

/** The result an operator's `done` or `skip` records for an in-doubt call. */
export function resolvedResult(key: string, tool: string, action: 'done' | 'skip'): ToolCallResult {
  return action === 'done'
    ? { v: 1, key, tool, status: 'ok', isError: false, text: 'Resolved by an operator: the call took effect.', durationMs: 0 }
    : {
        v: 1,
        key,
        tool,
        status: 'error',
        isError: true,
        text: '',
        error: 'Resolved by an operator: treated as not executed.',
        durationMs: 0,
      };
}
