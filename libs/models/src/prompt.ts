/**
 * How an incident is shown to a model: a fenced JSON block after a `Incident:` line, compact as
 * tool results are (indentation was a third of the incident's tokens, in every request of every
 * agent of the run). The fake model reads it back with {@link extractIncident}, so what it
 * decides from is exactly what a real model sees.
 */
export function renderIncident(incident: unknown): string {
  return `Incident:\n\`\`\`json\n${JSON.stringify(incident)}\n\`\`\``;
}

/** The incident rendered by {@link renderIncident} in `text`, or undefined. */
export function extractIncident(text: string): Record<string, unknown> | undefined {
  const start = text.indexOf('Incident:\n```json\n');
  if (start < 0) return undefined;
  const body = text.slice(start + 'Incident:\n```json\n'.length);
  const end = body.indexOf('\n```');
  if (end < 0) return undefined;
  try {
    const value = JSON.parse(body.slice(0, end)) as unknown;
    return value && typeof value === 'object' ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** Prefix of the tools a delegating coordinator is given, one per specialist: `delegate_<name>`. */
export const DELEGATE_TOOL_PREFIX = 'delegate_';

/** The delegation tool for a specialist (dashes become underscores: function names stay portable). */
export function delegateToolName(agent: string): string {
  return `${DELEGATE_TOOL_PREFIX}${agent.replace(/-/g, '_')}`;
}

/** One call of an earlier round that the context budget folded into a summary turn. */
export interface FoldedCall {
  tool: string;
  args: Record<string, unknown>;
  /** The idempotency key it ran under, when it went to the gateway: the whole result is in its call record. */
  key?: string;
  isError: boolean;
  /** The start of its result. */
  result: string;
}

const FOLDED_FENCE = '```json folded-calls\n';

/**
 * The summary turn that stands for earlier rounds folded to fit the model's context window: what
 * the model said, and every call with its arguments, its key and the start of its result, in a
 * fenced `json folded-calls` block. The fake model reads the calls back ({@link extractFoldedCalls})
 * and counts them as made, as a real model reads them as done.
 */
export function renderFolded(rounds: number, calls: readonly FoldedCall[], notes: readonly string[]): string {
  return [
    `Earlier rounds of this task (${rounds} model turns) were folded into this summary to fit the model's context window.`,
    'Do not repeat these calls; the whole results are in the call records, by key.',
    ...(notes.length > 0 ? ['', 'What you said then:', ...notes.map((n) => `- ${n}`)] : []),
    '',
    'The calls made, with the start of each result:',
    `${FOLDED_FENCE}${JSON.stringify(calls, null, 1)}\n\`\`\``,
  ].join('\n');
}

/** The calls of a summary turn written by {@link renderFolded} (none when `text` is not one). */
export function extractFoldedCalls(text: string): FoldedCall[] {
  const start = text.indexOf(FOLDED_FENCE);
  if (start < 0) return [];
  const body = text.slice(start + FOLDED_FENCE.length);
  const end = body.indexOf('\n```');
  if (end < 0) return [];
  try {
    const value = JSON.parse(body.slice(0, end)) as unknown;
    if (!Array.isArray(value)) return [];
    return value.filter(
      (c): c is FoldedCall =>
        !!c && typeof c === 'object' && typeof (c as FoldedCall).tool === 'string' && typeof (c as FoldedCall).args === 'object',
    );
  } catch {
    // Not a summary this code wrote: nothing folded.
    return [];
  }
}
