/**
 * The coordinator's run loop: one incident, from its job to its run result. Route mode asks a
 * classifier which specialists to delegate to; delegate mode lets a chat model delegate in
 * rounds and answer. Waiting for specialists holds no worker: the run is checkpointed and its job
 * parked until its children finish, then resumed from the checkpoint — in any coordinator.
 */
import {
  BadCheckpointError,
  INCIDENT_JOB,
  Incident,
  LockLostError,
  RunCheckpoint,
  describeIssues,
  isStalled,
  runCheckpointId,
  runIdFor,
  timerJobId,
  type RunCancellation,
  type RunResult,
  errorMessage,
} from '@bosun/contract';
import { ModelError } from '@bosun/models';
import {
  appendDelegationResults,
  cancelRequested,
  collect,
  denyWaitingApproval,
  armTimer,
  dispatch,
  incompletePart,
  announcePart,
  type RunContext,
  type IncompleteCause,
} from './run-parts.js';
import type { ChildrenRead, IncidentJob, RunDeps } from './run-ports.js';
import { readOutputs, storedRun } from './run-outputs.js';
import { giveBackLocal, handLocalToQueues, reserveLocal, runLocalRound, type LocalRound } from './run-local.js';
import { route, think } from './run-turns.js';
import { transferRound } from './run-transfer.js';
import { cancelledAnswer, cancelledReason, mergeReports, outcomes, runInDoubt, runUsage, withInDoubt } from './run-text.js';
import { runbookField } from './runbook.js';

/**
 * What became of an incident job: its run's result; `parked` until its children finish (the
 * job is picked up again then); `rejected` — bad input, or a checkpoint that cannot be used —
 * with a dead letter written, and the job must fail for good with `reason`; or `lost`: this
 * process no longer holds the job (its lock expired), so it answers nothing for the run and
 * leaves the job to its next owner, which resumes it from the checkpoint.
 */
export type RunOutcome =
  { kind: 'result'; result: RunResult } | { kind: 'parked' } | { kind: 'rejected'; reason: string } | { kind: 'lost'; reason: string };

/** A run being processed. */
interface LoopContext extends RunContext {
  job: IncidentJob;
  incident: Incident;
  ckptId: string;
  /** The children read beside the checkpoint (a run back from waiting), until used. */
  early?: Promise<ChildrenRead> | undefined;
  /** The run's start recorded as job progress, under way while it routes; awaited before the first checkpoint is written. */
  startup?: Promise<unknown> | undefined;
  /** The cancel key was read beside the step's last write: the top of the loop need not read it again. */
  looked?: boolean;
}

const result = (r: RunResult): RunOutcome => ({ kind: 'result', result: r });

function iso(deps: RunDeps, ms = deps.clock.now()): string {
  return new Date(ms).toISOString();
}

/** Writes a poison dead letter for a rejected incident job. */
async function poison(job: IncidentJob, deps: RunDeps, reason: string): Promise<void> {
  // The same derived id as a rejected envelope: `bosun publish` finds it to replace the job.
  await deps.deadLetters.add(
    { kind: 'poison', reason, input: job.data, ...(typeof job.id === 'string' ? { incidentId: job.id } : {}) },
    `poison-${job.id ?? 'unknown'}-${job.timestamp}`,
  );
}

/** The incident of a job, or why the job is rejected (its poison dead letter written). */
async function acceptIncident(job: IncidentJob, deps: RunDeps): Promise<{ incident: Incident } | RunOutcome> {
  if (job.name !== INCIDENT_JOB) {
    await poison(job, deps, `unexpected job name "${job.name}" on the incidents queue (expected "${INCIDENT_JOB}")`);
    return { kind: 'rejected', reason: `unexpected job name "${job.name}"` };
  }
  const parsed = Incident.safeParse(job.data);
  if (!parsed.success) {
    const reason = `invalid incident: ${describeIssues(parsed.error).issues.join('; ')}`;
    deps.log.warn({ jobId: job.id, reason }, 'incident rejected');
    await poison(job, deps, reason);
    return { kind: 'rejected', reason };
  }
  const incident = parsed.data;
  if (job.id !== incident.id) {
    // The run id, `bosun result` and duplicate detection all go by the job id: an incident
    // under another job id would run under a name nobody looks for, or collide with its twin.
    const reason = `job id "${job.id ?? ''}" does not match the incident's id "${incident.id}": publish an incident with its id as the job id`;
    deps.log.warn({ jobId: job.id, incidentId: incident.id }, 'incident rejected: job id and incident id differ');
    await poison(job, deps, reason);
    return { kind: 'rejected', reason };
  }
  return { incident };
}

/** The checkpoint of a run that starts now. */
function freshState(deps: RunDeps, incident: Incident, runId: string): RunCheckpoint {
  const { mode, runDeadlineMs } = deps.config.coordinator;
  return {
    v: 1,
    runId,
    incidentId: incident.id,
    startedAt: iso(deps),
    deadlineAt: iso(deps, deps.clock.now() + runDeadlineMs),
    jobId: incident.id,
    mode,
    phase: mode === 'route' ? 'routing' : 'thinking',
    round: 0,
    delegations: [],
    messages: [],
  };
}

/**
 * The run's checkpoint, or a fresh one (`fresh`) when it has none. A checkpoint that cannot be
 * used fails the run: a `failure` dead letter, `run.failed`, and the job is rejected.
 */
async function openRun(job: IncidentJob, deps: RunDeps, incident: Incident): Promise<{ ctx: LoopContext; fresh: boolean } | RunOutcome> {
  const runId = runIdFor(incident.id, job.timestamp);
  const ckptId = runCheckpointId(runId);
  const ctx: LoopContext = { deps, job, incident, ckptId, state: freshState(deps, incident, runId), signal: job.signal };
  // Picked up for the first time (BullMQ counts every start): there is no checkpoint to read.
  if (job.attemptsStarted <= 1) return { ctx, fresh: true };
  try {
    // A job picked up again is usually a run back from waiting-children: its children's results
    // are read beside its checkpoint (and read again if they turn out to predate a child's end).
    if (job.parkable) {
      ctx.early = job.children.read();
      // Awaited where it is used (collect); a read the run turns out not to need may fail unseen.
      ctx.early.catch(() => undefined);
    }
    const raw = await deps.checkpoints.load(ckptId);
    if (raw === null) return { ctx, fresh: true };
    const parsed = RunCheckpoint.safeParse(raw);
    if (!parsed.success) throw new BadCheckpointError(ckptId, describeIssues(parsed.error).issues.join('; '));
    ctx.state = parsed.data;
    return { ctx, fresh: false };
  } catch (err) {
    const reason = errorMessage(err);
    await deps.deadLetters.add({ kind: 'failure', runId, incidentId: incident.id, reason, input: job.data }, `failure-${runId}-checkpoint`);
    deps.events.emit({ type: 'run.failed', runId, incidentId: incident.id, data: { reason } });
    return { kind: 'rejected', reason };
  }
}

/**
 * A run's first pass: its progress (awaited before the first checkpoint, which is written before
 * the first effect: a run that dies before it starts afresh) and `run.started`. Its deadline needs
 * no timer while it is active (its loop looks at it); the run's timer is armed when it parks.
 */
function startRun(ctx: LoopContext): void {
  const { job, incident, state, deps } = ctx;
  ctx.startup = job.progress({ runId: state.runId, phase: 'started' });
  // Awaited before the first checkpoint (and logged if the run fails first).
  ctx.startup.catch(() => undefined);
  deps.events.emit({
    type: 'run.started',
    runId: state.runId,
    incidentId: incident.id,
    data: {
      incident: {
        id: incident.id,
        reason: incident.reason,
        severity: incident.severity,
        source: incident.source,
        summary: incident.summary,
      },
      mode: state.mode,
      ...runbookField(incident),
    },
  });
}

async function started(ctx: LoopContext): Promise<void> {
  const s = ctx.startup;
  ctx.startup = undefined;
  await s;
}

/** Writes the run's checkpoint, fenced by the job's lock: a coordinator that lost the job writes nothing. */
async function save(ctx: LoopContext): Promise<void> {
  if (ctx.job.lost?.()) throw new LockLostError(`run ${ctx.state.runId}`);
  // The outputs read from task checkpoints are not written again here (stored once).
  await ctx.deps.checkpoints.save(ctx.ckptId, storedRun(ctx.state), { fence: ctx.job.fence });
}

/** The outcome of a run this process no longer holds: nothing more is written or announced for it. */
function lost(ctx: LoopContext, err: unknown): RunOutcome {
  const reason = errorMessage(err);
  ctx.deps.log.warn({ runId: ctx.state.runId, jobId: ctx.job.id }, 'lost the lock of the run: leaving it to its next owner');
  return { kind: 'lost', reason };
}

/**
 * Runs one incident job: checks it, opens its run (a fresh one, or from its checkpoint), and takes
 * the run's steps until it parks or ends. Always ends a run with a result — completed, partial,
 * failed or cancelled — except for a retryable model error, thrown while the job has attempts
 * left so that it is tried again.
 */
export async function runIncident(job: IncidentJob, deps: RunDeps): Promise<RunOutcome> {
  const accepted = await acceptIncident(job, deps);
  if ('kind' in accepted) return accepted;
  const opened = await openRun(job, deps, accepted.incident);
  if ('kind' in opened) return opened;
  const { ctx, fresh } = opened;
  if (ctx.state.result) return result(ctx.state.result as RunResult);
  if (fresh) startRun(ctx);
  try {
    // Parts collected before this pickup refer to their task checkpoints for their outputs.
    if (!fresh) await readOutputs(ctx);
    return await runSteps(ctx);
  } catch (err) {
    // A lost lock is not a failure of the run: its next owner goes on with it.
    if (err instanceof LockLostError || job.lost?.()) return lost(ctx, err);
    try {
      return result(await failRun(ctx, err));
    } catch (again) {
      if (again instanceof LockLostError) return lost(ctx, again);
      throw again;
    }
  }
}

/** The loop over the run's phases, until it parks or ends. */
async function runSteps(ctx: LoopContext): Promise<RunOutcome> {
  const { state, job, deps } = ctx;
  for (;;) {
    if (job.lost?.()) throw new LockLostError(`run ${state.runId}`);
    if (state.phase !== 'done') {
      const cancelled = ctx.looked ? state.cancelled : await cancelRequested(ctx);
      ctx.looked = false;
      if (cancelled) {
        await started(ctx);
        return result(await endCancelled(ctx, cancelled));
      }
      // The run's deadline: end now with what we have; whatever is still out is INCOMPLETE.
      if (deps.clock.now() >= Date.parse(state.deadlineAt)) return result(await endAtDeadline(ctx));
    }
    if (state.phase === 'waiting') {
      // Back from waiting with every child reported (the read beside the checkpoint says so):
      // collect now, with no timer to re-arm and no park that could only fail.
      if (!(await allReported(ctx))) {
        // Local tasks of a process that died under the run go to their queues now.
        const handed = await handLocalToQueues(ctx, ctx.incident, job.children);
        // Back to waiting after a restart: its timer may have fired meanwhile, finding it not parked.
        if ((await armTimer(ctx)) || handed) await save(ctx);
        // Park until every child has finished; the job is picked up again then.
        if (await job.park()) return { kind: 'parked' };
      }
      await collectWaiting(ctx);
    }
    if (state.phase === 'routing') await stepRouting(ctx);
    else if (state.phase === 'thinking') {
      const answer = await stepThinking(ctx);
      if (answer) return result(answer);
    } else if (state.phase === 'done') return result(await finish(ctx, mergeReports(ctx.incident, state)));
  }
}

/**
 * Whether the children read beside the checkpoint (a run picked up again) holds a result or a
 * failure for every delegation still out. A read that fails, or none, says no: the run parks as
 * before, and its collect reads the children again.
 */
async function allReported(ctx: LoopContext): Promise<boolean> {
  if (!ctx.early) return false;
  let read: ChildrenRead;
  try {
    read = await ctx.early;
  } catch (err) {
    // The early read is only a shortcut: park as without it (collect reads the children again).
    ctx.deps.log.warn({ err, runId: ctx.state.runId }, 'could not read the children beside the checkpoint: parking as without the read');
    ctx.early = undefined;
    return false;
  }
  return ctx.state.delegations.every((d) => d.result || read.values.has(d.taskId) || read.failures.has(d.taskId));
}

/** Back from waiting: the children's results into the delegations; delegate mode gives them to the model. */
async function collectWaiting(ctx: LoopContext): Promise<void> {
  const { state, job } = ctx;
  await collect(ctx, { early: ctx.early, read: () => job.children.read() }, 'fail');
  ctx.early = undefined;
  if (state.mode === 'route' && transferRound(ctx)) {
    // One more round for the parts handed over by CodeAct scripts: dispatched next.
    state.phase = 'routing';
    await save(ctx);
    return;
  }
  state.phase = state.mode === 'route' ? 'done' : 'thinking';
  if (state.mode === 'delegate') {
    appendDelegationResults(state);
    await save(ctx);
  }
  // Route mode answers next, and that saves; nothing happens in between.
}

/**
 * Saves the run before its round starts, with the cancel key read beside the write (one round
 * trip), both before any child job or local task; `write` false reads the key alone (nothing new
 * to write). A round reserved for this process (`bosun serve`: it hosts the round's specialists)
 * is marked in that same write, so a run resumed elsewhere knows its tasks started here; when it
 * does not run (a cancellation, or the write failed), its places are given back.
 */
async function saveBeforeRound(ctx: LoopContext, write: boolean, local: LocalRound | undefined): Promise<RunCancellation | undefined> {
  try {
    const [, cancelled] = await Promise.all([write || local ? save(ctx) : undefined, cancelRequested(ctx)]);
    if (cancelled && local) giveBackLocal(ctx, local);
    return cancelled;
  } catch (err) {
    if (local) giveBackLocal(ctx, local);
    throw err;
  }
}

/** Route mode: route (once), then the child jobs; the run waits for them, or is done when none is out. */
async function stepRouting(ctx: LoopContext): Promise<void> {
  const { state } = ctx;
  const fresh = !state.routed;
  if (fresh) {
    await route(ctx, ctx.incident);
    await started(ctx);
  }
  // The round runs in this process when it hosts its specialists, else on their queues.
  const local = reserveLocal(ctx, ctx.incident);
  // A cancellation that came during routing ends the run at the top of the loop, before any child job.
  if (await saveBeforeRound(ctx, fresh, local)) return;
  if (local) return runLocalRound(ctx, ctx.incident, local, () => save(ctx));
  await dispatch(ctx, ctx.incident, ctx.job.children);
  state.phase = state.delegations.some((d) => !d.result) ? 'waiting' : 'done';
  await saveAndLook(ctx);
}

/** Saves the run and, beside it (one round trip), reads its cancel key for the top of the loop. */
async function saveAndLook(ctx: LoopContext): Promise<void> {
  await Promise.all([save(ctx), ctx.state.phase === 'done' ? undefined : cancelRequested(ctx)]);
  ctx.looked = true;
}

/** Delegate mode: one model turn; its answer ends the run, its delegations become child jobs. */
async function stepThinking(ctx: LoopContext): Promise<RunResult | undefined> {
  const { state } = ctx;
  const answer = await think(ctx, ctx.incident);
  await started(ctx);
  if (answer !== undefined) {
    await save(ctx);
    return finish(ctx, answer);
  }
  // The turn's delegations: in this process when it hosts their specialists, else on their queues.
  const local = reserveLocal(ctx, ctx.incident);
  if (await saveBeforeRound(ctx, true, local)) return undefined;
  if (local) {
    await runLocalRound(ctx, ctx.incident, local, () => save(ctx));
    return undefined;
  }
  await dispatch(ctx, ctx.incident, ctx.job.children);
  state.phase = state.delegations.some((d) => !d.result) ? 'waiting' : 'thinking';
  if (state.phase === 'thinking') appendDelegationResults(state);
  await saveAndLook(ctx);
  return undefined;
}

/** The run's deadline has passed: whatever is still out becomes an INCOMPLETE `timeout` part, and the run ends `partial`. */
async function endAtDeadline(ctx: LoopContext): Promise<RunResult> {
  const { state, job } = ctx;
  if (state.phase === 'waiting') await collect(ctx, { read: () => job.children.read() }, 'skip');
  const cause: IncompleteCause = { kind: 'timeout', reason: 'the run reached its deadline' };
  for (const d of state.delegations) if (!d.result) await incompletePart(ctx, d, cause);
  state.phase = 'done';
  await save(ctx);
  const answer = `${mergeReports(ctx.incident, state)}\n\nThe run reached its deadline (${state.deadlineAt}) before it was complete.`;
  return finish(ctx, answer, { deadlineReached: true });
}

/**
 * Ends a cancelled run that this process holds: the delegations still out become INCOMPLETE
 * `cancelled` parts (their specialists stop before their next effect, their children no longer
 * hold the run), and the answer says who cancelled it, why, and what was not finished.
 */
async function endCancelled(ctx: LoopContext, cancelled: RunCancellation): Promise<RunResult> {
  const { state, job, deps } = ctx;
  const out = state.delegations.filter((d) => !d.result);
  if (state.phase === 'waiting') await collect(ctx, { early: ctx.early, read: () => job.children.read() }, 'skip');
  ctx.early = undefined;
  const cause: IncompleteCause = { kind: 'cancelled', reason: cancelledReason(cancelled) };
  // A specialist that saw the cancellation first reports its part `cancelled` and announces
  // nothing (the coordinator does, for the parts it cuts): announced here, as a cut part is.
  for (const d of out) if (d.result?.reason === 'cancelled') announcePart(ctx, d, cause);
  const cut = state.delegations.filter((d) => !d.result);
  for (const d of cut) {
    await incompletePart(ctx, d, cause);
    // A child still out would keep the incident job from completing.
    await deps.jobs.release(d.agent, d.taskId);
  }
  for (const d of cut) await denyWaitingApproval(ctx, d, cancelled);
  state.phase = 'done';
  return finish(ctx, cancelledAnswer(ctx.incident, state, cancelled));
}

/** A run result's status: see {@link finish}. */
function statusOf(state: RunCheckpoint, degraded: number, partial: boolean): RunResult['status'] {
  if (state.cancelled) return 'cancelled';
  // Route mode with nobody to ask has checked nothing; a delegating model may answer alone.
  if (state.delegations.length === 0 && state.mode === 'route') return 'failed';
  return degraded > 0 || partial ? 'partial' : 'completed';
}

/**
 * Ends the run with `reply` as its answer: the result (saved with the checkpoint, which closes
 * the run), the run's timers removed, and `run.completed` (or `run.failed`).
 */
async function finish(ctx: LoopContext, reply: string, options: { deadlineReached?: boolean } = {}): Promise<RunResult> {
  const { state, deps, incident } = ctx;
  const specialists = outcomes(state);
  const degraded = specialists.filter((s) => s.status !== 'completed' || isStalled(s.output)).length;
  const inDoubt = runInDoubt(state);
  // Said by the coordinator in either mode: a model's answer may not mention it.
  const answer = withInDoubt(reply, inDoubt);
  const usage = runUsage(state);
  const r: RunResult = {
    v: 1,
    runId: state.runId,
    incidentId: incident.id,
    // An effect whose outcome is unknown makes the run partial, however its parts ended.
    status: statusOf(state, degraded, Boolean(options.deadlineReached || inDoubt)),
    answer,
    specialists,
    stalled: degraded,
    ...(inDoubt ? { inDoubt } : {}),
    startedAt: state.startedAt,
    finishedAt: iso(deps),
    ...(state.cancelled ? { cancelled: state.cancelled } : {}),
    ...(usage ? { usage } : {}),
    ...runbookField(incident),
  };
  state.result = r;
  state.phase = 'done';
  // The run is over: its pending timer has nothing left to do (a timer that still fires finds
  // the result and does nothing). Removed while the result is saved.
  const timer = state.timerAt === undefined ? undefined : ({ kind: 'run-timer', runId: state.runId, at: state.timerAt } as const);
  await Promise.all([
    save(ctx),
    timer &&
      deps.timers
        .remove(timer)
        .catch((err: unknown) =>
          deps.log.warn({ err, timer: timerJobId(timer) }, 'could not remove the run timer; it will find the run finished'),
        ),
  ]);
  deps.events.emit({
    type: r.status === 'failed' ? 'run.failed' : 'run.completed',
    runId: state.runId,
    incidentId: incident.id,
    data: {
      status: r.status,
      stalled: r.stalled,
      specialists: specialists.map((s) => ({ name: s.name, status: s.status })),
      answer,
      ...(inDoubt ? { inDoubt } : {}),
      ...(r.cancelled ? { cancelled: r.cancelled } : {}),
      ...(usage ? { usage } : {}),
    },
  });
  return r;
}

/**
 * A run that failed on an error: it ends `failed` with what it has (a `failure` dead letter and
 * `run.failed`) — unless a passing provider error may pass on another attempt, which is thrown
 * for the job to be retried while it has attempts left.
 */
async function failRun(ctx: LoopContext, err: unknown): Promise<RunResult> {
  const { state, deps, job, incident } = ctx;
  const { runId } = state;
  await started(ctx).catch((e: unknown) => deps.log.warn({ err: e, runId }, 'could not record the run start as job progress'));
  if (err instanceof ModelError && err.retryable && job.attemptsMade + 1 < job.maxAttempts) throw err;
  const reason = errorMessage(err);
  deps.log.error({ err, runId }, 'run failed');
  const inDoubt = runInDoubt(state);
  const specialists = outcomes(state);
  const r: RunResult = {
    v: 1,
    runId,
    incidentId: incident.id,
    status: 'failed',
    answer: withInDoubt(`The run failed before it could answer: ${reason}`, inDoubt),
    specialists,
    stalled: specialists.filter((s) => s.status !== 'completed').length,
    ...(inDoubt ? { inDoubt } : {}),
    startedAt: state.startedAt,
    finishedAt: iso(deps),
    ...(runUsage(state) ? { usage: runUsage(state) } : {}),
    ...runbookField(incident),
  };
  state.result = r;
  state.phase = 'done';
  await save(ctx);
  await deps.deadLetters.add({ kind: 'failure', runId, incidentId: incident.id, reason, input: job.data }, `failure-${runId}`);
  deps.events.emit({ type: 'run.failed', runId, incidentId: incident.id, data: { reason, ...(inDoubt ? { inDoubt } : {}) } });
  return r;
}
