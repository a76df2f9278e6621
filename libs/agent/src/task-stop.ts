import type { TaskAgentDeps } from './task-types.js';

/** What a task's stop reads of its run (a `TaskRun`). */
export interface StoppableRun {
  readonly job: { readonly taskId: string; readonly runId: string };
  readonly deps: Pick<TaskAgentDeps, 'shouldYield' | 'isCancelled' | 'log'>;
  /** The time, on the loop's clock. */
  now(): number;
  /** When the task must be done. */
  deadline(): number;
}

/**
 * Why a task was stopped from outside: it was cancelled (by the coordinator, or its run by an
 * operator), the process is draining, its deadline passed, or the attempt's own signal aborted
 * (BullMQ's: the job's lock was lost, or the job was cancelled in its worker).
 */
export type TaskStopReason = 'cancelled' | 'yield' | 'deadline' | 'signal';

/** How often the task is checked for cancellation and its deadline while it waits on something long. */
const CHECK_EVERY_MS = 500;

/**
 * The one stop signal of a task attempt: `signal` goes to the model call, the tool calls and the
 * CodeAct sandbox, and aborts when the attempt's signal does (BullMQ's processor signal), when
 * the process starts draining (`deps.drain`), or — checked every 500 ms while the task waits on a
 * model call or a script ({@link TaskStop.watch}) — when the task is cancelled or its deadline
 * passes. It aborts once: every reason ends the attempt (a result, or a hand-over).
 */
export class TaskStop {
  private readonly controller = new AbortController();
  /** Aborted only by a hand-over (the attempt's signal, the drain), never by a cancel or the deadline. */
  readonly handOver: AbortSignal;
  private checking = false;
  why: TaskStopReason | undefined;

  constructor(
    private readonly run: StoppableRun,
    private readonly outer: { signal?: AbortSignal | undefined; drain?: AbortSignal | undefined },
  ) {
    this.handOver = AbortSignal.any([outer.signal, outer.drain].filter((s): s is AbortSignal => s !== undefined));
    outer.signal?.addEventListener('abort', this.onSignal, { once: true });
    outer.drain?.addEventListener('abort', this.onDrain, { once: true });
    if (outer.signal?.aborted) this.stop('signal');
    else if (outer.drain?.aborted) this.stop('yield');
  }

  /** Aborted when the task must stop, for any {@link TaskStopReason}. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /**
   * Runs `fn` (a model call, a script) with the task's cancellation and deadline checked every
   * 500 ms meanwhile, so that a cancel or a deadline stops it within a second.
   */
  async watch<T>(fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const timer = setInterval(() => void this.check(), CHECK_EVERY_MS);
    // The work itself keeps the process alive while it runs; this check need not.
    timer.unref();
    try {
      return await fn(this.signal);
    } finally {
      clearInterval(timer);
    }
  }

  /** Lets go of the outer signals (the attempt is over). */
  dispose(): void {
    this.outer.signal?.removeEventListener('abort', this.onSignal);
    this.outer.drain?.removeEventListener('abort', this.onDrain);
  }

  private readonly onSignal = () => this.stop('signal');
  private readonly onDrain = () => this.stop('yield');

  private stop(why: TaskStopReason): void {
    if (this.why) return;
    this.why = why;
    this.controller.abort(why);
  }

  private async check(): Promise<void> {
    const { run } = this;
    if (this.why || this.checking) return;
    if (run.deps.shouldYield?.()) return this.stop('yield');
    if (run.now() >= run.deadline()) return this.stop('deadline');
    const { isCancelled } = run.deps;
    if (!isCancelled) return;
    this.checking = true;
    try {
      if (await isCancelled(run.job.taskId, run.job.runId)) this.stop('cancelled');
    } catch (err) {
      // Not known now; asked again at the next check, and before the task's next effect.
      run.deps.log.warn({ err, taskId: run.job.taskId }, 'could not check whether the task was cancelled');
    } finally {
      this.checking = false;
    }
  }
}
