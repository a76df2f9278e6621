import { runbookOf, type RunResult } from '@bosun/contract';

/**
 * A system instruction with the incident's runbook (`payload.runbook`, matched by the intake)
 * after it, as instructions to follow; unchanged when the incident has none.
 */
export function withRunbook(system: string, incident: { payload?: unknown }): string {
  const runbook = runbookOf(incident);
  if (!runbook) return system;
  return `${system}\n\nThe team's runbook "${runbook.name}" applies to this incident. Follow it as your instructions where it concerns your work:\n\n${runbook.text}`;
}

/** The run result's `runbook` field: the runbook used and the alert's runbook link, when there are any. */
export function runbookField(incident: { payload?: unknown }): Pick<RunResult, 'runbook'> {
  const runbook = runbookOf(incident);
  const p = incident.payload;
  const url =
    p !== null && typeof p === 'object' && typeof (p as { runbookUrl?: unknown }).runbookUrl === 'string'
      ? (p as { runbookUrl: string }).runbookUrl
      : undefined;
  if (!runbook && url === undefined) return {};
  return { runbook: { ...(runbook ? { name: runbook.name } : {}), ...(url !== undefined ? { url } : {}) } };
}
