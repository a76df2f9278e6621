/**
 * The context budget: every request a task sends must fit its model's context window. Before each
 * model call the request's tokens are estimated (4 characters a token, as for the rate limit); a
 * request over the budget is made to fit, in this order, each step an event
 * (`model.context_trimmed`) and counted in the task's `usage.contextTrims`:
 *
 * 1. `shorten`: the oldest results (tool results; in CodeAct the script outcomes shown to the
 *    model) are cut to their head and tail, with a marker that names the call key and how much
 *    was cut, so an operator finds the whole result in the call record;
 * 2. `fold`: the earlier rounds become one summary turn (what the model said, each call with its
 *    arguments, key and the start of its result);
 * 3. `shorten` again, of the last round's results.
 *
 * Never touched: the system instruction (not in the history), the first message (the task and
 * the incident) and the last round (the model's last turn and what answered it) beyond step 3's
 * head-and-tail cut. The history is trimmed where it is kept (the checkpoint), so a step is taken
 * once, not again on every request, and the prompt prefix a provider caches stays the same.
 */
import { emptyUsage, toolCallKey, type TaskResult } from '@bosun/contract';
import { estimateTokens, renderFolded, extractFoldedCalls, type FoldedCall, type Message, type ModelRequest } from '@bosun/models';
import type { ModelError } from '@bosun/models';
import { endIncomplete } from './task-end.js';
import type { TaskRun } from './task-run.js';

/** The share of the window a request may fill: the rest is for the answer and the estimate's error. */
const WINDOW_SHARE = 0.8;
/** After the provider said "too long" anyway: the next request aims at this share of what was sent. */
const RETRY_SHARE = 0.6;
/** How much of a shortened result is kept: its first and its last characters. */
const KEEP_HEAD = 2_000;
const KEEP_TAIL = 1_000;
/** The last round's results, when even that is needed. */
const LAST_HEAD = 8_000;
const LAST_TAIL = 4_000;
/** What a folded call keeps of its result, and a folded turn of its text. */
const FOLDED_RESULT_CHARS = 400;
const FOLDED_NOTE_CHARS = 300;

/** Why a request was trimmed: over the estimate, or the provider refused it as too long. */
export type TrimCause = 'estimate' | 'provider';

/** One shortened result. */
export interface ShortenedResult {
  /** The call key whose record holds the whole result (in CodeAct: the script's step). */
  key?: string;
  tool: string;
  cutChars: number;
  keptChars: number;
}

/** One step the budget took; the data of a `model.context_trimmed` event. */
export interface TrimStep {
  action: 'shorten' | 'fold';
  cause: TrimCause;
  beforeTokens: number;
  afterTokens: number;
  budgetTokens: number;
  /** `shorten`: the results cut. */
  results?: ShortenedResult[];
  /** `fold`: the model turns and the calls folded into the summary turn. */
  rounds?: number;
  calls?: number;
}

/** What {@link fitContext} works on. */
export interface FitInput {
  request: Pick<ModelRequest, 'system' | 'tools'>;
  messages: readonly Message[];
  budgetTokens: number;
  cause: TrimCause;
  /** `codeact`: results are the script outcomes in user turns; their calls' keys are named from the task id and step. */
  loop: 'task' | 'codeact';
  taskId: string;
}

/** The budget of a window: what a request may fill of it. */
export function budgetOf(contextTokens: number): number {
  return Math.floor(contextTokens * WINDOW_SHARE);
}

/** The estimated tokens of a request with these messages. */
export function requestTokens(request: Pick<ModelRequest, 'system' | 'tools'>, messages: readonly Message[]): number {
  return estimateTokens({ agent: '', mode: 'task', system: request.system, tools: request.tools, messages: [...messages] });
}

/** The history made to fit `budgetTokens`, and the steps taken (none when it fitted). */
export function fitContext(input: FitInput): { messages: Message[]; steps: TrimStep[] } {
  let messages = [...input.messages];
  const steps: TrimStep[] = [];
  const size = (): number => requestTokens(input.request, messages);
  const fits = (): boolean => size() <= input.budgetTokens;
  if (fits()) return { messages, steps };
  const step = (action: TrimStep['action'], before: number, extra: Partial<TrimStep>): void => {
    steps.push({ action, cause: input.cause, beforeTokens: before, afterTokens: size(), budgetTokens: input.budgetTokens, ...extra });
  };

  const lastRound = lastRoundStart(messages);
  let before = size();
  const older = shorten(messages, { from: 1, to: lastRound, head: KEEP_HEAD, tail: KEEP_TAIL }, input, fits);
  messages = older.messages;
  if (older.results.length > 0) step('shorten', before, { results: older.results });

  if (!fits() && lastRound - 1 >= 2) {
    before = size();
    const folded = fold(messages, lastRound, input);
    messages = folded.messages;
    step('fold', before, { rounds: folded.rounds, calls: folded.calls });
  }

  if (!fits()) {
    before = size();
    const last = shorten(messages, { from: lastRoundStart(messages), to: messages.length, head: LAST_HEAD, tail: LAST_TAIL }, input, fits);
    messages = last.messages;
    if (last.results.length > 0) step('shorten', before, { results: last.results });
  }
  return { messages, steps };
}

/** Where the last round starts: the model's last turn (the history's end when it has none after the first message). */
function lastRoundStart(messages: readonly Message[]): number {
  for (let i = messages.length - 1; i >= 1; i--) if (messages[i]?.role === 'model') return i;
  return messages.length;
}

/** The number of model turns before `index`: the step of the turn at or before it. */
function stepAt(messages: readonly Message[], index: number): number {
  let n = 0;
  for (let i = 0; i < index; i++) if (messages[i]?.role === 'model') n++;
  return n;
}

/** `text` cut to its head and tail with the marker in between, or undefined when it is short enough. */
function cut(text: string, head: number, tail: number, where: string): { text: string; cutChars: number } | undefined {
  if (text.length <= head + tail + 200) return undefined;
  const cutChars = text.length - head - tail;
  const marker = `\n… [context budget: ${cutChars} of ${text.length} characters cut from ${where}] …\n`;
  return { text: `${text.slice(0, head)}${marker}${text.slice(text.length - tail)}`, cutChars };
}

/** Which messages to shorten, and how much of each result to keep. */
interface ShortenRange {
  from: number;
  to: number;
  head: number;
  tail: number;
}

/** Shortens the results in `[from, to)`, oldest first, until the request fits. */
function shorten(
  messages: Message[],
  range: ShortenRange,
  fit: FitInput,
  fits: () => boolean,
): { messages: Message[]; results: ShortenedResult[] } {
  const { from, to, head, tail } = range;
  const results: ShortenedResult[] = [];
  for (let i = Math.max(1, from); i < to && !fits(); i++) {
    const m = messages[i];
    if (m?.role === 'tool') {
      const responses = [...m.responses];
      for (let j = 0; j < responses.length && !fits(); j++) {
        const r = responses[j]!;
        const text = typeof r.output === 'string' ? r.output : (JSON.stringify(r.output) ?? '');
        const where = r.key ? `this result; the whole result is in the call record ${r.key}` : `this result of ${r.name}`;
        const done = cut(text, head, tail, where);
        if (!done) continue;
        responses[j] = { ...r, output: done.text };
        messages[i] = { role: 'tool', responses };
        results.push({ ...(r.key ? { key: r.key } : {}), tool: r.name, cutChars: done.cutChars, keptChars: done.text.length });
      }
    } else if (m?.role === 'user' && fit.loop === 'codeact') {
      const stepNo = stepAt(messages, i);
      const keys = `${toolCallKey(fit.taskId, stepNo, 0).replace(/-c0$/, '-c*')}`;
      const done = cut(
        m.text,
        head,
        tail,
        `this output of the script of step ${stepNo}; its calls' whole results are in their call records (${keys})`,
      );
      if (!done) continue;
      messages[i] = { role: 'user', text: done.text };
      results.push({ key: keys, tool: `script step ${stepNo}`, cutChars: done.cutChars, keptChars: done.text.length });
    }
  }
  return { messages, results };
}

function clip(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max)}…` : flat;
}

/** Folds `[1, lastRound)` into one summary turn after the first message. */
function fold(messages: Message[], lastRound: number, fit: FitInput): { messages: Message[]; rounds: number; calls: number } {
  const folded: FoldedCall[] = [];
  const notes: string[] = [];
  const callsById = new Map<string, { name: string; args: Record<string, unknown> }>();
  let rounds = 0;
  for (let i = 1; i < lastRound; i++) {
    const m = messages[i]!;
    if (m.role === 'model') {
      rounds++;
      if (m.text) notes.push(clip(m.text, FOLDED_NOTE_CHARS));
      for (const c of m.calls ?? []) callsById.set(c.id, { name: c.name, args: c.args });
    } else if (m.role === 'tool') {
      for (const r of m.responses) {
        const call = callsById.get(r.id);
        const text = typeof r.output === 'string' ? r.output : (JSON.stringify(r.output) ?? '');
        folded.push({
          tool: call?.name ?? r.name,
          args: call?.args ?? {},
          ...(r.key ? { key: r.key } : {}),
          isError: r.isError === true,
          result: clip(text, FOLDED_RESULT_CHARS),
        });
      }
    } else {
      // An earlier summary is folded into this one; other notes (a decision, a nudge, a script's outcome) are kept short.
      const earlier = extractFoldedCalls(m.text);
      if (earlier.length > 0) folded.push(...earlier);
      else notes.push(`(${fit.loop === 'codeact' ? 'outcome' : 'note'}) ${clip(m.text, FOLDED_NOTE_CHARS)}`);
    }
  }
  const summary: Message = { role: 'user', text: renderFolded(rounds, folded, notes) };
  return { messages: [messages[0]!, summary, ...messages.slice(lastRound)], rounds, calls: folded.length };
}

/**
 * Makes the task's next request fit its model's window (a no-op for a model without a known
 * window): trims the checkpointed history, announces each step (`model.context_trimmed`) and
 * counts it in `usage.contextTrims`. `cause: 'provider'` is the retry after the provider refused
 * `sentTokens` as too long anyway: it aims lower. Returns whether anything was trimmed.
 */
export function fitTaskContext(
  run: TaskRun,
  request: Pick<ModelRequest, 'system' | 'tools'>,
  cause: TrimCause,
  loop: 'task' | 'codeact',
): boolean {
  const window = run.deps.model.contextTokens;
  if (window === undefined) return false;
  const { state } = run;
  const normal = budgetOf(window);
  const budgetTokens = cause === 'provider' ? Math.floor(Math.min(normal, requestTokens(request, state.messages)) * RETRY_SHARE) : normal;
  const { messages, steps } = fitContext({ request, messages: state.messages, budgetTokens, cause, loop, taskId: run.job.taskId });
  if (steps.length === 0) return false;
  state.messages = messages;
  state.usage = { ...(state.usage ?? emptyUsage()) };
  state.usage.contextTrims = (state.usage.contextTrims ?? 0) + steps.length;
  for (const s of steps) {
    run.emit('model.context_trimmed', { taskId: run.job.taskId, step: state.step + 1, contextTokens: window, ...toJson(s) });
  }
  run.deps.log.info(
    { taskId: run.job.taskId, steps: steps.map((s) => s.action), cause },
    'context budget: history trimmed to fit the model',
  );
  run.dirty = true;
  return true;
}

function toJson(step: TrimStep): Record<string, string | number | Record<string, string | number>[]> {
  return {
    action: step.action,
    cause: step.cause,
    beforeTokens: step.beforeTokens,
    afterTokens: step.afterTokens,
    budgetTokens: step.budgetTokens,
    ...(step.results ? { results: step.results.map((r) => ({ ...r })) } : {}),
    ...(step.rounds === undefined ? {} : { rounds: step.rounds }),
    ...(step.calls === undefined ? {} : { calls: step.calls }),
  };
}

/**
 * The provider refused the request as too long for its window: the history is trimmed harder and
 * the call made again (undefined: the loop goes on). A second refusal at the same step, or one
 * with nothing left to trim, ends the task INCOMPLETE (`failure`) with the provider's words.
 */
export async function contextRefused(
  run: TaskRun,
  request: Pick<ModelRequest, 'system' | 'tools'>,
  err: ModelError,
  loop: 'task' | 'codeact',
): Promise<TaskResult | undefined> {
  const { state } = run;
  const reason = `the request does not fit the model's context window`;
  if (state.contextRetryStep === state.step)
    return endIncomplete(run, { kind: 'failure', reason: `${reason}, even trimmed: ${err.message}` });
  if (!fitTaskContext(run, request, 'provider', loop)) {
    return endIncomplete(run, { kind: 'failure', reason: `${reason}, and nothing is left to trim: ${err.message}` });
  }
  state.contextRetryStep = state.step;
  await run.save();
  return undefined;
}
