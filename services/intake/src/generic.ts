/** The generic JSON webhook: JSON paths from the config pick the incident's fields out of the body. */
import type { GenericSourceConfig } from '@bosun/config';
import { BosunError, INCIDENT_LIMITS, jsonBytes, jsonDepth, type IncidentInput } from '@bosun/contract';
import { boundLabels, boundReason, boundSummary, incidentIdFrom, severityOf, type IntakeBatch } from './mapping.js';

/** The steps of a JSON path (`$.a[0]['b.c']` → `a`, 0, `b.c`); the config has checked its form. */
export function pathSteps(path: string): (string | number)[] {
  const steps: (string | number)[] = [];
  const step = /\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]|\['([^'\\]+)'\]/g;
  for (const m of path.slice(1).matchAll(step)) steps.push(m[1] ?? (m[2] !== undefined ? Number(m[2]) : m[3]!));
  return steps;
}

/** The value at `path` in `root`, or undefined (own properties only). */
export function atPath(root: unknown, path: string): unknown {
  let node: unknown = root;
  for (const s of pathSteps(path)) {
    if (typeof s === 'number') node = Array.isArray(node) ? (node as unknown[])[s] : undefined;
    else
      node =
        node !== null && typeof node === 'object' && !Array.isArray(node) && Object.hasOwn(node, s)
          ? (node as Record<string, unknown>)[s]
          : undefined;
    if (node === undefined) return undefined;
  }
  return node;
}

/** A mapped value the webhook did not give in the expected form: a 400 naming the path. */
export class MappingError extends BosunError {
  constructor(message: string) {
    super('invalid_input', message);
    this.name = 'MappingError';
  }
}

function text(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return undefined;
}

function mappedLabels(body: unknown, path: string | undefined): Record<string, string> | undefined {
  if (path === undefined) return undefined;
  const v = atPath(body, path);
  if (v === undefined) return undefined;
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new MappingError(`mapping.labels: ${path} must be an object`);
  const pairs: [string, string][] = [];
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    const s = text(x);
    if (s !== undefined) pairs.push([k, s]);
  }
  // fromEntries defines its keys: a tag named `__proto__` stays a label.
  return boundLabels(Object.fromEntries(pairs));
}

/** Largest body copied into the incident's payload (the payload may hold 256 KiB in all). */
const WEBHOOK_COPY_MAX = 128 * 1024;

/** Deepest body copied into the payload: `payload.webhook` adds a level, and the payload may nest 32. */
const WEBHOOK_COPY_DEPTH = INCIDENT_LIMITS.payloadDepth - 1;

/**
 * Deepest body a generic source takes: deeper is a 400, kept as poison (whole up to the dead
 * letter's own depth limit, 64). Measured without recursion, as everything that touches the body
 * is: a body 5,000 levels deep is an ordinary rejection, not a stack overflow.
 */
export const GENERIC_MAX_DEPTH = 64;

/** The body as the incident's `payload.webhook`, when it is small and shallow enough to travel with it. */
function webhookCopy(body: unknown): Record<string, unknown> {
  const depth = jsonDepth(body, WEBHOOK_COPY_DEPTH);
  if (depth > WEBHOOK_COPY_DEPTH)
    return { webhookOmitted: `the body nests objects and arrays more than ${WEBHOOK_COPY_DEPTH} levels deep` };
  const bytes = jsonBytes(body, WEBHOOK_COPY_DEPTH);
  return bytes !== undefined && bytes <= WEBHOOK_COPY_MAX
    ? { webhook: body }
    : { webhookOmitted: `the body (${bytes} bytes) is larger than ${WEBHOOK_COPY_MAX} bytes` };
}

/** The incident (or the resolution) a generic webhook's body maps to. */
export function genericBatch(name: string, config: GenericSourceConfig, body: unknown): IntakeBatch {
  const m = config.mapping;
  if (jsonDepth(body, GENERIC_MAX_DEPTH) > GENERIC_MAX_DEPTH)
    throw new MappingError(`body: nests objects and arrays more than ${GENERIC_MAX_DEPTH} levels deep`);
  const rawId = text(atPath(body, m.id));
  if (rawId === undefined || rawId.trim() === '') throw new MappingError(`mapping.id: ${m.id} found no string or number in the body`);
  // The id as sent, whole: one with spaces (or anything an incident id cannot hold) is hashed, never trimmed into another's.
  const incidentId = incidentIdFrom(name, rawId);
  const status = m.status !== undefined ? text(atPath(body, m.status)) : undefined;
  if (status !== undefined && status.toLowerCase() === config.resolvedValue.toLowerCase())
    return { incidents: [], resolved: [{ incidentId }] };
  const reason = boundReason(m.reason !== undefined ? text(atPath(body, m.reason)) : undefined, config.defaultReason);
  const summary = m.summary !== undefined ? text(atPath(body, m.summary)) : undefined;
  const description = m.description !== undefined ? text(atPath(body, m.description)) : undefined;
  const runbookUrl = m.runbookUrl !== undefined ? text(atPath(body, m.runbookUrl)) : undefined;
  const labels = mappedLabels(body, m.labels);
  const incident: IncidentInput = {
    id: incidentId,
    source: name,
    reason,
    summary: boundSummary([summary ?? reason, description].filter((s) => s !== undefined && s !== '').join('\n\n')),
    severity: severityOf(m.severity !== undefined ? atPath(body, m.severity) : undefined, config.severities),
    ...(labels ? { labels } : {}),
    payload: {
      intake: { source: name, format: 'generic', id: rawId },
      ...(description !== undefined ? { description } : {}),
      ...(runbookUrl !== undefined ? { runbookUrl } : {}),
      ...webhookCopy(body),
    },
  };
  return { incidents: [incident], resolved: [] };
}
