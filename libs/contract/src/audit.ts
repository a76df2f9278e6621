/**
 * The audit stream: one entry for every mutating tool call the tool gateway answered or refused,
 * written before the caller hears the outcome. A Redis stream at {@link auditStreamKey}, capped
 * near {@link AUDIT_STREAM_MAXLEN} entries; each entry is the field/value list of
 * {@link auditFields}, read back with {@link parseAuditEntry}. A stored format (not part of the v1
 * wire contract), written by the gateway and read by `bosun audit`.
 */
import { z } from 'zod';
import { parseStored } from './errors.js';
import { jsonText } from './hash-fields.js';
import { Actor } from './identity.js';

/** The Redis key of the audit stream: `<prefix>:audit`. */
export function auditStreamKey(prefix: string): string {
  return `${prefix}:audit`;
}

/** About how many entries the stream keeps (`XADD … MAXLEN ~`): older ones are trimmed. */
export const AUDIT_STREAM_MAXLEN = 100_000;

/**
 * What became of an audited call: `ok` (answered), `tool-error` (the tool answered with an
 * error), `error` (it failed), `in-doubt` (sent, outcome unknown), `refused` (by policy or for
 * want of an approval).
 */
export const AuditStatus = z.enum(['ok', 'tool-error', 'error', 'in-doubt', 'refused']);
export type AuditStatus = z.infer<typeof AuditStatus>;

/** One entry of the audit stream, as values. */
export interface AuditEntry {
  /** ISO time of the entry. */
  at: string;
  /** The call's idempotency key. */
  key: string;
  runId: string;
  incidentId: string;
  agent: string;
  /** Namespaced tool name. */
  tool: string;
  /** The call's arguments with secrets redacted (the writer redacts them). */
  args: unknown;
  /** The approval the call ran under, or null when none. */
  approvalId: string | null;
  /** Who approved it, or null when nobody did. */
  approver: string | null;
  status: AuditStatus;
  /**
   * Everyone whose approval the call ran under, as each decision path resolved them (name,
   * verified, path, client address, Slack team and user): one person, or every vote of a
   * two-person rule. Empty without an approval, and in entries written before it was recorded.
   */
  deciders?: Actor[];
}

/** The fields of an entry, in the order the gateway writes them. */
export const AUDIT_FIELDS = [
  'at',
  'key',
  'runId',
  'incidentId',
  'agent',
  'tool',
  'args',
  'approvalId',
  'approver',
  'status',
  'deciders',
] as const satisfies readonly (keyof AuditEntry)[];

/** An absent approval or approver is stored as an empty string. */
const orNull = z.string().transform((v) => (v === '' ? null : v));

/**
 * An entry as stored: every field a string, `args` as JSON, no approval (or approver) as an
 * empty string. Parsing gives an {@link AuditEntry}.
 */
export const AuditStreamEntry = z.object({
  at: z.string(),
  key: z.string(),
  runId: z.string(),
  incidentId: z.string(),
  agent: z.string(),
  tool: z.string(),
  args: jsonText(z.unknown()),
  approvalId: orNull,
  approver: orNull,
  status: AuditStatus,
  // Absent in entries written before deciders were recorded.
  deciders: jsonText(z.array(Actor)).optional(),
});

/** The field/value list to `XADD` for an entry: every field of {@link AUDIT_FIELDS}, in that order. */
export function auditFields(entry: AuditEntry): string[] {
  const text: Record<(typeof AUDIT_FIELDS)[number], string> = {
    ...entry,
    args: JSON.stringify(entry.args ?? null),
    approvalId: entry.approvalId ?? '',
    approver: entry.approver ?? '',
    deciders: JSON.stringify(entry.deciders ?? []),
  };
  return AUDIT_FIELDS.flatMap((field) => [field, text[field]]);
}

/**
 * An entry from the field/value list a stream read returns (`XRANGE`, `XREVRANGE`). Throws a
 * `BadStoredValueError` naming each missing or bad field; `what` names the entry in it.
 */
export function parseAuditEntry(flat: readonly string[], what: string): AuditEntry {
  const fields = new Map<string, string>();
  for (let i = 0; i + 1 < flat.length; i += 2) fields.set(flat[i]!, flat[i + 1]!);
  const parsed = parseStored(AuditStreamEntry, Object.fromEntries(fields), what);
  // zod types an `unknown` field as optional; it is always there once parsed.
  const { deciders, ...rest } = parsed;
  return { ...rest, args: parsed.args, deciders: deciders ?? [] };
}
