import { toolCallKey, type Approval, type InDoubtCall, type TaskResult, type ToolCallResult, errorMessage } from '@bosun/contract';
import type { ToolCall, ToolResponse } from '@bosun/models';
import { LOAD_TOOLS } from './routing.js';
import { describeDecision, neededApproval, notApproved } from './task-approval.js';
import { chargeToolCalls } from './task-budget.js';
import { endIncomplete } from './task-end.js';
import { afterStop } from './task-boundary.js';
import type { TaskRun } from './task-run.js';

/** One round of tool calls under way: its step, the approval it ran under, and what came back in doubt. */
interface Round {
  step: number;
  approval: Approval | undefined;
  /** Per-call timeout: the deps' tool timeout, cut short by the task's deadline, never below 1 s. */
  timeoutMs: number;
  /** By the call's index in the turn. */
  inDoubt: (InDoubtCall | undefined)[];
}

/**
 * The tool round: runs the calls of the model's turn, side by side. Each carries an idempotency
 * key from its place in the run, so a resumed task sends the same keys and the gateway answers
 * repeats from its record. The round is saved first (`pending: tools`); a task cancelled by then
 * runs none of them. Undefined when the loop goes on.
 */
export async function toolRound(run: TaskRun, calls: readonly ToolCall[], approval: Approval | undefined): Promise<TaskResult | undefined> {
  const { job, state, deps } = run;
  const step = state.step;
  // A round resumed after a crash was already counted (rounds and tool calls) when it was first saved.
  if (!(state.pending?.kind === 'tools' && state.pending.step === step)) {
    state.toolRounds++;
    chargeToolCalls(run, calls.length);
  }
  state.pending = {
    kind: 'tools',
    step,
    keys: calls.map((_, i) => toolCallKey(job.taskId, step, i)),
    at: new Date(run.now()).toISOString(),
  };
  const cancelling = run.isCancelled();
  // Awaited below, after the save; a rejection is handled there, not left unhandled meanwhile.
  cancelling.catch(() => undefined);
  await run.save();
  if (await cancelling) return endIncomplete(run, { kind: 'cancelled' });
  const timeoutMs = Math.max(1_000, Math.min(deps.toolTimeoutMs ?? Number.POSITIVE_INFINITY, run.deadline() - run.now()));
  const round: Round = { step, approval, timeoutMs, inDoubt: [] };
  const responses = await Promise.all(calls.map((call, index) => answerCall(run, round, call, index)));
  // Handed over while waiting (a drain, a lost lock): the round stays pending, and the next owner
  // sends the same keys again (answered from the gateway's records).
  if (run.stop.handOver.aborted) return afterStop(run);
  state.messages.push({ role: 'tool', responses });
  // A round redone after a crash gets the same keys in doubt again: each is kept once.
  for (const c of round.inDoubt) if (c && !state.inDoubt?.some((d) => d.key === c.key)) (state.inDoubt ??= []).push(c);
  if (approval) state.messages.push({ role: 'user', text: describeDecision(approval) });
  delete state.pending;
  run.dirty = true;
  return undefined;
}

/** The answer to one call of the round: `load_tools` is answered here; other tools go to the gateway. */
async function answerCall(run: TaskRun, round: Round, call: ToolCall, index: number): Promise<ToolResponse> {
  const { state, tools } = run;
  if (call.name === LOAD_TOOLS && tools.routes(state.routing)) {
    const outcome = tools.load(state.routing, call.args);
    run.emit('tool.routing', {
      taskId: run.job.taskId,
      action: 'load',
      loaded: outcome.loaded,
      unknown: outcome.unknown,
      stats: tools.routingStats(state.routing),
    });
    return { id: call.id, name: call.name, isError: outcome.unknown.length > 0 && outcome.loaded.length === 0, output: outcome };
  }
  if (tools.byName.has(call.name) && tools.routes(state.routing) && !state.routing.loaded.includes(call.name)) {
    return { id: call.id, name: call.name, isError: true, output: `Tool "${call.name}" is not loaded. Load it with ${LOAD_TOOLS} first.` };
  }
  // A tool this agent was not offered (or that does not exist) still goes to the gateway:
  // policy is decided, audited and reported there (tool.failed), in one place.
  const refused = notApproved(round.approval, index);
  if (refused) return { id: call.id, name: call.name, isError: true, output: `Not executed: ${refused}.` };
  return sendCall(run, round, call, index);
}

/** Sends one call to the gateway and turns its result into the model's answer. */
async function sendCall(run: TaskRun, round: Round, call: ToolCall, index: number): Promise<ToolResponse> {
  const { job, spec, deps } = run;
  const key = toolCallKey(job.taskId, round.step, index);
  const { approval } = round;
  let result: ToolCallResult;
  try {
    result = await deps.tools.call(
      {
        v: 1,
        key,
        runId: job.runId,
        incidentId: job.incidentId,
        agent: spec.name,
        tool: call.name,
        args: call.args,
        ...(approval && neededApproval(approval, index) ? { approvalId: approval.id } : {}),
      },
      { ...(Number.isFinite(round.timeoutMs) ? { timeoutMs: round.timeoutMs } : {}), signal: run.stop.handOver },
    );
  } catch (err) {
    return { id: call.id, name: call.name, isError: true, output: `The tool call could not be completed: ${errorMessage(err)}` };
  }
  if (result.inDoubt) round.inDoubt[index] = { key, tool: call.name };
  // The key goes with the result: the context budget names it when it shortens the result.
  return { ...toolResponse(run, call, result), key };
}

/** What the model is told of a call's result. */
function toolResponse(run: TaskRun, call: ToolCall, result: ToolCallResult): ToolResponse {
  const offered = run.tools.byName.has(call.name);
  if (!offered && result.status === 'error') {
    return {
      id: call.id,
      name: call.name,
      isError: true,
      output: `Tool "${call.name}" is not available to this agent: ${result.error ?? 'refused'}. Use only the tools you were given.`,
    };
  }
  if (!offered)
    run.deps.log.warn(
      { taskId: run.job.taskId, tool: call.name },
      'the gateway ran a tool this agent was not offered: the specialist and the gateway disagree on the policy (different config files?)',
    );
  if (result.status === 'error') {
    return { id: call.id, name: call.name, isError: true, output: `The tool call failed: ${result.error ?? 'unknown error'}` };
  }
  return { id: call.id, name: call.name, isError: result.isError, output: result.structured ?? result.text };
}
