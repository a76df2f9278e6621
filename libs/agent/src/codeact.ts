import { STALL_MARKER, type CodeActJournal, type TaskJob, type TaskResult, errorMessage } from '@bosun/contract';
import { buildStallPayload, validateAgainstSchema } from '@bosun/config';
import { ModelError, ThrottledError, type ModelResponse } from '@bosun/models';
import { MAX_TOOLS_PER_REQUEST } from '@bosun/policy';
import {
  DEFAULT_SANDBOX_LIMITS,
  SandboxAborted,
  SandboxFailure,
  defaultSandboxPool,
  type SandboxLimits,
  type ScriptOutcome,
  type TaggedResult,
} from '@bosun/sandbox';
import { NonDeterminismError, ScriptCancelled, ScriptHost, ScriptHostFailure, ScriptOverBudget } from './codeact-host.js';
import { clip, codeActSystem, describeOutcome, extractScript } from './codeact-prompt.js';
import { afterStop, stepBoundary } from './task-boundary.js';
import { budgetStop, chargeModelCall } from './task-budget.js';
import { contextRefused, fitTaskContext } from './context-budget.js';
import { endIncomplete, stallUnlessCancelled, usageOf } from './task-end.js';
import { TaskRun, openTaskRun } from './task-run.js';
import { RetryableTaskError, type TaskAgentDeps, type TaskAgentSpec, type TaskAttempt } from './task-types.js';

const ASK_TO_FINISH =
  'You have used every script turn this task allows. Return { final_result: ... } now with what you found, ' +
  'and state in the report what you could not check.';

/** The longest script an event carries (the checkpoint keeps it whole). */
const EVENT_SCRIPT_CHARS = 4_096;

/**
 * Runs one delegation as a CodeAct loop: the model writes one script per turn, the script runs in
 * the sandbox and calls tools through the gateway (policy, approvals, idempotency and audit as in
 * the task loop), and it ends its turn with a tagged result. The turn's script and its journal
 * are in the task checkpoint, saved before each effect, so a script whose process died is run
 * again elsewhere and replays what it already did without doing it again (docs/codeact.md).
 * Ends like the task loop: a result, or a thrown park, hand-over or retryable model error.
 * The script runs on a sandbox thread (`deps.sandbox`, else the process's default pool), so this
 * process's event loop never waits on it; it is stopped when `attempt.signal` aborts, when the
 * process drains, when the task's deadline passes or when the task is cancelled.
 */
export async function runCodeActTask(
  job: TaskJob,
  spec: TaskAgentSpec,
  deps: TaskAgentDeps,
  attempt: number | TaskAttempt,
): Promise<TaskResult> {
  const at = typeof attempt === 'number' ? { attempt } : attempt;
  const opened = await openTaskRun(job, spec, deps, at);
  if (!(opened instanceof TaskRun)) return opened;
  try {
    for (;;) {
      const ended = (await stepBoundary(opened)) ?? (await codeActStep(opened));
      if (ended) return ended;
    }
  } finally {
    opened.stop.dispose();
  }
}

async function codeActStep(run: TaskRun): Promise<TaskResult | undefined> {
  const last = run.lastMessage();
  if (last.role !== 'model') return modelTurn(run);
  run.newTurn();
  const script = extractScript(last.text);
  if (!script) return stallUnlessCancelled(run, 'ended its turn without a script');
  return scriptTurn(run, script);
}

/** The model's turn: it is shown the tools as `call_tool` usage lines and writes a script. */
async function modelTurn(run: TaskRun): Promise<TaskResult | undefined> {
  const { spec, deps, state, tools } = run;
  if (tools.allowed.length > MAX_TOOLS_PER_REQUEST) {
    const reason = `${tools.allowed.length} tools would be offered to the model in one request; the limit is ${MAX_TOOLS_PER_REQUEST}. Narrow specialists.${spec.name}.tools.`;
    return endIncomplete(run, { kind: 'failure', reason });
  }
  if (state.toolRounds >= spec.maxToolRounds && !state.askedToFinish) {
    state.askedToFinish = true;
    state.messages.push({ role: 'user', text: ASK_TO_FINISH });
  }
  // The same budgets as the task loop, checked before the call that would cross them.
  const over = await budgetStop(run, { modelCall: true });
  if (over) return endIncomplete(run, { kind: 'budget', reason: over });
  const system = codeActSystem(spec.instruction, tools.allowed, spec.outputSchema);
  // The same context budget as the task loop, over the scripts and their outcomes.
  fitTaskContext(run, { system, tools: [] }, 'estimate', 'codeact');
  const started = run.now();
  let response: ModelResponse;
  try {
    const request = {
      agent: spec.name,
      mode: 'codeact' as const,
      system,
      messages: state.messages,
      tools: [],
      outputSchema: spec.outputSchema,
    };
    // The task's stop signal ends the call at once on a drain, a lost lock, a cancel or the deadline.
    response = await run.stop.watch((signal) => deps.model.generate(request, { signal }));
  } catch (err) {
    if (run.stop.why) return afterStop(run);
    if (err instanceof ModelError && err.reason === 'context_length') return contextRefused(run, { system, tools: [] }, err, 'codeact');
    return modelFailed(run, err);
  }
  recordModelTurn(run, response, run.now() - started);
  return undefined;
}

/** A model call that failed: handed back when throttled or retryable, else the task fails. */
async function modelFailed(run: TaskRun, err: unknown): Promise<TaskResult> {
  // Its turn at the cluster-wide limiter is far off: hand the task back, holding no worker.
  if (err instanceof ThrottledError) {
    await run.saveIfDirty();
    throw err;
  }
  if (err instanceof ModelError && err.retryable) throw new RetryableTaskError(`model call failed: ${err.message}`, err);
  return endIncomplete(run, { kind: 'failure', reason: `model call failed: ${errorMessage(err)}` });
}

/** Counts the model's turn (usage in the checkpoint with the turn), announces it and records its script. */
function recordModelTurn(run: TaskRun, response: ModelResponse, durationMs: number): void {
  const { deps, state } = run;
  state.step++;
  chargeModelCall(run, response);
  run.emit('model.called', {
    taskId: run.job.taskId,
    step: state.step,
    model: response.model ?? deps.model.name,
    durationMs,
    calls: [],
    ...(response.usage ? { usage: response.usage } : {}),
    ...(response.fallback ? { fallback: response.fallback } : {}),
  });
  state.messages.push({ role: 'model', text: response.text ?? '', ...(response.reasoning ? { reasoning: response.reasoning } : {}) });
  delete state.pending;
  delete state.contextRetryStep;
  run.dirty = true;
}

/** The sandbox limits of this specialist. */
function limitsOf(spec: TaskAgentSpec): SandboxLimits {
  const c = spec.codeact;
  if (!c) return { ...DEFAULT_SANDBOX_LIMITS };
  return {
    timeMs: c.timeMs,
    memoryBytes: c.memoryMb * 1024 * 1024,
    stackBytes: c.stackKb * 1024,
    maxToolCalls: c.maxToolCalls,
    maxOutputChars: c.maxOutputChars,
    maxConsoleChars: c.maxConsoleChars,
  };
}

/**
 * The journal of this turn's script: the checkpoint's when it is of this step (a replay), else a
 * new one. The last script's journal stays in the checkpoint until the next script replaces it,
 * so `bosun ack --retry` finds the real arguments of its calls.
 */
function journalOf(run: TaskRun, script: string): { journal: CodeActJournal; replay: boolean } | string {
  const { state } = run;
  const held = state.codeact;
  if (held && held.step === state.step) {
    if (held.script !== script)
      return `non-deterministic script: the script of step ${state.step} is not the one its journal was written for`;
    return { journal: held, replay: true };
  }
  return { journal: { step: state.step, script, calls: [], clock: [], random: [], replays: 0 }, replay: false };
}

/** Runs (or replays) the script of the model's turn and acts on how it ended. */
async function scriptTurn(run: TaskRun, script: string): Promise<TaskResult | undefined> {
  const { state, job } = run;
  const found = journalOf(run, script);
  if (typeof found === 'string') return endIncomplete(run, { kind: 'failure', reason: found });
  const { journal, replay } = found;
  if (replay) {
    journal.replays++;
    run.emit('codeact.replayed', { taskId: job.taskId, step: state.step, calls: journal.calls.length, replays: journal.replays });
  } else {
    state.toolRounds++;
    state.codeact = journal;
    run.emit('codeact.script', { taskId: job.taskId, step: state.step, script: clip(script, EVENT_SCRIPT_CHARS), chars: script.length });
  }
  run.dirty = true;
  let outcome: ScriptOutcome;
  try {
    const host = new ScriptHost(run, journal, run.deps.toolTimeoutMs ?? Number.POSITIVE_INFINITY);
    const sandbox = run.deps.sandbox ?? defaultSandboxPool();
    // The task's stop signal stops the script where it is (the sandbox waits for a call in flight).
    outcome = await run.stop.watch((signal) => sandbox.run(script, host, limitsOf(run.spec), { signal }));
  } catch (err) {
    if (err instanceof ScriptCancelled) return endIncomplete(run, { kind: 'cancelled' });
    if (err instanceof ScriptOverBudget) return endIncomplete(run, { kind: 'budget', reason: err.reason });
    if (err instanceof NonDeterminismError || err instanceof ScriptHostFailure)
      return endIncomplete(run, { kind: 'failure', reason: err.message });
    if (err instanceof SandboxAborted) return afterStop(run);
    if (err instanceof SandboxFailure) return endIncomplete(run, { kind: 'failure', reason: `the sandbox failed: ${err.message}` });
    throw err;
  }
  return actOnOutcome(run, outcome);
}

function emitOutcome(run: TaskRun, outcome: ScriptOutcome): void {
  const { job, state } = run;
  const base = { taskId: job.taskId, step: state.step, toolCalls: outcome.toolCalls };
  if (outcome.console) run.emit('codeact.output', { ...base, console: clip(outcome.console, EVENT_SCRIPT_CHARS) });
  if (outcome.kind === 'script_error') {
    run.emit('codeact.result', { ...base, tag: 'script_error', message: clip(outcome.message, EVENT_SCRIPT_CHARS) });
    if (outcome.limit) run.emit('codeact.limit', { ...base, limit: outcome.limit, message: outcome.message });
    return;
  }
  const { result } = outcome;
  const value = result.tag === 'transfer_to_agent' ? { agent: result.agent, reason: result.reason } : result.value;
  run.emit('codeact.result', { ...base, tag: result.tag, value: clip(JSON.stringify(value) ?? 'null', EVENT_SCRIPT_CHARS) });
}

/** Acts on how the script ended: the task's result, or what the model is shown before its next turn. */
async function actOnOutcome(run: TaskRun, outcome: ScriptOutcome): Promise<TaskResult | undefined> {
  const { state, spec } = run;
  emitOutcome(run, outcome);
  const result: TaggedResult | undefined = outcome.kind === 'result' ? outcome.result : undefined;
  if (result?.tag === 'final_result') return finalResult(run, outcome, result.value);
  if (result?.tag === 'transfer_to_agent') return transfer(run, result.agent, result.reason);
  if (state.askedToFinish)
    return stallUnlessCancelled(run, `did not return final_result after the last of its ${spec.maxToolRounds} script turns`);
  state.messages.push({ role: 'user', text: describeOutcome(outcome) });
  run.dirty = true;
  return undefined;
}

/** `final_result`: validated against the output schema, with the correction loop of `finish_task`. */
async function finalResult(run: TaskRun, outcome: ScriptOutcome, output: unknown): Promise<TaskResult | undefined> {
  const { spec, state, job } = run;
  const problem = validateAgainstSchema(spec.outputSchema, output);
  if (problem === null) {
    const result = await run.finish({
      v: 1,
      taskId: job.taskId,
      agent: spec.name,
      status: 'completed',
      output,
      attempts: run.attempt,
      reason: 'completed',
    });
    run.emit('agent.completed', { taskId: job.taskId, steps: state.step, output: output ?? null, ...usageOf(run) });
    return result;
  }
  state.invalidOutputs++;
  if (state.invalidOutputs > spec.maxInvalidOutputs) {
    const reason = `final_result did not match the output schema ${state.invalidOutputs} times: ${problem}`;
    return endIncomplete(run, { kind: 'failure', reason });
  }
  const printed = outcome.console ? `\n\nConsole output:\n${clip(outcome.console, 16_384)}` : '';
  state.messages.push({
    role: 'user',
    text: `Your final_result does not match the required schema: ${problem}. Return { final_result: ... } again with a conforming output.${printed}`,
  });
  await run.save();
  return undefined;
}

/**
 * `transfer_to_agent`: the task ends and asks the coordinator to delegate to that specialist. Its
 * result is INCOMPLETE (status `stalled`, nothing invented) and carries `transfer`.
 */
async function transfer(run: TaskRun, agent: string, reason: string): Promise<TaskResult> {
  const { job, spec } = run;
  const why = `transferred the task to ${agent}${reason ? `: ${reason}` : ''}`;
  const lastWords = run.lastWords();
  run.emit('agent.stalled', { taskId: job.taskId, kind: 'transfer', reason: why, marker: STALL_MARKER, lastWords, ...usageOf(run) });
  return run.finish({
    v: 1,
    taskId: job.taskId,
    agent: spec.name,
    status: 'stalled',
    output: buildStallPayload(spec, spec.name, run.lastWords(), why),
    attempts: run.attempt,
    error: why,
    reason: 'transfer',
    transfer: { agent, reason },
  });
}
