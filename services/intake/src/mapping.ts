import { createHash } from 'node:crypto';
import { INCIDENT_ID_PATTERN, INCIDENT_LIMITS, type IncidentInput, type Severity } from '@bosun/contract';

/** Severity words senders use, and the Bosun severity each means (a source's `severities` come first). */
export const DEFAULT_SEVERITIES: Readonly<Record<string, Severity>> = {
  critical: 'critical',
  page: 'critical',
  error: 'critical',
  high: 'critical',
  p1: 'critical',
  p2: 'critical',
  warning: 'warning',
  warn: 'warning',
  medium: 'warning',
  p3: 'warning',
  info: 'info',
  informational: 'info',
  low: 'info',
  none: 'info',
  p4: 'info',
  p5: 'info',
};

/** The Bosun severity of a sender's word (`warning` when unknown or absent). */
export function severityOf(word: unknown, overrides: Readonly<Record<string, Severity>>): Severity {
  if (typeof word !== 'string') return 'warning';
  const w = word.trim().toLowerCase();
  return (
    (Object.hasOwn(overrides, w) ? overrides[w] : Object.hasOwn(DEFAULT_SEVERITIES, w) ? DEFAULT_SEVERITIES[w] : undefined) ?? 'warning'
  );
}

/**
 * The hash of a sender's input, as Bosun spells it in ids and keys: the first 32 hex digits
 * (128 bits) of sha256 over the parts encoded as a JSON array, so that parts are never confused
 * with one another (`["a\nb", "c"]` is not `["a", "b\nc"]`) and two different inputs would
 * need a sha256 collision on 128 bits — about 2^64 tries — to share a hash.
 */
export function inputHash(...parts: readonly string[]): string {
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex').slice(0, 32);
}

/**
 * Marks a piece of an id that Bosun hashed (`_<32 hex>`). No piece a sender gives is used as is
 * when it starts with it ({@link LITERAL_ID_PIECE}), so a hashed id cannot be spelled literally.
 */
export const HASHED_MARK = '_';

/**
 * A sender's id used as is in `<prefix>-<id>`: it starts with a letter or digit (never
 * {@link HASHED_MARK}) and holds only the characters of an incident id.
 */
export const LITERAL_ID_PIECE = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/**
 * The incident id `<prefix>-<part>` with a sender's `part` as it is when it is a
 * {@link LITERAL_ID_PIECE} and the id fits the envelope; anything else is hashed whole
 * (`<prefix>-_<hash>`). Different parts always give different ids: a literal id never starts
 * its part with `_`, and a hashed one always does.
 */
export function incidentIdFrom(prefix: string, part: string): string {
  const id = `${prefix}-${part}`;
  return LITERAL_ID_PIECE.test(part) && INCIDENT_ID_PATTERN.test(id) ? id : `${prefix}-${HASHED_MARK}${inputHash(prefix, part)}`;
}

/** Labels within the envelope's limits: at most 128, names and values cut to their limits. */
export function boundLabels(labels: Readonly<Record<string, string>>): Record<string, string> {
  // fromEntries defines its keys, so a label named `__proto__` stays a label (assigning would drop it).
  return Object.fromEntries(
    Object.entries(labels)
      .slice(0, INCIDENT_LIMITS.labels)
      .map(([k, v]) => [k.slice(0, INCIDENT_LIMITS.labelKeyChars), v.slice(0, INCIDENT_LIMITS.labelValueChars)]),
  );
}

/** A summary within the envelope's limit. */
export function boundSummary(text: string): string {
  return text.length <= INCIDENT_LIMITS.summaryChars ? text : `${text.slice(0, INCIDENT_LIMITS.summaryChars - 20)}\n[… cut by the intake]`;
}

/** A reason within the envelope's limit (never empty). */
export function boundReason(text: string | undefined, fallback: string): string {
  const r = (text ?? '').trim();
  return (r === '' ? fallback : r).slice(0, INCIDENT_LIMITS.reasonChars);
}

/** What a webhook asks of Bosun: incidents to start, and alerts that were resolved. */
export interface IntakeBatch {
  incidents: IncidentInput[];
  resolved: { incidentId: string; endsAt?: string }[];
}
