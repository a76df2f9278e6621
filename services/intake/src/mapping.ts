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

/** The first 16 hex digits of sha256(`text`). */
export function shortHash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 16);
}

/** `prefix-<part>` as an incident id: `part` as it is when it is a safe id piece, else its hash. */
export function incidentIdFrom(prefix: string, part: string): string {
  const id = `${prefix}-${part}`;
  return INCIDENT_ID_PATTERN.test(id) ? id : `${prefix}-h${shortHash(part)}`;
}

/** Labels within the envelope's limits: at most 128, names and values cut to their limits. */
export function boundLabels(labels: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(labels).slice(0, INCIDENT_LIMITS.labels)) {
    out[k.slice(0, INCIDENT_LIMITS.labelKeyChars)] = v.slice(0, INCIDENT_LIMITS.labelValueChars);
  }
  return out;
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
