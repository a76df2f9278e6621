/**
 * The tool-call record: what the tool gateway stores under each call's idempotency key, and the
 * states it goes through. A stored format (a Redis hash); the code that changes it is
 * `libs/transport/src/stores/tool-records.ts`, used by the gateway and by `bosun ack`.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { ToolCallJob, ToolCallResult } from './schemas.js';
import { flag, jsonText } from './hash-fields.js';
import { callFingerprint } from './ids.js';

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
 * How long a claim holds a mutating call for the gateway running it, renewed while it runs
 * ({@link TOOL_CALL_LEASE_RENEW_MS}): an attempt that finds the call `inflight` under a live
 * lease waits for its outcome instead of declaring it in doubt.
 */
export const TOOL_CALL_LEASE_MS = 6_000;

/** How often the gateway running a call renews its lease: three renewals fit in one lease. */
export const TOOL_CALL_LEASE_RENEW_MS = 2_000;

/**
 * The digest a record keeps of the call it was claimed for: sha256 (hex) of its key, tool and
 * arguments as canonical JSON (the real ones, secrets included: only the digest is stored, salted
 * with the key). A later call under the same key with another tool or other arguments is refused.
 */
export function toolCallDigest(key: string, tool: string, args: unknown): string {
  return createHash('sha256')
    .update(`${key}\n${callFingerprint(tool, args)}`)
    .digest('hex');
}

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
 * (`libs/transport/src/stores/tool-records.ts`). The gateway's own outcome writes (`done`, `in-doubt`) do
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
  {
    from: 'in-doubt',
    to: 'done',
    by: 'gateway',
    when: 'the gateway that ran the call records its outcome after another declared it in doubt ("in doubt, later seen done")',
  },
  {
    from: 'retry',
    to: 'done',
    by: 'gateway',
    when: "the gateway that ran the call records its outcome before the operator's retry is claimed",
  },
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
  /** {@link toolCallDigest} of the call it was claimed for (absent in records of earlier versions). */
  digest: z.string().optional(),
  /** The claim's token: which attempt of which gateway runs the call; only it records the outcome. */
  owner: z.string().optional(),
  /** Until when (epoch ms, Redis's clock) the owner holds the running call; renewed while it runs. */
  leaseUntil: z.coerce.number().optional(),
  /** ISO time the call was declared in doubt; kept when its outcome is seen later. */
  inDoubtAt: z.string().optional(),
  /** ISO time the outcome of a call declared in doubt was recorded after all ("in doubt, later seen done"). */
  seenDoneAt: z.string().optional(),
  /** An outcome that arrived after an operator had already resolved the call (JSON); the operator's result stays. */
  lateResult: jsonText(ToolCallResult).optional(),
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
        code: 'refused',
        durationMs: 0,
      };
}
