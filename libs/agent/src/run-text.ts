/**
 * The coordinator's words: its prompts, how it reads a classifier's reply, and how it writes a
 * run's answer from the specialists' reports. Pure functions of the run's state.
 */
import { sumUsage } from '@bosun/contract';
import type { Delegation, Incident, RunCancellation, RunCheckpoint, RunResult, SpecialistOutcome, UsageTotals } from '@bosun/contract';

/** The default system instruction of the coordinator in route mode. */
export const DEFAULT_ROUTE_INSTRUCTION =
  'You triage production incidents for an unattended incident-response team. Pick the specialists ' +
  'whose domain covers the incident. Reply with JSON only: {"specialists": ["name", ...]}.';

/** The default system instruction of the coordinator in delegate mode. */
export const DEFAULT_DELEGATE_INSTRUCTION =
  'You coordinate an unattended incident-response team. Nobody will answer questions. Delegate ' +
  'parts of the investigation to specialists with the delegate_* tools (several at once when they ' +
  'are independent), read their reports, and when you have enough, answer with a short incident ' +
  'summary: what was found, what was not checked, and the recommended next step. A report that ' +
  'starts with "INCOMPLETE" means that part was not checked.';

/** Specialist names from a classifier's reply: `{"specialists": [...]}`, a JSON array, or names in prose. */
export function parseRouting(text: string, known: readonly string[]): string[] {
  const candidates = [
    text.trim(),
    text.slice(text.indexOf('{'), text.lastIndexOf('}') + 1),
    text.slice(text.indexOf('['), text.lastIndexOf(']') + 1),
  ];
  for (const c of candidates) {
    if (!c) continue;
    try {
      const v = JSON.parse(c) as unknown;
      const list = Array.isArray(v) ? v : v && typeof v === 'object' ? (v as { specialists?: unknown }).specialists : undefined;
      if (Array.isArray(list)) return list.filter((x): x is string => typeof x === 'string');
    } catch {
      // not JSON; try the next form
    }
  }
  return known.filter((n) => new RegExp(`\\b${n}\\b`).test(text));
}

/**
 * The answer's line about calls in doubt: `IN DOUBT: <n> mutating tool call(s) …: <tool> by
 * <agent> (key <key>), …`, so the answer names every one whatever the model wrote.
 */
export function inDoubtLine(inDoubt: NonNullable<RunResult['inDoubt']>): string {
  const one = inDoubt.count === 1;
  const calls = inDoubt.calls.map((c) => `${c.tool} by ${c.agent} (key ${c.key})`).join('; ');
  return (
    `IN DOUBT: ${inDoubt.count} mutating tool ${one ? 'call was' : 'calls were'} sent, but whether ${one ? 'it' : 'they'} took effect is unknown; ` +
    `${one ? 'it was' : 'they were'} not retried and an operator must resolve ${one ? 'it' : 'each'} with bosun ack <key> --done|--retry|--skip: ${calls}.`
  );
}

/** The answer with its {@link inDoubtLine}, when there are calls in doubt. */
export function withInDoubt(answer: string, inDoubt: RunResult['inDoubt']): string {
  return inDoubt ? `${answer}\n\n${inDoubtLine(inDoubt)}` : answer;
}

/** A value of a report as text: a string as it is, anything else as JSON. */
function asText(value: unknown): string {
  return typeof value === 'string' ? value : String(JSON.stringify(value));
}

/** A report in a few lines: its summary and findings, or its JSON. */
export function describeOutput(output: unknown): string {
  if (output === undefined || output === null) return '(no output)';
  if (typeof output === 'string') return output;
  if (typeof output !== 'object') return JSON.stringify(output);
  const o = output as Record<string, unknown>;
  if (typeof o.summary !== 'string') return JSON.stringify(output, null, 2);
  const lines = [o.summary];
  const findings: unknown[] = Array.isArray(o.findings) ? o.findings : [];
  for (const f of findings) {
    if (f && typeof f === 'object') {
      const { title, detail } = f as { title?: unknown; detail?: unknown };
      lines.push(`- ${asText(title ?? '')}${detail === undefined ? '' : `: ${asText(detail)}`}`);
    } else lines.push(`- ${asText(f)}`);
  }
  for (const k of ['suspectedCause', 'recommendedAction']) {
    const v = o[k];
    if (typeof v === 'string') lines.push(`${k}: ${v}`);
  }
  return lines.join('\n');
}

/** Delegations that count: a retried one is superseded by its retry, a transferred one by the delegation it handed over to. */
export function currentDelegations(state: RunCheckpoint): Delegation[] {
  return state.delegations.filter((d) => !state.delegations.some((r) => r.retryOf === d.taskId || r.transferOf === d.taskId));
}

/** The run result's `specialists`: one entry per delegation that counts (a missing result is `failed`). */
export function outcomes(state: RunCheckpoint): SpecialistOutcome[] {
  return currentDelegations(state).map((d) => ({
    name: d.agent,
    status: d.result?.status ?? 'failed',
    output: d.result?.output ?? null,
    attempts: d.result?.attempts ?? 0,
    ...(d.result?.usage ? { usage: d.result.usage } : {}),
  }));
}

/**
 * What the run spent: the coordinator's own model calls and every delegation's usage (a
 * superseded one too: it was spent in this run); undefined when nothing reported any.
 */
export function runUsage(state: RunCheckpoint): UsageTotals | undefined {
  const parts = [state.usage, ...state.delegations.map((d) => d.result?.usage)];
  return parts.some((p) => p !== undefined) ? sumUsage(...parts) : undefined;
}

/**
 * The run's tool calls in doubt, from every delegation's result (a retried one too: its
 * effects happened in this run), each once; undefined when there are none.
 */
export function runInDoubt(state: RunCheckpoint): RunResult['inDoubt'] {
  const calls: { key: string; tool: string; agent: string }[] = [];
  for (const d of state.delegations) {
    for (const c of d.result?.inDoubt ?? [])
      if (!calls.some((x) => x.key === c.key)) calls.push({ key: c.key, tool: c.tool, agent: d.agent });
  }
  return calls.length > 0 ? { count: calls.length, calls } : undefined;
}

/** The first line of every answer: the incident. */
function incidentLine(incident: Incident): string {
  return `Incident ${incident.id} (${incident.reason}, ${incident.severity}): ${incident.summary}`;
}

/** Route mode's answer: the specialists' reports, incomplete parts said plainly. */
export function mergeReports(incident: Incident, state: RunCheckpoint): string {
  const lines = [incidentLine(incident)];
  if (state.delegations.length === 0) lines.push('No specialist covers this incident; nothing was checked.');
  for (const d of currentDelegations(state)) {
    const r = d.result;
    const status = r?.status ?? 'failed';
    lines.push('', `## ${d.agent} — ${status === 'completed' ? 'completed' : `INCOMPLETE (${status})`}`);
    lines.push(describeOutput(r?.output));
  }
  const incomplete = currentDelegations(state)
    .filter((d) => d.result?.status !== 'completed')
    .map((d) => d.agent);
  if (incomplete.length > 0) lines.push('', `Not checked: ${incomplete.join(', ')}. Treat those parts as unknown, not as clean.`);
  return lines.join('\n');
}

/** The reason of an INCOMPLETE part cut short by a cancellation. */
export function cancelledReason(c: RunCancellation): string {
  return `the run was cancelled by ${c.by}: ${c.reason}`;
}

/** The answer of a cancelled run: who cancelled it, why, and what was not finished. */
export function cancelledAnswer(incident: Incident, state: RunCheckpoint, cancelled: RunCancellation): string {
  const line = `This run was CANCELLED by ${cancelled.by} at ${cancelled.at}: ${cancelled.reason}`;
  if (state.delegations.length === 0)
    return `${incidentLine(incident)}\n\n${line}\nIt was cancelled before anything was delegated: nothing was checked.`;
  const open = currentDelegations(state)
    .filter((d) => d.result?.status !== 'completed')
    .map((d) => d.agent);
  return [
    mergeReports(incident, state),
    '',
    line,
    open.length > 0 ? `Not finished: ${open.join(', ')}.` : 'Every delegated part had reported before the cancellation.',
  ].join('\n');
}
