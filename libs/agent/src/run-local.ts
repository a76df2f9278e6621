/**
 * Local tasks: when the process that runs an incident also hosts the specialists its round goes
 * to (`bosun serve`), the round's tasks run here, in the run's pass, with no child job: no job
 * to add, take, finish and read back, and no park. What makes them durable is the run's
 * checkpoint, written before they start with each delegation marked `local`, and the task's own
 * checkpoint and the gateway's records, as for a task in a job. A run resumed elsewhere (its
 * process died under it) finds a `local` delegation without a result and hands it to its
 * specialist's queue as a child job marked `resumed`, which goes on from the task's checkpoint:
 * the calls it had made are answered from their records, a mutating one in flight is in doubt.
 * Anything a local task cannot do in the run's pass (wait for an approval or a rate limit, a
 * drain, an error it may be retried for) hands it to the queue the same way.
 */
import { LockLostError, errorMessage, outputByReference, type Delegation, type Incident, type TaskJob } from '@bosun/contract';
import { specialistConfig } from '@bosun/config';
import { announcePart, armTimer, backstopAt, cancelRequested, incompletePart, taskJobOf, type RunContext } from './run-parts.js';
import { cancelledReason } from './run-text.js';
import type { ChildrenRead, IncidentJob, LocalOutcome, LocalSpecialist, RunChildren } from './run-ports.js';

/** A task that reached its backstop in the run's pass without reporting: its part times out, as a child's would. */
const BACKSTOP = { kind: 'backstop' } as const;

/** One delegation of the round, its task, and the place its local specialist gave it. */
interface LocalTask {
  d: Delegation;
  task: TaskJob;
  attempts: number;
  specialist: LocalSpecialist;
  place: { release(): void };
}

/** A round reserved to run in this process: its tasks, each with its place, and the phase the run was in. */
export interface LocalRound {
  tasks: LocalTask[];
  from: RunContext['state']['phase'];
}

/**
 * Reserves this round for this process when every one of its delegations goes to a specialist it
 * hosts with a place free, and the run holds its job's lock; else returns undefined, and the
 * round goes to the queues (`dispatch`). A reserved round is marked in the run's state (each
 * delegation `local`, the run `waiting`): the caller saves the checkpoint with the marks, then
 * runs it ({@link runLocalRound}) or, when it does not, gives it back ({@link giveBackLocal}).
 */
export function reserveLocal(ctx: RunContext & { job: IncidentJob }, incident: Incident): LocalRound | undefined {
  const tasks = placesFor(ctx, incident);
  if (!tasks) return undefined;
  const round = { tasks, from: ctx.state.phase };
  for (const { d } of tasks) d.local = true;
  ctx.state.phase = 'waiting';
  return round;
}

/** A reserved round that will not run here (the run was cancelled, or its checkpoint not written): places and marks given back. */
export function giveBackLocal(ctx: RunContext, round: LocalRound): void {
  for (const t of round.tasks) {
    t.place.release();
    delete t.d.local;
  }
  ctx.state.phase = round.from;
}

/**
 * Runs a reserved round in this process; the checkpoint with its marks has been written, so a run
 * resumed elsewhere knows these tasks were started here. `save` writes the run's checkpoint
 * (fenced by the job's lock). Returns with the run `waiting`: its results read as its children's
 * would be (`ctx.early`, which the run collects at once), or, when a task went to its queue, in
 * the checkpoint with the child job the run then parks for.
 */
export async function runLocalRound(
  ctx: RunContext & { job: IncidentJob; early?: Promise<ChildrenRead> | undefined },
  incident: Incident,
  round: LocalRound,
  save: () => Promise<void>,
): Promise<void> {
  const { tasks } = round;
  const { state, deps, job } = ctx;
  const lock = { jobId: String(job.id), fence: job.fence!, signal: job.signal };
  for (const { d } of tasks) {
    deps.events.emit({
      type: 'agent.delegated',
      runId: state.runId,
      incidentId: incident.id,
      agent: d.agent,
      data: { taskId: d.taskId, task: d.task, round: d.round, local: true, ...(d.retryOf ? { retryOf: d.retryOf } : {}) },
    });
  }
  const outcomes = await Promise.all(tasks.map((t) => runOne(ctx, t, lock)));
  // The results, read as a child's would be when the run collects (so that a part its specialist
  // ended as cancelled is announced as one that came back from a job is): the output already in
  // memory, the checkpoint referring to the task's.
  const read: ChildrenRead = { values: new Map(), failures: new Map() };
  let queued = false;
  for (const [i, outcome] of outcomes.entries()) {
    const { d, task, attempts } = tasks[i]!;
    delete d.local;
    if (outcome.kind === 'result') {
      read.values.set(d.taskId, { ...outputByReference(outcome.result), output: outcome.result.output });
      (ctx.outputsRead ??= new Set()).add(d.taskId);
    } else if (outcome.kind === 'queue') {
      deps.log.info({ runId: state.runId, taskId: d.taskId, reason: outcome.reason }, 'local task handed to its queue');
      await job.children.add({ ...task, resumed: true }, { attempts });
      queued = true;
    } else {
      await incompletePart(ctx, d, { kind: 'timeout', reason: 'passed its deadline without reporting (it ran in the run’s process)' });
    }
  }
  if (queued) {
    // As for any child job: the backstop timer, and the checkpoint with what came back, before the park.
    for (const d of state.delegations) {
      const value = read.values.get(d.taskId);
      if (value) d.result = value as NonNullable<Delegation['result']>;
    }
    await announceCancelled(ctx, tasks, read);
    await armTimer(ctx);
    await save();
    ctx.early = undefined;
  } else ctx.early = Promise.resolve(read);
}

/**
 * A part its local task ended as `cancelled` (it saw the run's cancellation) while another task
 * of the round went to its queue: the run parks with that result already in, where the run's end
 * would not see it come back, so it is announced now, as the run's end announces one that came
 * back from a job.
 */
async function announceCancelled(ctx: RunContext, tasks: readonly LocalTask[], read: ChildrenRead): Promise<void> {
  const ended = tasks.filter(({ d }) => (read.values.get(d.taskId) as { reason?: string } | undefined)?.reason === 'cancelled');
  if (ended.length === 0) return;
  const cancelled = await cancelRequested(ctx);
  if (!cancelled) return;
  for (const { d } of ended) announcePart(ctx, d, { kind: 'cancelled', reason: cancelledReason(cancelled) });
}

/** The round's tasks with a local place each, or undefined (every place given back) when one cannot have one. */
function placesFor(ctx: RunContext & { job: IncidentJob }, incident: Incident): LocalTask[] | undefined {
  const { deps, state, job } = ctx;
  if (!deps.local || !job.fence || job.id === undefined) return undefined;
  const tasks: LocalTask[] = [];
  const giveBack = () => {
    for (const t of tasks) t.place.release();
    return undefined;
  };
  for (const d of state.delegations) {
    if (d.result || d.round !== state.round) continue;
    const spec = specialistConfig(deps.config, d.agent);
    const specialist = spec && deps.local.get(d.agent);
    const place = specialist?.reserve();
    if (!spec || !specialist || !place) return giveBack();
    d.deadlineAt ??= new Date(deps.clock.now() + spec.deadlineMs).toISOString();
    tasks.push({ d, task: taskJobOf(state, incident, d), attempts: spec.retries + 1, specialist, place });
  }
  return tasks.length > 0 ? tasks : undefined;
}

/**
 * One local task, until it ends or reaches its backstop (its deadline and the grace a specialist
 * has to report it): then the run goes on without it, and the part's timeout tells the task to
 * stop before its next effect. Its place is given back when it ends, whichever came first.
 */
function runOne(ctx: RunContext, t: LocalTask, lock: Parameters<LocalSpecialist['run']>[1]): Promise<LocalOutcome | typeof BACKSTOP> {
  const ran = t.specialist.run(t.task, lock).finally(() => t.place.release());
  const due = backstopAt(t.d);
  if (due === undefined) return ran;
  let timer: NodeJS.Timeout | undefined;
  const backstop = new Promise<typeof BACKSTOP>((resolve) => {
    timer = setTimeout(() => resolve(BACKSTOP), Math.max(0, due - ctx.deps.clock.now()));
  });
  // A task left behind at its backstop that fails later has nobody to tell but the log.
  ran.catch((err: unknown) => {
    if (!(err instanceof LockLostError)) ctx.deps.log.warn({ err, taskId: t.d.taskId }, `local task failed: ${errorMessage(err)}`);
  });
  return Promise.race([ran, backstop]).finally(() => clearTimeout(timer));
}

/**
 * A run picked up again whose delegations were local tasks of a process that is gone: each one
 * still without a result becomes a child job on its specialist's queue, marked `resumed` (its
 * checkpoint holds how far it got). Returns whether any did (the run's checkpoint then needs
 * saving, after its timer is armed).
 */
export async function handLocalToQueues(ctx: RunContext, incident: Incident, children: RunChildren): Promise<boolean> {
  const { state, deps } = ctx;
  const orphans = state.delegations.filter((d) => d.local && !d.result);
  for (const d of orphans) {
    const spec = specialistConfig(deps.config, d.agent);
    await children.add({ ...taskJobOf(state, incident, d), resumed: true }, { attempts: (spec?.retries ?? 0) + 1 });
    delete d.local;
    deps.log.info({ runId: state.runId, taskId: d.taskId }, 'a local task whose run was picked up again: handed to its queue');
  }
  return orphans.length > 0;
}
