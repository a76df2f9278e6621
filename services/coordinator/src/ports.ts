/**
 * The run loop's ports over BullMQ and Redis: child jobs on the `specialist-<name>` queues,
 * timers on the coordinator's timers queue, and the cancel keys.
 */
import { Job, Queue } from 'bullmq';
import {
  CANCEL_TTL_SECONDS,
  COORDINATOR_TIMERS_QUEUE,
  INCIDENTS_QUEUE,
  TASK_JOB,
  specialistQueue,
  taskCancelKey,
  timerJobId,
  type RunCancellation,
  type TaskJob,
  type TimerJob,
} from '@bosun/contract';
import type { RetentionConfig } from '@bosun/config';
import type { CancelKeys, ChildState, ChildrenRead, IncidentJob, ParkedRun, RunChildren, RunJobs, RunTimers } from '@bosun/agent';
import { LockLostError } from '@bosun/contract';
import { SpanKind, inSpan, isLockError, readRunCancellation, traceCarrier, type RedisClient } from '@bosun/transport';

/** How long finished child and timer jobs are kept, and a task's cancel key, by default (`retention`: 7 days). */
const KEEP_SECONDS = 7 * 24 * 3600;

/** Connection and prefix of the queues, and how long what they write is kept. */
export interface QueueOptions {
  redis: RedisClient;
  prefix: string;
  /** `taskResults`: finished task and timer jobs; `checkpoints`: a task's cancel key (it lives as long as the task's checkpoint). Default 7 days each. */
  retention?: Pick<RetentionConfig, 'taskResults' | 'checkpoints'> | undefined;
}

/** The task id of a child job's key (`<prefix>:<queue>:<jobId>`: a task id holds no colon). */
export function taskIdOfKey(key: string): string {
  return key.slice(key.lastIndexOf(':') + 1);
}

/** A parent job's children's return values and ignored failures, by task id. */
async function readChildren(job: Job): Promise<ChildrenRead> {
  const [values, failures] = await Promise.all([job.getChildrenValues<unknown>(), job.getIgnoredChildrenFailures()]);
  return {
    values: new Map(Object.entries(values).map(([key, value]) => [taskIdOfKey(key), value] as const)),
    failures: new Map(Object.entries(failures).map(([key, reason]) => [taskIdOfKey(key), reason] as const)),
  };
}

/** Task jobs (children of incident jobs) and parked incident jobs, over BullMQ. */
export class BullRunJobs implements RunJobs {
  private readonly options: QueueOptions;
  private readonly queues = new Map<string, Queue>();
  private readonly incidents: Queue;
  private readonly keepSeconds: number;

  constructor(options: QueueOptions) {
    this.options = options;
    this.keepSeconds = options.retention?.taskResults ?? KEEP_SECONDS;
    this.incidents = new Queue(INCIDENTS_QUEUE, { connection: options.redis, prefix: options.prefix });
  }

  private queueFor(agent: string): Queue {
    let q = this.queues.get(agent);
    if (!q) {
      q = new Queue(specialistQueue(agent), { connection: this.options.redis, prefix: this.options.prefix });
      this.queues.set(agent, q);
    }
    return q;
  }

  /** The children of one incident job: task jobs on their specialists' queues. */
  childrenOf(parent: Job): RunChildren {
    return {
      // The delegation is a span of its own; the task job carries its trace context.
      add: (task: TaskJob, options: { attempts: number }) =>
        inSpan(
          `delegate ${task.agent}`,
          { kind: SpanKind.PRODUCER, attributes: { 'gen_ai.agent.name': task.agent, 'bosun.task.id': task.taskId } },
          async () => {
            await this.queueFor(task.agent).add(
              TASK_JOB,
              { ...task, ...traceCarrier() },
              {
                jobId: task.taskId,
                parent: { id: String(parent.id), queue: parent.queueQualifiedName },
                attempts: options.attempts,
                backoff: { type: 'exponential', delay: 1_000 },
                // A child that fails for good must not block the run: its failure is collected instead.
                ignoreDependencyOnFailure: true,
                removeOnComplete: { age: this.keepSeconds },
                removeOnFail: { age: this.keepSeconds },
              },
            );
          },
        ),
    };
  }

  /**
   * The incident job being processed, with its lock's token (none: it cannot park) and the signal
   * BullMQ aborts when the lock is lost.
   */
  incidentJob(job: Job, token: string | undefined, signal?: AbortSignal): IncidentJob {
    return {
      id: job.id,
      name: job.name,
      data: job.data as unknown,
      timestamp: job.timestamp,
      attemptsStarted: job.attemptsStarted,
      attemptsMade: job.attemptsMade,
      maxAttempts: job.opts.attempts ?? 1,
      parkable: token !== undefined,
      children: { ...this.childrenOf(job), read: () => readChildren(job) },
      park: async () => {
        if (!token) return false;
        try {
          return await job.moveToWaitingChildren(token);
        } catch (err) {
          // BullMQ refused the lock: another coordinator holds (or will hold) the run now.
          if (isLockError(err)) throw new LockLostError(`run of incident job ${String(job.id)}`, { cause: err });
          throw err;
        }
      },
      progress: (value) => job.updateProgress(value),
      ...(token && job.id !== undefined ? { fence: { key: `${job.queueQualifiedName}:${job.id}:lock`, token } } : {}),
      lost: () => signal?.aborted ?? false,
      signal,
    };
  }

  async childState(agent: string, taskId: string): Promise<ChildState> {
    const child = await Job.fromId(this.queueFor(agent), taskId);
    if (!child) return 'none';
    return (await child.getState()) === 'completed' ? 'completed' : 'open';
  }

  async childAttempts(agent: string, taskId: string): Promise<number> {
    const child = await Job.fromId(this.queueFor(agent), taskId);
    return child?.attemptsMade ?? 0;
  }

  async release(agent: string, taskId: string): Promise<void> {
    const child = await Job.fromId(this.queueFor(agent), taskId);
    if (child) await child.removeChildDependency();
  }

  async parked(jobId: string): Promise<ParkedRun | undefined> {
    const parent = await Job.fromId(this.incidents, jobId);
    if (!parent || (await parent.getState()) !== 'waiting-children') return undefined;
    return { data: parent.data as unknown, children: this.childrenOf(parent) };
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values(), this.incidents].map((q) => q.close()));
  }
}

/** The coordinator's timers: delayed jobs on {@link COORDINATOR_TIMERS_QUEUE}, named by kind, with their `timerJobId`. */
export class BullRunTimers implements RunTimers {
  private readonly queue: Queue;
  private readonly keepSeconds: number;

  constructor(options: QueueOptions) {
    this.keepSeconds = options.retention?.taskResults ?? KEEP_SECONDS;
    this.queue = new Queue(COORDINATOR_TIMERS_QUEUE, { connection: options.redis, prefix: options.prefix });
  }

  async add(timer: TimerJob, delayMs: number): Promise<void> {
    await this.queue.add(timer.kind, timer, {
      jobId: timerJobId(timer),
      delay: delayMs,
      removeOnComplete: true,
      removeOnFail: { age: this.keepSeconds },
    });
  }

  async remove(timer: TimerJob): Promise<void> {
    await this.queue.remove(timerJobId(timer));
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}

/** The contract's cancel keys in Redis. */
export class RedisCancelKeys implements CancelKeys {
  constructor(private readonly options: QueueOptions) {}

  run(runId: string): Promise<RunCancellation | null> {
    return readRunCancellation(this.options.redis, this.options.prefix, runId);
  }

  async stopTask(taskId: string): Promise<void> {
    await this.options.redis.set(
      taskCancelKey(this.options.prefix, taskId),
      '1',
      'EX',
      this.options.retention?.checkpoints ?? CANCEL_TTL_SECONDS.task,
    );
  }
}
