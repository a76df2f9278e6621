/**
 * The coordinator's timers: the run's deadline timer (its delegations' backstops and its own
 * deadline, one timer at a time), an operator's retry of one delegation and an operator's
 * cancellation, applied to a parked run. A timer changes a run only while it is
 * parked (an active run is its processor's), and writes its checkpoint compare-and-set: when the
 * run has moved on meanwhile — resumed elsewhere, or changed by another timer — it looks again
 * instead of writing over it.
 */
import {
  BosunError,
  Incident,
  RunCheckpoint,
  TaskCheckpoint,
  runCheckpointId,
  taskCheckpointId,
  taskIdFor,
  timerJobId,
  type Delegation,
  type TimerJob,
} from '@bosun/contract';
import {
  DEADLINE_GRACE_MS,
  backstopAt,
  cancelRequested,
  denyWaitingApproval,
  dispatch,
  incompletePart,
  type RunContext,
} from './run-parts.js';
import type { ParkedRun, RunDeps } from './run-ports.js';
import { cancelledReason } from './run-text.js';
import { taskDeadline } from './task.js';

/** How often, a second apart, a cancellation is looked at again while its run is not parked. */
export const CANCEL_LOOKS = 30;

/** How many times a timer looks again at a run that moved on while it worked on it. */
export const TIMER_PASSES = 5;

/** A timer that found its run changed under it {@link TIMER_PASSES} times in a row. */
export class TimerConflictError extends BosunError {
  constructor(timer: TimerJob) {
    super('timer_conflict', `timer ${timerJobId(timer)}: run ${timer.runId} changed under it ${TIMER_PASSES} times in a row`, {
      data: { runId: timer.runId, timer: timerJobId(timer) },
    });
    this.name = 'TimerConflictError';
  }
}

/** A parked run as a timer works on it: its checkpoint as read, and the revision to write it back at. */
interface TimerContext extends RunContext {
  ckptId: string;
  revision: string | null;
  parent: ParkedRun;
}

/** What a timer's pass did: `done` (something or nothing), or `conflict` (the run moved on before it could save). */
type Pass = 'done' | 'conflict';

/** Saves the run unless it changed since it was read; the next save goes from the new revision. */
async function saveRun(t: TimerContext): Promise<boolean> {
  const revision = await t.deps.checkpoints.saveIfRevision(t.ckptId, t.state, t.revision);
  if (revision === undefined) return false;
  t.revision = revision;
  return true;
}

/**
 * The processor of the coordinator's timers. A `run-timer` (or, from earlier versions, a task
 * deadline or the run's) that comes while the run is parked turns the delegations past their
 * backstop (all of them past the run's deadline) into INCOMPLETE `timeout` results and releases
 * the parked run, so it never waits forever on a specialist that will not answer; `retry-task`
 * hands a delegation to its specialist again; `cancel-run` ends a parked run at once (or looks
 * again while the run is not parked). Throws {@link TimerConflictError} when the run keeps
 * changing under it.
 */
export async function handleTimer(timer: TimerJob, deps: RunDeps): Promise<void> {
  for (let pass = 1; pass <= TIMER_PASSES; pass++) {
    if ((await timerPass(timer, deps)) === 'done') return;
    deps.log.info({ runId: timer.runId, timer: timerJobId(timer), pass }, 'the run changed while a timer worked on it: looking again');
  }
  throw new TimerConflictError(timer);
}

async function timerPass(timer: TimerJob, deps: RunDeps): Promise<Pass> {
  const ckptId = runCheckpointId(timer.runId);
  const read = await deps.checkpoints.loadRevision(ckptId);
  const parsed = RunCheckpoint.safeParse(read.value);
  if (!parsed.success) return notParked(timer, deps);
  const state = parsed.data;
  if (state.result) return 'done';
  const parent = state.phase === 'waiting' ? await deps.jobs.parked(state.jobId) : undefined;
  // Only a parked run may be changed from here; an active one is being handled by its processor.
  if (!parent) return notParked(timer, deps, state);
  const t: TimerContext = { deps, state, ckptId, revision: read.revision, parent };
  if (timer.kind === 'retry-task') return retryDelegation(t, timer.taskId);
  if (timer.kind === 'cancel-run') return cancelParked(t);
  if (timer.kind === 'run-timer') return runTimerDue(t);
  return deadlinePassed(t, timer);
}

/**
 * A timer for a run that is not parked does nothing — but a cancellation, and the run's timer
 * while the run is `waiting`: the run sees a cancellation at its next step (one not started yet,
 * as soon as it starts), and arms its timer again when it parks after a restart; in case it parks
 * first, having looked just before, the timer looks again a second later, {@link CANCEL_LOOKS}
 * times at most.
 */
async function notParked(timer: TimerJob, deps: RunDeps, state?: RunCheckpoint): Promise<Pass> {
  if (timer.kind === 'cancel-run') {
    const again = (timer.again ?? 0) + 1;
    if (again <= CANCEL_LOOKS) await deps.timers.add({ kind: 'cancel-run', runId: timer.runId, again }, 1_000);
  } else if (timer.kind === 'run-timer' && state?.phase === 'waiting') {
    const again = (timer.again ?? 0) + 1;
    if (again <= CANCEL_LOOKS) await deps.timers.add({ ...timer, again }, 1_000);
  }
  return 'done';
}

/**
 * The run's timer: the delegations past their backstop — all still out once the run's deadline
 * has passed — become INCOMPLETE `timeout` parts and their children are released (a child that
 * has completed keeps its result; a deadline moved by an approval wait is waited for), and the
 * timer for the next one still out is armed, saved with the checkpoint as `timerAt`.
 */
async function runTimerDue(t: TimerContext): Promise<Pass> {
  const { state, deps } = t;
  const now = deps.clock.now();
  const runOver = now >= Date.parse(state.deadlineAt);
  const release: Delegation[] = [];
  let changed = false;
  let next: number | undefined;
  const later = (due: number): void => {
    next = Math.min(next ?? due, due);
  };
  for (const d of state.delegations) {
    if (d.result) continue;
    const backstop = backstopAt(d) ?? Infinity;
    if (!runOver && now < backstop) {
      later(backstop);
      continue;
    }
    const child = await deps.jobs.childState(d.agent, d.taskId);
    if (child === 'completed') continue;
    const moved = runOver ? undefined : await movedByApproval(t, d);
    if (moved !== undefined) {
      later(moved);
      continue;
    }
    changed = true;
    const reason = runOver ? 'the run reached its deadline' : `did not report before its deadline (${d.deadlineAt ?? '?'})`;
    await incompletePart(t, d, { kind: 'timeout', reason });
    if (child !== 'none') release.push(d);
  }
  if (next !== undefined) {
    // Every time here is still to come: past the run's deadline nothing is left out.
    const at = Math.min(next, Date.parse(state.deadlineAt));
    await deps.timers.add({ kind: 'run-timer', runId: state.runId, at }, at - now);
    state.timerAt = at;
    changed = true;
  }
  if (!changed) return 'done';
  if (!(await saveRun(t))) return 'conflict';
  // Dropping the dependency lets the parked run go back to the queue once none remain.
  for (const d of release) await deps.jobs.release(d.agent, d.taskId);
  return 'done';
}

/** A task's deadline, or the run's: the delegations concerned still out become INCOMPLETE `timeout` parts, and their children are released. */
async function deadlinePassed(t: TimerContext, timer: Extract<TimerJob, { kind: 'task-deadline' | 'run-deadline' }>): Promise<Pass> {
  const { state, deps } = t;
  const due = state.delegations.filter((d) => !d.result && (timer.kind === 'run-deadline' || d.taskId === timer.taskId));
  const release: Delegation[] = [];
  let changed = false;
  for (const d of due) {
    const child = await deps.jobs.childState(d.agent, d.taskId);
    if (child === 'completed') continue;
    if (timer.kind === 'task-deadline' && (await rearmIfPaused(t, timer.moved ?? 0, d))) continue;
    changed = true;
    const reason =
      timer.kind === 'run-deadline' ? 'the run reached its deadline' : `did not report before its deadline (${d.deadlineAt ?? '?'})`;
    await incompletePart(t, d, { kind: 'timeout', reason });
    if (child !== 'none') release.push(d);
  }
  if (!changed) return 'done';
  if (!(await saveRun(t))) return 'conflict';
  // Dropping the dependency lets the parked run go back to the queue once none remain.
  for (const d of release) await deps.jobs.release(d.agent, d.taskId);
  return 'done';
}

/**
 * Time parked for an operator's approval does not count against a task's deadline (see
 * `taskDeadline`): the backstop of a task that has waited, moved by its wait, when it is still to
 * come (epoch ms); undefined when the task has not waited or its moved backstop has passed too.
 */
async function movedByApproval(t: TimerContext, d: Delegation): Promise<number | undefined> {
  const { checkpoints, clock, log } = t.deps;
  let ckpt;
  try {
    const id = taskCheckpointId(d.taskId);
    ckpt = TaskCheckpoint.parse(await checkpoints.load(id), id);
  } catch (err) {
    log.warn(
      { err, taskId: d.taskId },
      'could not read the task checkpoint to see whether an approval wait moved its deadline: the deadline stands',
    );
    return undefined;
  }
  if (!ckpt || (!ckpt.approvalWaitMs && ckpt.pending?.kind !== 'approval')) return undefined;
  const due = taskDeadline(d.deadlineAt, ckpt, clock.now()) + DEADLINE_GRACE_MS;
  if (clock.now() >= due) return undefined;
  log.info(
    { taskId: d.taskId, approvalWaitMs: ckpt.approvalWaitMs ?? 0, waitingNow: ckpt.pending?.kind === 'approval', dueAt: due },
    'task deadline moved by its approval wait',
  );
  return due;
}

/**
 * A task deadline timer of an earlier version, for a task that waited for an approval: the
 * backstop fires again at the moved deadline instead of ending the task now. Returns whether it
 * did so.
 */
async function rearmIfPaused(t: TimerContext, moved: number, d: Delegation): Promise<boolean> {
  const due = await movedByApproval(t, d);
  if (due === undefined) return false;
  // The timers of one task form a chain (task-deadline-<taskId>, then -m1, -m2, …), so a
  // handler that runs twice adds the same next one.
  const next: TimerJob = { kind: 'task-deadline', runId: t.state.runId, taskId: d.taskId, moved: moved + 1 };
  await t.deps.timers.add(next, due - t.deps.clock.now());
  return true;
}

/**
 * The timer of a cancellation, for a parked run: the delegations still out become INCOMPLETE
 * `cancelled` parts and their children are released, so the run wakes and ends at once (in its
 * loop). A child that has already completed keeps its result.
 */
async function cancelParked(t: TimerContext): Promise<Pass> {
  const { state, deps } = t;
  const cancelled = await cancelRequested(t);
  if (!cancelled) return 'done';
  const cut: Delegation[] = [];
  const release: Delegation[] = [];
  for (const d of state.delegations) {
    if (d.result) continue;
    const child = await deps.jobs.childState(d.agent, d.taskId);
    if (child === 'completed') continue;
    await incompletePart(t, d, { kind: 'cancelled', reason: cancelledReason(cancelled) });
    cut.push(d);
    if (child !== 'none') release.push(d);
  }
  // Saved (with the cancellation) before the run is released: it resumes from this checkpoint.
  if (!(await saveRun(t))) return 'conflict';
  for (const d of release) await deps.jobs.release(d.agent, d.taskId);
  // Last: a denial wakes a parked task, which may then end at once, and must find the run
  // already released (else its end would wake the run before this checkpoint is saved).
  for (const d of cut) await denyWaitingApproval(t, d, cancelled);
  return 'done';
}

/**
 * Hands one delegation of a parked run to its specialist again, as a new child of the run; the
 * new delegation supersedes the old one in the answer and the run result.
 */
async function retryDelegation(t: TimerContext, taskId: string): Promise<Pass> {
  const { state } = t;
  const old = state.delegations.find((d) => d.taskId === taskId);
  // Its child may have finished without being collected yet; only a completed part is not retried.
  if (!old || old.result?.status === 'completed' || state.delegations.some((d) => d.retryOf === taskId)) return 'done';
  const incident = Incident.safeParse(t.parent.data);
  if (!incident.success) return 'done';
  state.delegations.push({
    taskId: taskIdFor(state.runId, state.delegations.length, old.agent),
    agent: old.agent,
    round: state.round,
    task: old.task,
    retryOf: old.taskId,
  });
  // Saved before its child job exists, and again with its deadline.
  if (!(await saveRun(t))) return 'conflict';
  await dispatch(t, incident.data, t.parent.children);
  return (await saveRun(t)) ? 'done' : 'conflict';
}
