/** What happens to a webhook's incidents between parsing and the queue: runbooks, grouping, the rate limit. */
import type { IntakeSource } from '@bosun/config';
import type { IncidentInput } from '@bosun/contract';
import { inputHash, type IntakeBatch } from './mapping.js';
import type { IntakeQueue, Queued } from './queue.js';

/** One group of a batch: the incident that stands for it, and the alerts that join it. */
export interface BatchGroup {
  key: string;
  primary: IncidentInput;
  members: IncidentInput[];
}

/**
 * The values of an incident's `by` labels, in order (`alertname` is the reason when absent, any
 * other absent label is empty). Own labels only: a label named `constructor` is not Object's.
 */
export function groupValues(incident: IncidentInput, by: readonly string[]): string[] {
  const labels = incident.labels ?? {};
  return by.map((l) => (Object.hasOwn(labels, l) ? labels[l]! : l === 'alertname' ? incident.reason : ''));
}

/** Groups a batch's incidents by `by`: the first of each group stands for it, and lists the others in `payload.grouped`. */
export function groupBatch(incidents: readonly IncidentInput[], by: readonly string[]): BatchGroup[] {
  const groups = new Map<string, BatchGroup>();
  for (const incident of incidents) {
    // Hashed as a list: a value holding a newline or `=` cannot pass for two labels.
    const key = inputHash(...groupValues(incident, by));
    const g = groups.get(key);
    if (g) g.members.push(incident);
    else groups.set(key, { key, primary: incident, members: [] });
  }
  return [...groups.values()].map((g) => {
    if (g.members.length === 0) return g;
    const payload =
      g.primary.payload !== null && typeof g.primary.payload === 'object' ? (g.primary.payload as Record<string, unknown>) : {};
    const grouped = g.members.map((m) => ({ incidentId: m.id, summary: m.summary.split('\n')[0] ?? '', labels: m.labels ?? {} }));
    return { ...g, primary: { ...g.primary, payload: { ...payload, grouped } } };
  });
}

/** What a webhook's incidents became. */
export interface FlowOutcome {
  /** Queued (or already there: `duplicate`); `delayedMs` when the rate limit put it in the backlog. */
  accepted: (Queued & { delayedMs?: number; startsAt?: string })[];
  /** Alerts that joined an incident of their group instead of starting a run. */
  joined: { incidentId: string; alerts: string[] }[];
}

/** Runs a batch's incidents through the source's grouping and rate limit, onto the queue. */
export class IntakeFlow {
  constructor(private readonly queue: IntakeQueue) {}

  async take(name: string, source: IntakeSource, batch: Pick<IntakeBatch, 'incidents'>): Promise<FlowOutcome> {
    const { incidents } = batch;
    const out: FlowOutcome = { accepted: [], joined: [] };
    const groups: BatchGroup[] = source.group
      ? groupBatch(incidents, source.group.by)
      : incidents.map((i) => ({ key: '', primary: i, members: [] }));
    for (const g of groups) {
      const alerts = [g.primary, ...g.members];
      if (source.group) {
        const owner = await this.queue.claimGroup({
          source: name,
          groupHash: g.key,
          incidentId: g.primary.id,
          windowMs: source.group.windowMs,
        });
        if (owner !== g.primary.id) {
          await this.queue.recordJoined(owner, alerts);
          out.joined.push({ incidentId: owner, alerts: alerts.map((a) => a.id) });
          continue;
        }
      }
      out.accepted.push(await this.queue.add(g.primary, source.rateLimit ? { source: name, ...source.rateLimit } : undefined));
      if (g.members.length > 0) {
        await this.queue.recordJoined(g.primary.id, g.members);
        out.joined.push({ incidentId: g.primary.id, alerts: g.members.map((m) => m.id) });
      }
    }
    return out;
  }
}
