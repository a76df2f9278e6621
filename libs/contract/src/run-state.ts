/**
 * The run side's stored formats: the coordinator's run checkpoint, the jobs of its timers queue
 * and the cancel keys. They are Bosun's own state, not part of the v1 wire contract (their format
 * may change without a version bump), but every reader — the coordinator, `RunControl`, the CLI —
 * parses them with these schemas and builds their names with these functions.
 */
import { z } from 'zod';
import { MessageSchema } from './messages.js';
import { RunCancellation, TaskResult } from './schemas.js';
import { UsageTotals } from './usage.js';

/** The coordinator's internal queue of timers: deadlines (delayed jobs), in-run retries and cancellations. */
export const COORDINATOR_TIMERS_QUEUE = 'coordinator-timers';

/** One part of a run handed to a specialist: a child job of the run's incident job. */
export const Delegation = z.object({
  taskId: z.string(),
  agent: z.string(),
  round: z.number().int().nonnegative(),
  /** The model's call id, in delegate mode. */
  callId: z.string().optional(),
  task: z.string(),
  /** The delegation this one retries (an operator's `bosun dlq retry`); it supersedes that one. */
  retryOf: z.string().optional(),
  /** The delegation whose CodeAct script handed the task over to this one (`transfer_to_agent`); it supersedes that one. */
  transferOf: z.string().optional(),
  /** When this delegation times out (ISO). */
  deadlineAt: z.string().optional(),
  /**
   * The task runs in the run's own process, with no child job (a local task, `bosun serve`): a
   * run resumed elsewhere finds it without a result and hands it to its specialist's queue.
   */
  local: z.literal(true).optional(),
  /** Filled once the child job has finished (or could not be created). */
  result: TaskResult.optional(),
});
export type Delegation = z.infer<typeof Delegation>;

/**
 * Where a run is: `routing` (route mode, before its child jobs), `thinking` (delegate mode, the
 * model's turn), `waiting` (parked until its children finish) or `done` (answering, or answered).
 */
export const RunPhase = z.enum(['routing', 'waiting', 'thinking', 'done']);
export type RunPhase = z.infer<typeof RunPhase>;

/** The coordinator's checkpoint of one run, stored under {@link runCheckpointId}. */
export const RunCheckpoint = z.object({
  v: z.literal(1),
  runId: z.string(),
  incidentId: z.string(),
  startedAt: z.string(),
  /** When the run ends `partial` with what it has (ISO). */
  deadlineAt: z.string(),
  /** The incident job's id, so timers can find the parked job. */
  jobId: z.string(),
  mode: z.enum(['route', 'delegate']),
  phase: RunPhase,
  round: z.number().int().nonnegative(),
  delegations: z.array(Delegation),
  /** The chat history, in delegate mode. */
  messages: z.array(MessageSchema),
  /** The specialists chosen (route mode) or delegated to so far (delegate mode). */
  routed: z.array(z.string()).optional(),
  /** An operator's cancellation, once the coordinator has seen it. */
  cancelled: RunCancellation.optional(),
  /** What the coordinator's own model calls have spent (its parts' usage is in their results). */
  usage: UsageTotals.optional(),
  /**
   * When the run's one pending deadline timer (`run-timer`) is due (epoch ms): the earliest of its
   * delegations' backstops and its own deadline, set when the run parks (see {@link TimerJob}).
   */
  timerAt: z.number().int().nonnegative().optional(),
  /** The run result (a `RunResult`), once the run has ended. */
  result: z.unknown().optional(),
});
export type RunCheckpoint = z.infer<typeof RunCheckpoint>;

/** The checkpoint id of a run: `run:<runId>`. */
export function runCheckpointId(runId: string): string {
  return `run:${runId}`;
}

/** The Redis key of a run's checkpoint: `<prefix>:ckpt:run:<runId>` (a JSON string). */
export function runCheckpointKey(prefix: string, runId: string): string {
  return `${prefix}:ckpt:${runCheckpointId(runId)}`;
}

/**
 * A job on {@link COORDINATOR_TIMERS_QUEUE}; its job name is its `kind`, its job id
 * {@link timerJobId}.
 * - `run-timer`: the run's one deadline timer, added when it parks, due at `at` (epoch ms): the
 *   earliest of its delegations' backstops (5 s after each one's deadline, later by an approval
 *   wait) and the run's own deadline. It ends what is due and adds the next one (`at` of the next
 *   due); `again` is set when a run found not parked is looked at again (`-a<n>`);
 * - `run-deadline`, `task-deadline`: the timers of earlier versions (one for the run's deadline,
 *   one per delegation; `moved` on those moved by an approval wait, `-m<n>`), still handled;
 * - `retry-task`: an operator's `bosun dlq retry` of one delegation of a run still open;
 * - `cancel-run`: an operator's `bosun cancel` (the cancellation itself is in the run's cancel
 *   key); `again` is set when a run not parked is looked at again (`-a<n>`).
 */
export const TimerJob = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('run-timer'),
    runId: z.string(),
    /** When it is due (epoch ms). */
    at: z.number().int().nonnegative(),
    /** A run found not parked, looked at again: the how-manieth time. */
    again: z.number().int().positive().optional(),
  }),
  z.object({ kind: z.literal('run-deadline'), runId: z.string() }),
  z.object({
    kind: z.literal('task-deadline'),
    runId: z.string(),
    taskId: z.string(),
    /** A task deadline moved by an approval wait: the how-manieth time. */
    moved: z.number().int().positive().optional(),
  }),
  z.object({ kind: z.literal('retry-task'), runId: z.string(), taskId: z.string() }),
  z.object({
    kind: z.literal('cancel-run'),
    runId: z.string(),
    /** A cancellation looked at again, the run not being parked before: the how-manieth time. */
    again: z.number().int().positive().optional(),
  }),
]);
export type TimerJob = z.infer<typeof TimerJob>;
/** The kinds of {@link TimerJob}. */
export type TimerKind = TimerJob['kind'];

/**
 * The job id of a timer, which makes adding it idempotent: `run-timer-<runId>-<at>` (then `-a<n>`), `run-deadline-<runId>`,
 * `task-deadline-<taskId>` (then `-m<n>`), `retry-task-<taskId>`, `cancel-run-<runId>` (then `-a<n>`).
 */
export function timerJobId(timer: TimerJob): string {
  switch (timer.kind) {
    case 'run-timer':
      return `run-timer-${timer.runId}-${timer.at}${timer.again ? `-a${timer.again}` : ''}`;
    case 'run-deadline':
      return `run-deadline-${timer.runId}`;
    case 'task-deadline':
      return `task-deadline-${timer.taskId}${timer.moved ? `-m${timer.moved}` : ''}`;
    case 'retry-task':
      return `retry-task-${timer.taskId}`;
    case 'cancel-run':
      return `cancel-run-${timer.runId}${timer.again ? `-a${timer.again}` : ''}`;
  }
}

/**
 * The key the coordinator sets (value `1`, {@link CANCEL_TTL_SECONDS}.task) when it gives up on a
 * task — past its deadline, or its run cancelled: `<prefix>:cancel:<taskId>`. The specialist
 * checks it before each effect.
 */
export function taskCancelKey(prefix: string, taskId: string): string {
  return `${prefix}:cancel:${taskId}`;
}

/**
 * An operator's cancellation of a whole run, `<prefix>:cancel:run:<runId>`: a
 * {@link RunCancellation} as JSON, written once (`SET NX`). Task ids start with `r`, so `run:`
 * never collides with {@link taskCancelKey}.
 */
export function runCancelKey(prefix: string, runId: string): string {
  return `${prefix}:cancel:run:${runId}`;
}

/** How long the cancel keys live: a task's 7 days, a run's a day longer than any run's checkpoint. */
export const CANCEL_TTL_SECONDS = { task: 7 * 24 * 3600, run: 8 * 24 * 3600 } as const;
