import type { Job } from 'bullmq';
import { LockLostError } from '@bosun/contract';
import type { TaskAgentDeps } from '@bosun/agent';
import type { CheckpointFence, CheckpointStore, RedisClient, ToolClient } from '@bosun/transport';

/** The lock one task attempt holds: its BullMQ lock's key and token, and the signal BullMQ aborts when it is lost. */
export interface TaskLock {
  taskId: string;
  fence: CheckpointFence;
  signal: AbortSignal | undefined;
  /** A local task (no job of its own) holds its run's lock: the incident job's id, for the gateway's check. */
  run?: { jobId: string } | undefined;
}

/** The lock of a task job picked up with `token` (none: the job is not processed under a lock, as in some tests). */
export function taskLockOf(job: Job, token: string | undefined, signal: AbortSignal | undefined): TaskLock | undefined {
  if (!token || job.id === undefined) return undefined;
  // BullMQ's lock key of a job: `<prefix>:<queue>:<jobId>:lock`.
  return { taskId: job.id, fence: { key: `${job.queueQualifiedName}:${job.id}:lock`, token }, signal };
}

/**
 * The task loop's ports for one attempt that holds `lock`: every checkpoint write is fenced by it
 * (a worker that lost its job writes nothing over its next owner's state), every tool call
 * carries it (the gateway refuses a call from a stale owner), and a lock BullMQ reported lost
 * (the aborted signal) stops the task before its next effect. Each throws `LockLostError`, which
 * the processor turns into giving the job up.
 */
export function ownedDeps<D extends TaskAgentDeps>(deps: D, lock: TaskLock, redis: RedisClient | undefined): D {
  const lost = () => new LockLostError(`task ${lock.taskId}`, { data: { taskId: lock.taskId } });
  const check = () => {
    if (lock.signal?.aborted) throw lost();
  };
  const checkpoints: CheckpointStore = {
    load: (id) => deps.checkpoints.load(id),
    save: async (id, value, options) => {
      check();
      await deps.checkpoints.save(id, value, { ...options, fence: lock.fence });
    },
    delete: (id) => deps.checkpoints.delete(id),
  };
  const tools: ToolClient = {
    catalog: () => deps.tools.catalog(),
    call: async (call, options) => {
      check();
      const taskLock = { taskId: lock.taskId, token: lock.fence.token, ...(lock.run ? { run: lock.run } : {}) };
      return deps.tools.call({ ...call, taskLock }, options);
    },
  };
  const { isCancelled } = deps;
  return {
    ...deps,
    checkpoints,
    tools,
    isCancelled: async (taskId: string, runId: string) => {
      check();
      return isCancelled ? isCancelled(taskId, runId) : false;
    },
    // Before an INCOMPLETE report (its dead letter and event come before its fenced save).
    stillOwned: async () => {
      check();
      if (redis && (await redis.get(lock.fence.key)) !== lock.fence.token) throw lost();
    },
  };
}
