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
