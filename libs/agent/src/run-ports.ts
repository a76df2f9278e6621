/**
 * The ports of the coordinator's run loop ({@link runIncident}, {@link handleTimer}): what it needs
 * from the world, as interfaces. `services/coordinator` implements them over BullMQ and Redis;
 * the unit tests over memory.
 */
import type { RunCancellation, TaskJob, TaskResult, TimerJob } from '@bosun/contract';
import type { ClusterConfig, Logger } from '@bosun/config';
import type { Model } from '@bosun/models';
import type { Approvals, CheckpointFence, Clock, DeadLetters, EventSink, RevisedCheckpointStore, UsageLedger } from './ports.js';

/** The children of a run's incident job, by task id: their return values, and the failures the run ignores (their reasons). */
export interface ChildrenRead {
  values: Map<string, unknown>;
  failures: Map<string, string>;
}

/** Adds the child jobs of one run's incident job. */
export interface RunChildren {
  /**
   * Adds a delegation's task job (job id: its task id; idempotent) as a child of the run's
   * incident job, tried `attempts` times; a child that fails for good does not block the run
   * (its failure is read with the other children).
   */
  add(task: TaskJob, options: { attempts: number }): Promise<void>;
}

/** The incident job a coordinator is processing, as the run loop sees it. */
export interface IncidentJob {
  /** The job id (the incident's id, once checked). */
  id: string | undefined;
  /** The job name ({@link INCIDENT_JOB} expected). */
  name: string;
  data: unknown;
  /** When the job was created (ms): with the incident id it names the run. */
  timestamp: number;
  /** How many times the job has been started (1 on its first pickup: there is no checkpoint to read). */
  attemptsStarted: number;
  /** How many attempts have failed so far. */
  attemptsMade: number;
  /** How many attempts the job has in all. */
  maxAttempts: number;
  /**
   * True when the job can park (the processor holds its lock): its children are then read early,
   * beside the checkpoint, and {@link park} may park it.
   */
  parkable: boolean;
  children: RunChildren & {
    /** The children's results and ignored failures. */
    read(): Promise<ChildrenRead>;
  };
  /**
   * Parks the job until its children have finished (it holds no worker meanwhile, and is picked
   * up again then). False when none is left to wait for, or the job cannot park: go on now.
   * Throws `LockLostError` when the processor no longer holds the job.
   */
  park(): Promise<boolean>;
  /**
   * The job's lock, when it is processed under one: the run checkpoint is written only while it
   * holds (a coordinator that lost the job cannot overwrite its next owner's run).
   */
  fence?: CheckpointFence | undefined;
  /** True once BullMQ has told the processor it lost the job's lock (its renewal failed). */
  lost?: () => boolean;
  /** BullMQ's processor signal, aborted when the job's lock is lost: it ends the coordinator's model call in flight. */
  signal?: AbortSignal | undefined;
  /** Sets the job's progress. */
  progress(value: Record<string, unknown>): Promise<void>;
}

/** A task job's state, as far as the run cares. */
export type ChildState = 'completed' | 'open' | 'none';

/** An incident job found parked by a timer. */
export interface ParkedRun {
  /** The incident job's data. */
  data: unknown;
  children: RunChildren;
}

/** Task jobs and incident jobs, by id, outside the processing of their run. */
export interface RunJobs {
  /** A task job's state: `completed`, `open` (any other), or `none` when there is no such job. */
  childState(agent: string, taskId: string): Promise<ChildState>;
  /** How many attempts a task job has made (0 when there is none); throws when it cannot be read. */
  childAttempts(agent: string, taskId: string): Promise<number>;
  /** Drops a task job's dependency from its parent, so the run no longer waits for it; nothing when there is no such job. */
  release(agent: string, taskId: string): Promise<void>;
  /** The incident job `jobId` when it is parked (waiting for its children); undefined otherwise. */
  parked(jobId: string): Promise<ParkedRun | undefined>;
}

/** The coordinator's timers: delayed jobs, each idempotent by its `timerJobId`. */
export interface RunTimers {
  add(timer: TimerJob, delayMs: number): Promise<void>;
  remove(timer: TimerJob): Promise<void>;
}

/** The cancel keys of the contract (`runCancelKey`, `taskCancelKey`). */
export interface CancelKeys {
  /** An operator's cancellation of the run, or null. */
  run(runId: string): Promise<RunCancellation | null>;
  /** Tells a task's specialist to stop before its next effect. */
  stopTask(taskId: string): Promise<void>;
}

/** What a local task runs under: its run's lock (the incident job's), which fences its writes and its tool calls. */
export interface RunLock {
  /** The incident job's id (the gateway checks its lock for the task's calls). */
  jobId: string;
  fence: CheckpointFence;
  /** Aborted when the run's lock is lost: the task stops before its next effect. */
  signal?: AbortSignal | undefined;
}

/**
 * How a local task ended: its `result`, whole, as its task checkpoint holds it (saved there
 * before it is returned), or `queue`: it cannot go on in this process (it waits for an approval or a
 * rate limit, the process drains, or it failed and may be retried), and is handed to its
 * specialist's queue, where it resumes from its checkpoint. Throws `LockLostError` when the run's
 * lock was lost.
 */
export type LocalOutcome = { kind: 'result'; result: TaskResult } | { kind: 'queue'; reason: string };

/** A specialist hosted in the coordinator's own process (`bosun serve`). */
export interface LocalSpecialist {
  /** Takes a place for one more task, or says no (every place taken, or the process drains); `release` gives it back. */
  reserve(): { release(): void } | undefined;
  run(task: TaskJob, lock: RunLock): Promise<LocalOutcome>;
}

/** The specialists of the coordinator's own process, by name (none in a coordinator process of its own). */
export interface LocalSpecialists {
  get(agent: string): LocalSpecialist | undefined;
}

/** The ports of the coordinator's run loop. */
export interface RunDeps {
  /** The cluster's config: `coordinator` (mode, model routes, deadlines, rounds) and `specialists`. */
  config: ClusterConfig;
  model: Model;
  /** Run checkpoints (written compare-and-set by timers) and task checkpoints (read). */
  checkpoints: RevisedCheckpointStore;
  events: EventSink;
  deadLetters: Pick<DeadLetters, 'add'>;
  jobs: RunJobs;
  timers: RunTimers;
  cancels: CancelKeys;
  clock: Clock;
  log: Logger;
  /** Where approvals live: a cancelled run denies the approvals its tasks wait for. Optional. */
  approvals?: Pick<Approvals, 'decide'>;
  /** The run's usage ledger (with `budgets.run`): the coordinator's own spending is written there, as part `coordinator`. */
  usage?: Pick<UsageLedger, 'record'>;
  /** Specialists this process hosts (`bosun serve`): their tasks run here, without a child job (`run-local.ts`). */
  local?: LocalSpecialists;
}
