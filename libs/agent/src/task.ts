import { FINISH_TASK_TOOL, type TaskJob, type TaskResult, errorMessage } from '@bosun/contract';
import { MAX_TOOLS_PER_REQUEST } from '@bosun/policy';
import { ModelError, ThrottledError, type ModelResponse, type ToolCall } from '@bosun/models';
import { budgetStop, chargeModelCall } from './task-budget.js';
import { contextRefused, fitTaskContext } from './context-budget.js';
import { LOAD_TOOLS, type RoutingState } from './routing.js';
import { approvalStep } from './task-approval.js';
import { malformedArgsStep } from './task-args.js';
import { endIncomplete, finishStep, stallUnlessCancelled } from './task-end.js';
import { afterStop, stepBoundary } from './task-boundary.js';
import { toolRound } from './task-round.js';
import { TaskRun, openTaskRun } from './task-run.js';
import { DEFAULT_TASK_INSTRUCTION, RetryableTaskError, type TaskAgentDeps, type TaskAgentSpec, type TaskAttempt } from './task-types.js';
import { withRunbook } from './runbook.js';

export { APPROVED_CALLS_MARKER } from './task-approval.js';
export { taskDeadline } from './task-run.js';
export { afterStop, stepBoundary } from './task-boundary.js';
export { DEFAULT_TASK_INSTRUCTION, ParkError, RetryableTaskError, YieldError } from './task-types.js';
export type { RunTaskOptions, TaskAgentDeps, TaskAgentSpec, TaskAttempt, TaskPolicy } from './task-types.js';

const ASK_TO_FINISH =
  'You have used every tool round this task allows. Call finish_task now with what you found, ' +
  'and state in the report what you could not check.';

/**
 * Runs one delegation as a task-mode loop: model → tools → model … until `finish_task` with an
 * output that validates against the specialist's schema. The conversation is checkpointed before
 * every effect, so the loop resumes where it stopped when another process picks the job up.
 * Always returns a result — completed, stalled or failed — except for a retryable model error,
 * which it throws so the job is retried ({@link RetryableTaskError}), a wait for an operator
 * (`ParkError`) and a hand-over while the process drains ({@link YieldError}).
 *
 * Each pass of the loop is one named step: at the step boundary the deadline and the drain are
 * checked; then either the model's turn (`modelTurn`), or acting on that turn (`actOnTurn`:
 * routing's nudge, the finish step, a stall, the approval step, the tool round).
 *
 * @param attempt The attempt number, or the attempt with how the job was picked up
 *   (`firstPickup`: no checkpoint can exist yet, so none is read).
 */
export async function runTask(job: TaskJob, spec: TaskAgentSpec, deps: TaskAgentDeps, attempt: number | TaskAttempt): Promise<TaskResult> {
  const opened = await openTaskRun(job, spec, deps, typeof attempt === 'number' ? { attempt } : attempt);
  if (!(opened instanceof TaskRun)) return opened;
  try {
    for (;;) {
      const result = await nextStep(opened);
      if (result) return result;
    }
  } finally {
    opened.stop.dispose();
  }
}

/** One step of the loop; its result ends the task, undefined goes on. */
async function nextStep(run: TaskRun): Promise<TaskResult | undefined> {
  const last = run.lastMessage();
  const ended = await stepBoundary(run);
  if (ended) return ended;
  if (last.role !== 'model') return modelTurn(run);
  return actOnTurn(run, last.calls ?? []);
}

/**
 * The model's turn: asks the model, offering the tools (only `finish_task` once it was asked to
 * finish). No cancellation check before a model call: it has no effect to prevent. A task the
 * coordinator gave up on stops before its next effect.
 */
async function modelTurn(run: TaskRun): Promise<TaskResult | undefined> {
  const { spec, deps, state, tools } = run;
  if (state.toolRounds >= spec.maxToolRounds && !state.askedToFinish) {
    state.askedToFinish = true;
    state.messages.push({ role: 'user', text: ASK_TO_FINISH });
  }
  // Once asked to finish, only finish_task is offered (and an invalid output may be retried).
  const offered = state.askedToFinish ? [tools.finishDecl] : tools.declarations(state.routing);
  if (offered.length > MAX_TOOLS_PER_REQUEST) {
    const reason = `${offered.length} tools would be offered to the model in one request; the limit is ${MAX_TOOLS_PER_REQUEST}. Narrow specialists.${spec.name}.tools, or turn on routing.`;
    return endIncomplete(run, { kind: 'failure', reason });
  }
  // The budget is checked before the call that would cross it, never after.
  const over = await budgetStop(run, { modelCall: true });
  if (over) return endIncomplete(run, { kind: 'budget', reason: over });
  const system = withRunbook(spec.instruction ?? DEFAULT_TASK_INSTRUCTION, run.job.incident);
  // The request must fit the model's window: the history is trimmed first when it would not.
  fitTaskContext(run, { system, tools: offered }, 'estimate', 'task');
  const started = run.now();
  let response: ModelResponse;
  try {
    // The task's stop signal ends the call at once on a drain, a lost lock, a cancel or the deadline.
    const request = { agent: spec.name, mode: 'task' as const, system, messages: state.messages, tools: offered };
    response = await run.stop.watch((signal) => deps.model.generate(request, { signal }));
  } catch (err) {
    if (run.stop.why) return afterStop(run);
    // Its turn at the cluster-wide limiter is far off: hand the task back, holding no worker.
    if (err instanceof ThrottledError) {
      await run.saveIfDirty();
      throw err;
    }
    if (err instanceof ModelError && err.reason === 'context_length') return contextRefused(run, { system, tools: offered }, err, 'task');
    if (err instanceof ModelError && err.retryable) throw new RetryableTaskError(`model call failed: ${err.message}`, err);
    return endIncomplete(run, { kind: 'failure', reason: `model call failed: ${errorMessage(err)}` });
  }
  recordModelTurn(run, response, run.now() - started);
  return undefined;
}

/** Counts the model's turn, announces it (`model.called`) and puts it in the conversation. */
function recordModelTurn(run: TaskRun, response: ModelResponse, durationMs: number): void {
  const { state } = run;
  state.step++;
  // Counted in the same checkpoint write as the turn itself: a resumed task never counts it again.
  chargeModelCall(run, response);
  run.emit('model.called', {
    taskId: run.job.taskId,
    step: state.step,
    model: response.model ?? run.deps.model.name,
    durationMs,
    calls: response.calls.map((c) => c.name),
    ...(response.usage ? { usage: response.usage } : {}),
    ...(response.fallback ? { fallback: response.fallback } : {}),
  });
  state.messages.push({
    role: 'model',
    ...(response.text ? { text: response.text } : {}),
    ...(response.calls.length > 0 ? { calls: response.calls } : {}),
    // Kept with the turn: some providers need it back (Anthropic's signed thinking, DeepSeek's reasoning_content).
    ...(response.reasoning ? { reasoning: response.reasoning } : {}),
  });
  delete state.pending;
  delete state.contextRetryStep;
  run.dirty = true;
}

/**
 * Acts on the model's turn — unless the coordinator has given up on this task: then nothing it
 * asks for may take effect. The check is made once per turn, before its first effect.
 */
async function actOnTurn(run: TaskRun, calls: readonly ToolCall[]): Promise<TaskResult | undefined> {
  const { spec, state, tools } = run;
  run.newTurn();
  if (calls.some((c) => c.argsError !== undefined)) return malformedArgsStep(run, calls);
  if (tools.needsNudge(state.routing) && (calls.length === 0 || calls.some((c) => c.name === FINISH_TASK_TOOL)))
    return nudge(run, state.routing, calls);
  if (calls.length === 0) return stallUnlessCancelled(run, 'ended its turn without calling finish_task');
  const finishCall = calls.find((c) => c.name === FINISH_TASK_TOOL);
  if (finishCall) return finishStep(run, calls, finishCall);
  // Asked once to finish and it reached for tools again: nothing it was not offered runs.
  if (state.askedToFinish)
    return stallUnlessCancelled(run, `did not call finish_task after the last of its ${spec.maxToolRounds} tool rounds`);
  // Calls to `ask` tools wait for an operator: the whole turn is proposed as written, the task
  // parks, and resumes — in any process — with the decision.
  const resumed = state.pending?.kind === 'tools' && state.pending.step === state.step;
  const over = resumed ? undefined : await budgetStop(run, { toolCalls: calls.length });
  if (over) return endIncomplete(run, { kind: 'budget', reason: over });
  const asking = tools.askingTools(calls);
  if (asking.length === 0) return toolRound(run, calls, undefined);
  // The approval is keyed by the step: the turn it asks about must be on record first, so a
  // resumed task acts on exactly the calls that were proposed, never on a new model turn.
  await run.saveIfDirty();
  if (await run.isCancelled()) return endIncomplete(run, { kind: 'cancelled' });
  return toolRound(run, calls, await approvalStep(run, calls, asking));
}

/** Routing's one nudge: the model tries to answer before loading any tool. */
async function nudge(run: TaskRun, routing: RoutingState, calls: readonly ToolCall[]): Promise<undefined> {
  const { state, tools } = run;
  routing.nudged = true;
  const text = `You have not loaded any tools yet. Load what you need with ${LOAD_TOOLS} (groups: ${routing.groupsOffered.join(', ')}) before you answer; if none is relevant, call ${FINISH_TASK_TOOL} again.`;
  if (calls.length > 0)
    state.messages.push({
      role: 'tool',
      responses: calls.map((c) => ({ id: c.id, name: c.name, isError: true, output: `Not accepted yet. ${text}` })),
    });
  else state.messages.push({ role: 'user', text });
  run.emit('tool.routing', { taskId: run.job.taskId, action: 'nudge', stats: tools.routingStats(routing) });
  await run.save();
  return undefined;
}
