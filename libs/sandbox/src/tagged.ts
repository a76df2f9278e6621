/**
 * How a script ends its turn: it returns an object with exactly one of these keys.
 * - `observation`: shown to the model; the loop goes on;
 * - `error`: shown to the model as an error; the loop goes on;
 * - `final_result`: the task's output (validated against the specialist's output schema);
 * - `transfer_to_agent`: `{ agent, reason? }` (or the agent's name): the task ends and asks the
 *   coordinator to delegate to that specialist.
 */
export type TaggedResult =
  | { tag: 'observation'; value: unknown }
  | { tag: 'error'; value: unknown }
  | { tag: 'final_result'; value: unknown }
  | { tag: 'transfer_to_agent'; agent: string; reason: string };

export const RESULT_TAGS = ['observation', 'error', 'final_result', 'transfer_to_agent'] as const;

const FORM =
  'End the script with `return { observation: ... }`, `return { error: "..." }`, `return { final_result: {...} }` or `return { transfer_to_agent: { agent: "name", reason: "..." } }`.';

/** Reads a script's returned value as a tagged result, or says what is wrong with it. */
export function readTagged(value: unknown): TaggedResult | { problem: string } {
  if (!value || typeof value !== 'object' || Array.isArray(value))
    return { problem: `The script returned ${value === undefined ? 'nothing' : JSON.stringify(value)}, not a tagged result. ${FORM}` };
  const keys = Object.keys(value);
  const tags = keys.filter((k): k is (typeof RESULT_TAGS)[number] => (RESULT_TAGS as readonly string[]).includes(k));
  if (tags.length !== 1 || keys.length !== 1)
    return { problem: `The script returned an object with the keys [${keys.join(', ')}]; it needs exactly one tag. ${FORM}` };
  const tag = tags[0] as (typeof RESULT_TAGS)[number];
  const inner = (value as Record<string, unknown>)[tag];
  if (tag !== 'transfer_to_agent') return { tag, value: inner ?? null };
  if (typeof inner === 'string' && inner) return { tag, agent: inner, reason: '' };
  const t = inner as { agent?: unknown; reason?: unknown } | null;
  if (t && typeof t === 'object' && typeof t.agent === 'string' && t.agent)
    return { tag, agent: t.agent, reason: typeof t.reason === 'string' ? t.reason : '' };
  return { problem: `transfer_to_agent needs the name of the agent to transfer to. ${FORM}` };
}
