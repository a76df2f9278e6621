import { STALL_INSTRUCTION, STALL_MARKER } from './names.js';

/**
 * The prose written on behalf of an agent that did not report: the marker, the agent's
 * name, what to do about it, and the agent's last words verbatim.
 */
export function stallText(agent: string, lastWords: string, reason?: string): string {
  const why = reason ? `\nReason: ${reason}` : '';
  const words = lastWords.trim() === '' ? '(the agent said nothing)' : lastWords;
  return `${STALL_MARKER}\nAgent: ${agent}${why}\n${STALL_INSTRUCTION}\n---\n${words}`;
}

/**
 * Whether an output (a string, or an object whose string fields are searched one level deep)
 * was written on behalf of an agent that did not report. This is how degraded results are
 * counted: never treat an output for which this returns true as a finding.
 */
export function isStalled(output: unknown): boolean {
  if (typeof output === 'string') return output.startsWith(STALL_MARKER);
  if (output !== null && typeof output === 'object' && !Array.isArray(output)) {
    return Object.values(output as Record<string, unknown>).some((v) => typeof v === 'string' && v.startsWith(STALL_MARKER));
  }
  return false;
}
