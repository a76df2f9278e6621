import { errorMessage } from '@bosun/contract';
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { ConfigError, type RunbookConfig } from '@bosun/config';
import type { IncidentInput, IncidentRunbook } from '@bosun/contract';

/** A runbook with its text read (from the config, or its file). */
export interface LoadedRunbook {
  name: string;
  match: RunbookConfig['match'];
  text: string;
}

const MAX_TEXT = 32 * 1024;

/** Reads the runbooks' files (relative to the config file) once, at start-up; a missing or oversized one is a ConfigError naming it. */
export function loadRunbooks(runbooks: readonly RunbookConfig[], configFile: string): LoadedRunbook[] {
  return runbooks.map((r, i) => {
    if (r.text !== undefined) return { name: r.name, match: r.match, text: r.text };
    const path = resolve(dirname(resolve(configFile)), r.file!);
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      throw new ConfigError(`${configFile}: intake.runbooks.${i}.file: cannot read ${path}: ${errorMessage(err)}`, { cause: err });
    }
    if (text.trim() === '' || text.length > MAX_TEXT)
      throw new ConfigError(
        `${configFile}: intake.runbooks.${i}.file: ${path} must hold 1 to ${MAX_TEXT} characters (it has ${text.length})`,
      );
    return { name: r.name, match: r.match, text };
  });
}

/** The first runbook that matches the incident: its reason among `match.reason`, and every label of `match.labels`. */
export function matchRunbook(runbooks: readonly LoadedRunbook[], incident: IncidentInput): IncidentRunbook | undefined {
  const labels = incident.labels ?? {};
  const found = runbooks.find(
    (r) =>
      (r.match.reason === undefined || r.match.reason.includes(incident.reason)) &&
      Object.entries(r.match.labels ?? {}).every(([k, v]) => Object.hasOwn(labels, k) && labels[k] === v),
  );
  return found ? { name: found.name, text: found.text } : undefined;
}

/** The incident with its matched runbook in `payload.runbook` (unchanged when none matches). */
export function withRunbook(runbooks: readonly LoadedRunbook[], incident: IncidentInput): IncidentInput {
  const runbook = matchRunbook(runbooks, incident);
  if (!runbook) return incident;
  const payload =
    incident.payload !== null && typeof incident.payload === 'object' && !Array.isArray(incident.payload) ? incident.payload : {};
  return { ...incident, payload: { ...payload, runbook } };
}
