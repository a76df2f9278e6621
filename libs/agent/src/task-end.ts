import { STALL_MARKER, type DeadLetterKind, type TaskResult } from '@bosun/contract';
import { buildStallPayload, validateAgainstSchema } from '@bosun/config';
import type { ToolCall } from '@bosun/models';
import type { TaskRun } from './task-run.js';

/**
 * Why a task ends without a completed result:
 * - `stall`: it ended its turn without reporting, or kept calling tools once asked to finish;
 * - `timeout`: its deadline passed;
 * - `failure`: it cannot go on (a model error, too many invalid outputs, too many tools);
 * - `budget`: its next model or tool call would cross one of its budget's limits;
 * - `cancelled`: the coordinator gave up on it, or an operator cancelled its run.
 */
export type Incomplete = { kind: 'stall' | 'timeout' | 'failure' | 'budget'; reason: string } | { kind: 'cancelled' };

/**
 * The incomplete step: records the task's INCOMPLETE (or failed) result and returns it. Nothing
 * is invented: the payload is the configured or derived stall payload, with the agent's last
 * words verbatim. A stall, timeout or failure also writes a dead letter — first, so that the
 * event announcing it always points at an entry that exists.
 */
export async function endIncomplete(run: TaskRun, why: Incomplete): Promise<TaskResult> {
  // A worker that lost the task reports nothing: its next owner goes on with it.
  await run.deps.stillOwned?.();
  if (why.kind === 'cancelled') return run.finish(cancelledResult(run));
  if (why.kind === 'failure') return run.finish(await failedResult(run, why.reason));
  return run.finish(await stalledResult(run, why.kind, why.reason));
}

/** A stall, unless the task was cancelled: then nothing it asked for may take effect, a stall report included. */
export async function stallUnlessCancelled(run: TaskRun, reason: string): Promise<TaskResult> {
  if (await run.isCancelled()) return endIncomplete(run, { kind: 'cancelled' });
  return endIncomplete(run, { kind: 'stall', reason });
}

function cancelledResult(run: TaskRun): TaskResult {
  const { job, spec } = run;
  run.deps.log.info({ taskId: job.taskId, runId: job.runId }, 'task cancelled (by the coordinator, or its run by an operator)');
  const why = 'cancelled: the coordinator gave up on this task, or an operator cancelled its run';
  return {
    v: 1,
    taskId: job.taskId,
    agent: spec.name,
    status: 'stalled',
    output: buildStallPayload(spec, spec.name, run.lastWords(), why),
    attempts: run.attempt,
    error: 'cancelled',
    reason: 'cancelled',
  };
}

async function deadLetter(run: TaskRun, kind: DeadLetterKind, reason: string, lastWords: string): Promise<void> {
  const { job, spec } = run;
  await run.deps.deadLetters.add(
    { kind, runId: job.runId, incidentId: job.incidentId, agent: spec.name, taskId: job.taskId, reason, lastWords, attempts: run.attempt },
    `${kind}-${job.taskId}`,
  );
}

async function stalledResult(run: TaskRun, kind: 'stall' | 'timeout' | 'budget', reason: string): Promise<TaskResult> {
  const { job, spec } = run;
  const lastWords = run.lastWords();
  const output = buildStallPayload(spec, spec.name, lastWords, reason);
  await deadLetter(run, kind, `${spec.name} ${reason}`, lastWords);
  run.emit('agent.stalled', { taskId: job.taskId, kind, reason, marker: STALL_MARKER, lastWords, ...usageOf(run) });
  run.deps.log.warn({ taskId: job.taskId, kind, reason }, 'task incomplete');
  return {
    v: 1,
    taskId: job.taskId,
    agent: spec.name,
    status: 'stalled',
    output,
    attempts: run.attempt,
    lastWords,
    ...(kind === 'stall' ? {} : { error: reason }),
    reason: kind,
  };
}

async function failedResult(run: TaskRun, reason: string): Promise<TaskResult> {
  const { job, spec } = run;
  const lastWords = run.lastWords();
  const output = buildStallPayload(spec, spec.name, lastWords, reason);
  await deadLetter(run, 'failure', reason, lastWords);
  run.emit('agent.failed', { taskId: job.taskId, reason, marker: STALL_MARKER, ...usageOf(run) });
  run.deps.log.warn({ taskId: job.taskId, reason }, 'task failed');
  return {
    v: 1,
    taskId: job.taskId,
    agent: spec.name,
    status: 'failed',
    output,
    attempts: run.attempt,
    error: reason,
    reason: 'failure',
    lastWords,
  };
}

/**
 * The finish step: the model called `finish_task`. An output that validates completes the task;
 * another is fed back (the other calls of the turn are not run), until there have been more
 * than `maxInvalidOutputs`: then the task fails. Undefined when the loop goes on.
 */
export async function finishStep(run: TaskRun, calls: readonly ToolCall[], finishCall: ToolCall): Promise<TaskResult | undefined> {
  const { spec, state } = run;
  const problem = validateAgainstSchema(spec.outputSchema, finishCall.args);
  // No cancellation check for a valid output: a task the coordinator gave up on already has its
  // INCOMPLETE part in the run, and a late result for it is ignored there.
  if (problem === null) return complete(run, finishCall);
  state.invalidOutputs++;
  if (state.invalidOutputs > spec.maxInvalidOutputs) {
    const reason = `finish_task output did not match the output schema ${state.invalidOutputs} times: ${problem}`;
    return endIncomplete(run, { kind: 'failure', reason });
  }
  state.messages.push({
    role: 'tool',
    responses: calls.map((c) =>
      c === finishCall
        ? {
            id: c.id,
            name: c.name,
            isError: true,
            output: `Your output does not match the required schema: ${problem}. Call finish_task again with a conforming output.`,
          }
        : { id: c.id, name: c.name, isError: true, output: 'Not executed: finish_task was called in the same turn.' },
    ),
  });
  await run.save();
  return undefined;
}

async function complete(run: TaskRun, finishCall: ToolCall): Promise<TaskResult> {
  const { job, spec, state } = run;
  const stats = run.tools.routingStats(state.routing);
  const result = await run.finish({
    v: 1,
    taskId: job.taskId,
    agent: spec.name,
    status: 'completed',
    output: finishCall.args,
    attempts: run.attempt,
    reason: 'completed',
  });
  run.emit('agent.completed', {
    taskId: job.taskId,
    steps: state.step,
    output: finishCall.args,
    ...(stats ? { routing: stats } : {}),
    ...usageOf(run),
  });
  return result;
}

/** The task's usage so far, as an event field (absent before anything was spent). */
export function usageOf(run: TaskRun): { usage?: TaskResult['usage'] } {
  return run.state.usage ? { usage: run.state.usage } : {};
}
