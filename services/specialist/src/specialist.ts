import { DelayedError, UnrecoverableError, WaitingError, type Job } from 'bullmq';
import {
  BosunError,
  LockLostError,
  TaskJob,
  describeIssues,
  errorMessage,
  outputByReference,
  taskEndReason,
  type TaskEndReason,
  type TaskResult,
} from '@bosun/contract';
import { buildStallPayload, type SpecialistConfig } from '@bosun/config';
import {
  ParkError,
  RetryableTaskError,
  YieldError,
  runCodeActTask,
  runTask,
  type LocalOutcome,
  type LocalSpecialist,
  type RunLock,
  type TaskAgentDeps,
} from '@bosun/agent';
import { ThrottledError } from '@bosun/models';
import { metrics, type ApprovalStore, type RedisClient, type TraceNotes } from '@bosun/transport';
import { inTaskSpan } from './task-trace.js';
import { ownedDeps, taskLockOf } from './task-lock.js';
import type { RemoteSpecialist } from './remote.js';

/** The ports of a specialist worker: the task loop's, with the specialist's name and config. */
export interface SpecialistDeps extends TaskAgentDeps {
  name: string;
  spec: SpecialistConfig;
  /** Where approvals live; the worker also records where a task parks and wakes it. */
  approvals?: ApprovalStore;
  /** Where a task attempt's span finds the one before it (traces); none: attempts are not linked. */
  traceNotes?: TraceNotes;
  /** For a specialist done by a remote A2A agent (`a2a` in its config): runs its tasks instead of the model loop. */
  remote?: RemoteSpecialist;
  /** Where the task's job lock is read before an INCOMPLETE report (no read without it: the fenced save still guards). */
  redis?: RedisClient;
  /** Told when a task attempt finds it lost its job's lock (counted and logged once per burst: `watchWorkerLocks`). */
  onLockLost?: (taskId: string) => void;
}

/** Checkpoint errors that fail one task, never the worker. */
const UNUSABLE_CHECKPOINT = new Set(['bad_checkpoint', 'corrupt_checkpoint']);

/**
 * The processor of one `specialist-<name>` queue. Bad input becomes a poison dead letter and an
 * unrecoverable failure (the coordinator sees an INCOMPLETE result); a retryable model error is
 * thrown so BullMQ retries with backoff; everything else ends in a result.
 */
export function specialistProcessor(deps: SpecialistDeps) {
  const shared = sharedDeps(deps);
  return async (job: Job, token?: string, signal?: AbortSignal): Promise<TaskResult> => {
    const parsed = TaskJob.safeParse(job.data);
    if (!parsed.success || parsed.data.agent !== deps.name) {
      const reason = parsed.success
        ? `task for "${parsed.data.agent}" on the queue of "${deps.name}"`
        : `invalid task: ${describeIssues(parsed.error).issues.join('; ')}`;
      await deps.deadLetters.add({ kind: 'poison', agent: deps.name, reason, input: job.data }, `poison-${job.id ?? 'unknown'}`);
      throw new UnrecoverableError(reason);
    }
    try {
      return await inTaskSpan(deps.traceNotes, job, parsed.data, () => attemptTask(shared, { job, token, signal, task: parsed.data }));
    } finally {
      // What the task emitted (its agent.completed) is numbered before the job's end wakes the
      // coordinator, whose run.completed must come after it in the run's sequence: a stream that
      // ends at run.completed would miss an event numbered later.
      await deps.events.numbered?.();
    }
  };
}

/** The deps of every task of one specialist, with its logger and the spec the task loop is given. */
interface SharedDeps extends SpecialistDeps {
  loopSpec: SpecialistConfig & { name: string };
}

/**
 * Built once for every task: thousands of tasks in flight share them (and the task loop shares
 * what it derives from the spec object, such as the tool view).
 */
function sharedDeps(deps: SpecialistDeps): SharedDeps {
  return { ...deps, log: deps.log.child({ agent: deps.name }), loopSpec: { name: deps.name, ...deps.spec } };
}

/**
 * The specialist as the coordinator of its own process sees it (`bosun serve`): its tasks run
 * there without a job (libs/agent run-local.ts), with the same loop and ports as a job's attempt,
 * under the run's lock (the incident job's), which fences their checkpoint writes and their tool
 * calls. At most `concurrency` at once (beside the worker's own), none once the process drains.
 * What a job's attempt would hand back (a park for an approval or a rate limit, a drain, an error
 * BullMQ would retry) hands the task to its queue, where it resumes from its checkpoint. None for a
 * specialist done by a remote A2A agent (its tasks keep their jobs).
 */
export function localSpecialist(deps: SpecialistDeps): LocalSpecialist | undefined {
  if (deps.remote) return undefined;
  const shared = sharedDeps(deps);
  let running = 0;
  return {
    reserve() {
      if (running >= deps.spec.concurrency || deps.shouldYield?.()) return undefined;
      running++;
      let given = false;
      return {
        release() {
          if (!given) running--;
          given = true;
        },
      };
    },
    run: (task, runLock) => localAttempt(shared, task, runLock),
  };
}

/** One local task (see {@link localSpecialist}). */
async function localAttempt(shared: SharedDeps, task: TaskJob, runLock: RunLock): Promise<LocalOutcome> {
  const began = Date.now();
  const lock = { taskId: task.taskId, fence: runLock.fence, signal: runLock.signal, run: { jobId: runLock.jobId } };
  const deps = ownedDeps(shared, lock, shared.redis);
  try {
    const loop = deps.spec.loop === 'codeact' ? runCodeActTask : runTask;
    // Its first attempt: the task id is new, no checkpoint can exist yet.
    const result = await loop(task, deps.loopSpec, deps, { attempt: 1, firstPickup: true, signal: runLock.signal });
    metrics.taskFinished(deps.name, taskStatus(result), (Date.now() - began) / 1000);
    return { kind: 'result', result };
  } catch (err) {
    if (err instanceof LockLostError) throw err;
    if (runLock.signal?.aborted) throw new LockLostError(`task ${task.taskId}`, { data: { taskId: task.taskId }, cause: err });
    const why =
      err instanceof ParkError
        ? 'it waits for an approval'
        : err instanceof ThrottledError
          ? 'the model rate limit asks for a long wait'
          : err instanceof YieldError
            ? 'the process drains'
            : `it failed (${errorMessage(err)}) and is retried from its queue`;
    if (!(err instanceof ParkError || err instanceof ThrottledError || err instanceof YieldError))
      deps.log.warn({ taskId: task.taskId, err }, 'local task failed: handing it to its queue');
    return { kind: 'queue', reason: why };
  } finally {
    await deps.events.numbered?.();
  }
}

/** One attempt of a task job: the task loop, and what its park, hand-over or failure means for the job. */
async function attemptTask(
  shared: SharedDeps,
  picked: { job: Job; token: string | undefined; signal: AbortSignal | undefined; task: TaskJob },
): Promise<TaskResult> {
  const { job, token, signal, task } = picked;
  const lock = taskLockOf(job, token, signal);
  // This attempt's ports: its writes fenced by its lock, its tool calls carrying it.
  const deps = lock ? ownedDeps(shared, lock, shared.redis) : shared;
  const { log } = deps;
  const attempt = job.attemptsMade + 1;
  try {
    const loop = deps.spec.loop === 'codeact' ? runCodeActTask : runTask;
    // A specialist done by a remote A2A agent follows the remote task instead of running a model loop.
    const result = deps.remote
      ? await deps.remote.run(task, attempt)
      : await loop(task, deps.loopSpec, deps, { attempt, firstPickup: job.attemptsStarted <= 1 && !task.resumed, signal });
    // From the dispatch (the job's creation) to the result: waits for a worker and an approval included.
    metrics.taskFinished(deps.name, taskStatus(result), (Date.now() - job.timestamp) / 1000);
    // The task loops return the result their checkpoint holds (saved before they return it): the
    // job's return value, and its parent's copy of it, refer to that checkpoint for the output.
    // A remote task's result stays whole (its checkpoint is another, `remote:<taskId>`).
    return deps.remote ? result : outputByReference(result);
  } catch (err) {
    if (err instanceof LockLostError || signal?.aborted) {
      // Another process holds the task now (or will, once BullMQ finds it stalled): it resumes
      // from the checkpoint this attempt can no longer write. Nothing more is written or said
      // here; BullMQ leaves a job given up this way (WaitingError) to its next owner.
      deps.onLockLost?.(task.taskId);
      log.debug({ taskId: task.taskId, err }, 'task given up: its lock was lost');
      throw new WaitingError();
    }
    if (err instanceof ParkError && token && deps.approvals) {
      // Waiting for an operator holds no worker: the job is delayed until the approval's
      // timeout, and a decision promotes it back to the queue. Where it parks is recorded
      // first: a process that dies in between leaves an active job (found stalled and run
      // again), never a delayed one that no decision can find until its timeout.
      await deps.approvals.parkedAt(err.approvalId, job.queueName, String(job.id));
      await job.moveToDelayed(err.until, token);
      // A decision that landed before the job was parked could not wake it: do it now.
      const decided = await deps.approvals.get(err.approvalId);
      if (decided && decided.status !== 'pending') await deps.approvals.wake(decided);
      log.info({ taskId: task.taskId, approvalId: err.approvalId }, 'task parked until an operator decides');
      throw new DelayedError();
    }
    if (err instanceof ThrottledError && token) {
      // The cluster-wide rate limit asks for a long wait: the job waits delayed, not in a worker.
      log.info({ taskId: task.taskId, until: err.until }, 'model rate limit: task handed back until its turn');
      await job.moveToDelayed(err.until, token);
      throw new DelayedError();
    }
    if (err instanceof YieldError && token) {
      // Draining: hand the task back now rather than after the lock expires.
      log.info({ taskId: task.taskId }, 'handing the task back to the queue');
      await job.moveToDelayed(Date.now(), token);
      throw new DelayedError();
    }
    if (err instanceof BosunError && UNUSABLE_CHECKPOINT.has(err.code)) {
      // A checkpoint we cannot read fails this task only, with an explicit INCOMPLETE result.
      const reason = err.message;
      log.error({ taskId: task.taskId, reason }, 'unusable checkpoint');
      await deps.deadLetters.add(
        {
          kind: 'failure',
          runId: task.runId,
          incidentId: task.incidentId,
          agent: deps.name,
          taskId: task.taskId,
          reason,
          attempts: attempt,
        },
        `failure-${task.taskId}-checkpoint`,
      );
      deps.events.emit({
        type: 'agent.failed',
        runId: task.runId,
        incidentId: task.incidentId,
        agent: deps.name,
        data: { taskId: task.taskId, reason },
      });
      metrics.taskFinished(deps.name, 'failed', (Date.now() - job.timestamp) / 1000);
      return {
        v: 1,
        taskId: task.taskId,
        agent: deps.name,
        status: 'failed',
        output: buildStallPayload(deps.spec, deps.name, '', reason),
        attempts: attempt,
        error: reason,
        reason: 'failure',
      };
    }
    if (err instanceof RetryableTaskError) log.warn({ taskId: task.taskId, attempt, err }, 'task will be retried');
    else log.error({ taskId: task.taskId, attempt, err }, 'task error');
    throw err;
  }
}

/** The `status` label of `bosun_tasks_finished_total` for each way a task ends (docs/observability.md). */
const FINISHED_AS: Record<TaskEndReason, string> = {
  completed: 'completed',
  stall: 'stalled',
  timeout: 'timeout',
  budget: 'budget',
  cancelled: 'cancelled',
  transfer: 'transfer',
  failure: 'failed',
  in_doubt: 'in_doubt',
};

/** A task result's status as counted, from why it ended (its `reason`), never from its text. */
export function taskStatus(result: TaskResult): string {
  return FINISHED_AS[taskEndReason(result)];
}
