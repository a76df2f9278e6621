import { z } from 'zod';

/**
 * What the alert intake (`services/intake`) keeps of a resolved alert, at
 * {@link intakeResolvedKey}: when it was resolved, by which source, and what became of its run.
 */
export const IntakeResolution = z.object({
  v: z.literal(1),
  incidentId: z.string(),
  source: z.string(),
  /** When the intake received the resolution (ISO). */
  at: z.string(),
  /** When the sender says the alert ended (Alertmanager's `endsAt`), as sent. */
  endsAt: z.string().optional(),
  /** What the intake did about the run: `recorded` only, `cancelled` it, or found it `finished` or `not-started`. */
  run: z.enum(['recorded', 'cancelled', 'finished', 'not-started']),
  runId: z.string().optional(),
});
export type IntakeResolution = z.infer<typeof IntakeResolution>;

/** How long a resolution is kept: 8 days, longer than a run's checkpoint. */
export const INTAKE_RESOLUTION_TTL_SECONDS = 8 * 24 * 3600;

/** `<prefix>:intake:resolved:<incidentId>`: the {@link IntakeResolution} of an incident's alert. */
export function intakeResolvedKey(prefix: string, incidentId: string): string {
  return `${prefix}:intake:resolved:${incidentId}`;
}

/** `<prefix>:intake:group:<source>:<hash of the group's label values>`: the incident a group's alerts join, for the grouping window. */
export function intakeGroupKey(prefix: string, source: string, groupHash: string): string {
  return `${prefix}:intake:group:${source}:${groupHash}`;
}

/** `<prefix>:intake:joined:<incidentId>`: a list of the alerts that joined the incident (JSON `{ incidentId, summary, at }`), each once, in the order they first joined. */
export function intakeJoinedKey(prefix: string, incidentId: string): string {
  return `${prefix}:intake:joined:${incidentId}`;
}

/** `<prefix>:intake:joined-ids:<incidentId>`: the ids of the alerts in {@link intakeJoinedKey}, so that each is listed once. */
export function intakeJoinedIdsKey(prefix: string, incidentId: string): string {
  return `${prefix}:intake:joined-ids:${incidentId}`;
}

/** `<prefix>:intake:rate:<source>`: the source's rate limit state (the next start time, ms). */
export function intakeRateKey(prefix: string, source: string): string {
  return `${prefix}:intake:rate:${source}`;
}

/** An alert that joined another incident (grouping), as kept in {@link intakeJoinedKey}. */
export const JoinedAlert = z.object({ incidentId: z.string(), summary: z.string(), at: z.string() });
export type JoinedAlert = z.infer<typeof JoinedAlert>;

/**
 * The runbook an incident carries in `payload.runbook` (the intake matches it from the config):
 * its name and its markdown, given to the coordinator and the specialists as instructions.
 */
export const IncidentRunbook = z.object({
  name: z.string().min(1).max(64),
  text: z
    .string()
    .min(1)
    .max(32 * 1024),
});
export type IncidentRunbook = z.infer<typeof IncidentRunbook>;

/** The runbook of an incident's payload, or undefined when it has none (or not in that form). */
export function runbookOf(incident: { payload?: unknown }): IncidentRunbook | undefined {
  const p = incident.payload;
  if (p === null || typeof p !== 'object' || !('runbook' in p)) return undefined;
  const parsed = IncidentRunbook.safeParse(p.runbook);
  return parsed.success ? parsed.data : undefined;
}
