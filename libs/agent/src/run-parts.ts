/**
 * The parts of a run: handing delegations to specialists as child jobs, reading their results,
 * and writing an INCOMPLETE part for a delegation that will not report.
 */
import {
  ApprovalError,
  STALL_MARKER,
  approvalResolvedEvent,
  TaskCheckpoint,
  TaskResult,
  describeIssues,
  stallText,
  taskCheckpointId,
  type Delegation,
  type InDoubtCall,
  type Incident,
  type RunCancellation,
  type RunCheckpoint,
  type TaskJob,
} from '@bosun/contract';
import { buildStallPayload, specialistConfig } from '@bosun/config';
import type { ChildrenRead, RunChildren, RunDeps } from './run-ports.js';
import { readOutputs } from './run-outputs.js';

/** Time a specialist has past its own deadline to report the timeout itself before the coordinator does. */
export const DEADLINE_GRACE_MS = 5_000;

/** BullMQ's reason for a job lost more often than `maxStalledCount` (it offers no code to test instead). */
const LOST_TOO_OFTEN = /stalled more than allowable limit/;

/** One run as its loop and its timers work on it. */
export interface RunContext {
  deps: RunDeps;
  state: RunCheckpoint;
  /** Aborted when the run's job is lost (BullMQ's processor signal): the model call in flight ends. */
  signal?: AbortSignal | undefined;
  /** The delegations whose output, stored in their task checkpoint, has been read into their result (`run-outputs.ts`). */
  outputsRead?: Set<string>;
}

/** Why a delegation became an INCOMPLETE part (see {@link incompletePart}). */
export interface IncompleteCause {
  kind: 'stall' | 'failure' | 'timeout' | 'cancelled';
  reason: string;
}

/**
 * The children's results by task id. `early` is a read made before the run was found done (beside
 * its checkpoint): it may miss a child that ended just then, so when a delegation still without a
 * result is in neither list, the children are read again.
 */
export async function childResults(
  delegations: readonly { taskId: string; result?: unknown }[],
  early: Promise<ChildrenRead> | undefined,
  read: () => Promise<ChildrenRead>,
): Promise<ChildrenRead> {
  const first = await (early ?? read());
  const incomplete = delegations.some((d) => !d.result && !first.values.has(d.taskId) && !first.failures.has(d.taskId));
  return early && incomplete ? read() : first;
}

/**
 * Reads the children's results (and failures) into the delegations. A delegation with neither
 * becomes an INCOMPLETE part — unless `missing` is `skip` (the run ends for another reason, which
 * the caller gives it).
 */
export async function collect(
  ctx: RunContext,
  read: { early?: Promise<ChildrenRead> | undefined; read: () => Promise<ChildrenRead> },
  missing: 'fail' | 'skip',
): Promise<void> {
  const { values, failures } = await childResults(ctx.state.delegations, read.early, read.read);
  for (const d of ctx.state.delegations) {
    if (d.result) continue;
    const value = values.get(d.taskId);
    const parsed = TaskResult.safeParse(value);
    if (parsed.success) {
      d.result = parsed.data;
      continue;
    }
    const failed = failures.get(d.taskId);
    if (missing === 'skip' && failed === undefined && value === undefined) continue;
    const reason =
      failed ??
      (value === undefined ? 'no result from the specialist task' : `malformed result: ${describeIssues(parsed.error).issues.join('; ')}`);
    await incompletePart(ctx, d, { kind: failed !== undefined && LOST_TOO_OFTEN.test(failed) ? 'stall' : 'failure', reason });
  }
  // The results that refer to their task checkpoint for the output: read it now.
  await readOutputs(ctx);
}

/** A delegation to a specialist the config does not know: a `failed` part at once, with its dead letter. */
async function unknownSpecialist(ctx: RunContext, d: Delegation): Promise<void> {
  const { config, deadLetters, events } = ctx.deps;
  const { state } = ctx;
  const reason = `unknown specialist "${d.agent}" (known: ${Object.keys(config.specialists).join(', ')})`;
  d.result = {
    v: 1,
    taskId: d.taskId,
    agent: d.agent,
    status: 'failed',
    output: stallText(d.agent, '', reason),
    attempts: 0,
    error: reason,
  };
  await deadLetters.add(
    { kind: 'failure', runId: state.runId, incidentId: state.incidentId, agent: d.agent, taskId: d.taskId, reason, attempts: 0 },
    `failure-${d.taskId}`,
  );
  events.emit({
    type: 'agent.failed',
    runId: state.runId,
    incidentId: state.incidentId,
    agent: d.agent,
    data: { taskId: d.taskId, reason },
  });
}

/**
 * An operator's cancellation of the run (`bosun cancel`, `POST /runs/<runId>/cancel`): read from
 * the run's cancel key until seen, then kept in the run's state.
 */
export async function cancelRequested(ctx: RunContext): Promise<RunCancellation | undefined> {
  ctx.state.cancelled ??= (await ctx.deps.cancels.run(ctx.state.runId)) ?? undefined;
  return ctx.state.cancelled;
}

/** Adds a child job for every delegation of the current round that has none yet, and arms the run's timer. Idempotent. */
export async function dispatch(ctx: RunContext, incident: Incident, children: RunChildren): Promise<void> {
  const { config, clock } = ctx.deps;
  const { state } = ctx;
  const tasks: { d: Delegation; task: TaskJob; attempts: number }[] = [];
  for (const d of state.delegations) {
    if (d.result || d.round !== state.round) continue;
    const spec = specialistConfig(config, d.agent);
    if (!spec) {
      await unknownSpecialist(ctx, d);
      continue;
    }
    d.deadlineAt ??= new Date(clock.now() + spec.deadlineMs).toISOString();
    tasks.push({ d, task: taskJobOf(state, incident, d), attempts: spec.retries + 1 });
  }
  if (tasks.length === 0) return;
  // The backstop (if no specialist reports the timeout itself, the coordinator does) and the
  // child jobs, side by side: both are idempotent by job id, and the run parks only after both.
  await Promise.all([armTimer(ctx), addChildren(ctx, incident, children, tasks)]);
}

/** The task job of a delegation: what its specialist is asked, and by when. */
export function taskJobOf(state: RunCheckpoint, incident: Incident, d: Delegation): TaskJob {
  return {
    v: 1,
    runId: state.runId,
    incidentId: incident.id,
    taskId: d.taskId,
    agent: d.agent,
    task: d.task,
    incident,
    ...(d.deadlineAt ? { deadlineAt: d.deadlineAt } : {}),
  };
}

/** The child jobs of {@link dispatch}, one after the other, each announced once added. */
async function addChildren(
  ctx: RunContext,
  incident: Incident,
  children: RunChildren,
  tasks: readonly { d: Delegation; task: TaskJob; attempts: number }[],
): Promise<void> {
  for (const { d, task, attempts } of tasks) {
    await children.add(task, { attempts });
    ctx.deps.events.emit({
      type: 'agent.delegated',
      runId: ctx.state.runId,
      incidentId: incident.id,
      agent: d.agent,
      data: { taskId: d.taskId, task: d.task, round: d.round, ...(d.retryOf ? { retryOf: d.retryOf } : {}) },
    });
  }
}

/** When a delegation's backstop is due: {@link DEADLINE_GRACE_MS} after its deadline (epoch ms). */
export function backstopAt(d: Delegation): number | undefined {
  return d.deadlineAt === undefined ? undefined : Date.parse(d.deadlineAt) + DEADLINE_GRACE_MS;
}

/**
 * When the run's timer is next due (epoch ms): the earliest backstop of its delegations still out,
 * or the run's deadline if that comes first; undefined when none is out.
 */
export function nextTimerAt(state: RunCheckpoint): number | undefined {
  let at: number | undefined;
  for (const d of state.delegations) {
    const due = d.result ? undefined : backstopAt(d);
    if (due !== undefined) at = Math.min(at ?? due, due);
  }
  return at === undefined ? undefined : Math.min(at, Date.parse(state.deadlineAt));
}

/**
 * Arms the run's one deadline timer (a `run-timer`, see `handleTimer`) for its next due time,
 * unless one still pending fires no later (it arms the next one itself). The time is kept in the
 * state as `timerAt`, saved with the checkpoint; the run's end removes that timer. Returns whether
 * it added one.
 */
export async function armTimer(ctx: RunContext): Promise<boolean> {
  const { state, deps } = ctx;
  const at = nextTimerAt(state);
  if (at === undefined) return false;
  const now = deps.clock.now();
  if (state.timerAt !== undefined && state.timerAt <= at && state.timerAt > now) return false;
  await deps.timers.add({ kind: 'run-timer', runId: state.runId, at }, Math.max(0, at - now));
  state.timerAt = at;
  return true;
}

/**
 * What a task's checkpoint says about a task that will not report: the agent's last words
 * (empty when there are none) and its calls in doubt.
 */
async function leftBehind(ctx: RunContext, taskId: string): Promise<{ lastWords: string; inDoubt: InDoubtCall[] }> {
  try {
    const id = taskCheckpointId(taskId);
    const ckpt = TaskCheckpoint.parse(await ctx.deps.checkpoints.load(id), id);
    const inDoubt = ckpt?.inDoubt ?? [];
    for (const m of [...(ckpt?.messages ?? [])].reverse()) if (m.role === 'model' && m.text) return { lastWords: m.text, inDoubt };
    return { lastWords: '', inDoubt };
  } catch (err) {
    // The part is written all the same, without last words; its calls in doubt keep their own
    // records and dead letters (written by the specialist and the gateway when they came back).
    ctx.deps.log.warn({ err, taskId }, 'could not read the task checkpoint of an INCOMPLETE part: written without its last words');
    return { lastWords: '', inDoubt: [] };
  }
}

/** How many attempts a task's job made; 0, said in the log, when it cannot be read. */
async function attemptsOf(ctx: RunContext, d: Delegation): Promise<number> {
  try {
    return await ctx.deps.jobs.childAttempts(d.agent, d.taskId);
  } catch (err) {
    ctx.deps.log.warn({ err, taskId: d.taskId }, 'could not read the task job: its INCOMPLETE part says attempts 0');
    return 0;
  }
}

/**
 * A delegation without a result becomes an INCOMPLETE part, never a hole: `stall` (lost more
 * often than the stalled-job limit), `failure` (failed after its retries), `timeout` (past its
 * deadline or the run's) or `cancelled` (an operator cancelled the run). After a timeout or a
 * cancellation the specialist, which may still be at work, is told to stop before its next
 * effect. The dead letter is written before the event that announces it; a cancelled part has
 * none (the operator who cancelled it has nothing left to act on; the run result names it).
 */
export async function incompletePart(ctx: RunContext, d: Delegation, cause: IncompleteCause): Promise<void> {
  const { config, cancels, deadLetters } = ctx.deps;
  const { state } = ctx;
  const { kind, reason } = cause;
  const spec = specialistConfig(config, d.agent);
  const [{ lastWords, inDoubt }, attempts] = await Promise.all([leftBehind(ctx, d.taskId), attemptsOf(ctx, d)]);
  const output = spec ? buildStallPayload(spec, d.agent, lastWords, reason) : stallText(d.agent, lastWords, reason);
  d.result = {
    v: 1,
    taskId: d.taskId,
    agent: d.agent,
    status: kind === 'failure' ? 'failed' : 'stalled',
    output,
    attempts,
    error: reason,
    lastWords,
    ...(inDoubt.length > 0 ? { inDoubt } : {}),
  };
  if (kind === 'timeout' || kind === 'cancelled') await cancels.stopTask(d.taskId);
  if (kind !== 'cancelled') {
    await deadLetters.add(
      {
        kind,
        runId: state.runId,
        incidentId: state.incidentId,
        agent: d.agent,
        taskId: d.taskId,
        reason: kind === 'timeout' ? `${d.agent} ${reason}` : reason,
        lastWords,
        attempts,
      },
      `${kind}-${d.taskId}`,
    );
  }
  announcePart(ctx, d, cause);
}

/**
 * The event of an INCOMPLETE part: `agent.failed` for a failure, else `agent.stalled`. Made by
 * {@link incompletePart}, and for a part its own specialist ended as `cancelled` (which the
 * specialist does not announce).
 */
export function announcePart(ctx: RunContext, d: Delegation, { kind, reason }: IncompleteCause): void {
  const { state } = ctx;
  ctx.deps.events.emit({
    type: kind === 'failure' ? 'agent.failed' : 'agent.stalled',
    runId: state.runId,
    incidentId: state.incidentId,
    agent: d.agent,
    data: { taskId: d.taskId, kind, reason, marker: STALL_MARKER },
  });
}

/**
 * A task of a cancelled run that waits for an operator's approval is denied, so that nobody
 * approves work that will not be done, and the parked task wakes to stop. Best effort: a task
 * woken later stops too, before its next effect.
 */
export async function denyWaitingApproval(ctx: RunContext, d: Delegation, cancelled: RunCancellation | undefined): Promise<void> {
  const { approvals, checkpoints, events, log } = ctx.deps;
  if (!approvals || !cancelled) return;
  let approvalId: string | undefined;
  try {
    const id = taskCheckpointId(d.taskId);
    const ckpt = TaskCheckpoint.parse(await checkpoints.load(id), id);
    if (ckpt?.pending?.kind === 'approval') approvalId = ckpt.pending.approvalId;
  } catch (err) {
    log.warn({ err, taskId: d.taskId }, 'cancelled run: could not read the task checkpoint to find an approval it waits for');
    return;
  }
  if (!approvalId) return;
  try {
    const decided = await approvals.decide(approvalId, {
      approve: false,
      reason: `the run was cancelled: ${cancelled.reason}`,
      by: cancelled.by,
    });
    events.emit(approvalResolvedEvent(decided));
  } catch (err) {
    if (err instanceof ApprovalError && (err.code === 'already_decided' || err.code === 'not_found')) return;
    log.warn(
      { err, approvalId, taskId: d.taskId },
      'cancelled run: could not deny the approval its task waits for; the task stops when it wakes',
    );
  }
}

/** Delegate mode: the round's results, as the tool responses to the model's last turn. */
export function appendDelegationResults(state: RunCheckpoint): void {
  const last = state.messages[state.messages.length - 1];
  if (last?.role !== 'model') return;
  const responses = (last.calls ?? []).map((call) => {
    const d = state.delegations.find((x) => x.callId === call.id && x.round === state.round);
    const r = d?.result;
    return {
      id: call.id,
      name: call.name,
      isError: !r || r.status === 'failed',
      output: r ? (r.status === 'completed' ? r.output : { status: r.status, report: r.output }) : 'no result',
    };
  });
  state.messages.push({ role: 'tool', responses });
}
