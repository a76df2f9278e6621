import type { TaskResult } from '@bosun/contract';
import { endIncomplete } from './task-end.js';
import type { TaskRun } from './task-run.js';
import { YieldError } from './task-types.js';

/**
 * The step boundary, shared with the CodeAct loop: where a task may stop (saving what it has) or
 * be handed over. A result when its deadline has passed; throws {@link YieldError} when draining.
 */
export async function stepBoundary(run: TaskRun): Promise<TaskResult | undefined> {
  if (run.now() >= run.deadline()) {
    const { approvalWaitMs } = run.state;
    const paused = approvalWaitMs ? `, moved by ${approvalWaitMs} ms spent waiting for approvals` : '';
    const reason = `did not finish before its deadline (${run.job.deadlineAt ?? ''}${paused})`;
    return endIncomplete(run, { kind: 'timeout', reason });
  }
  // Draining, or this attempt's signal aborted (its lock went elsewhere): hand the task over.
  if (run.deps.shouldYield?.() || run.stop.handOver.aborted) {
    await run.saveIfDirty();
    throw new YieldError(run.job.taskId);
  }
  return undefined;
}

/**
 * What a task does once its stop signal aborted what it waited on (a model call, a script, its
 * tools): cancelled, it ends as cancelled; past its deadline, as timed out; otherwise (the
 * process drains, the attempt's signal aborted) it saves what it has and is handed back
 * ({@link YieldError}): its next owner goes on from the checkpoint, and tool calls already sent
 * are answered there from the gateway's records under the same keys.
 */
export async function afterStop(run: TaskRun): Promise<TaskResult> {
  if (run.stop.why === 'cancelled') return endIncomplete(run, { kind: 'cancelled' });
  const ended = await stepBoundary(run);
  if (ended) return ended;
  await run.saveIfDirty();
  throw new YieldError(run.job.taskId);
}
