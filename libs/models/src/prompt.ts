/**
 * How an incident is shown to a model: a fenced JSON block after a `Incident:` line.
 * The fake model reads it back with {@link extractIncident}, so what it decides from is
 * exactly what a real model sees.
 */
export function renderIncident(incident: unknown): string {
  return `Incident:\n\`\`\`json\n${JSON.stringify(incident, null, 2)}\n\`\`\``;
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
