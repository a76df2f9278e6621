/** The generic JSON webhook: JSON paths from the config pick the incident's fields out of the body. */
import type { GenericSourceConfig } from '@bosun/config';
import { BosunError, type IncidentInput } from '@bosun/contract';
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
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    const s = text(x);
    if (s !== undefined) out[k] = s;
  }
  return boundLabels(out);
}

/** The body as the incident's `payload.webhook`, when it is small enough to travel with it. */
function webhookCopy(body: unknown): Record<string, unknown> {
  const bytes = Buffer.byteLength(JSON.stringify(body));
  return bytes <= WEBHOOK_COPY_MAX
    ? { webhook: body }
    : { webhookOmitted: `the body (${bytes} bytes) is larger than ${WEBHOOK_COPY_MAX} bytes` };
}

/** Largest body copied into the incident's payload (the payload may hold 256 KiB in all). */
const WEBHOOK_COPY_MAX = 128 * 1024;

/** The incident (or the resolution) a generic webhook's body maps to. */
export function genericBatch(name: string, config: GenericSourceConfig, body: unknown): IntakeBatch {
  const m = config.mapping;
  const rawId = text(atPath(body, m.id));
  if (rawId === undefined || rawId.trim() === '') throw new MappingError(`mapping.id: ${m.id} found no string or number in the body`);
  const incidentId = incidentIdFrom(name, rawId.trim());
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
