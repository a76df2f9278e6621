import type { TaskRun } from './task-run.js';

/** Why a script was stopped from outside: its task was cancelled, the process is draining, the task's deadline passed, or the caller's signal. */
export type ScriptStopReason = 'cancelled' | 'yield' | 'deadline' | 'signal';

/** How often a running script's task is checked for cancellation, draining and its deadline. */
const CHECK_EVERY_MS = 500;

/**
 * The stop of one script run: an `AbortSignal` for the sandbox, aborted when the caller's signal
 * is (BullMQ's, for a job cancelled in its worker), when the process starts draining, when the
 * task's deadline passes, or when the coordinator or an operator cancels the task. A script
 * computes or waits for tools for seconds; the task loop checks these only between steps.
 */
export class ScriptStop {
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout;
  private checking = false;
  why: ScriptStopReason | undefined;

  constructor(
    private readonly run: TaskRun,
    private readonly outer: AbortSignal | undefined,
  ) {
    this.timer = setInterval(() => void this.check(), CHECK_EVERY_MS);
    // The script's own work keeps the process alive while it runs; this check need not.
    this.timer.unref();
    outer?.addEventListener('abort', this.onOuter, { once: true });
    if (outer?.aborted) this.stop('signal');
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  dispose(): void {
    clearInterval(this.timer);
    this.outer?.removeEventListener('abort', this.onOuter);
  }

  private readonly onOuter = () => this.stop('signal');

  private stop(why: ScriptStopReason): void {
    if (this.why) return;
    this.why = why;
    this.controller.abort(why);
  }

  private async check(): Promise<void> {
    const { run } = this;
    if (this.why || this.checking) return;
    if (run.deps.shouldYield?.()) return this.stop('yield');
    if (Date.now() >= run.deadline()) return this.stop('deadline');
    const { isCancelled } = run.deps;
    if (!isCancelled) return;
    this.checking = true;
    try {
      if (await isCancelled(run.job.taskId, run.job.runId)) this.stop('cancelled');
    } catch (err) {
      // Not known now; asked again at the next check, and before the script's next effect.
      run.deps.log.warn({ err, taskId: run.job.taskId }, 'could not check whether the task was cancelled');
    } finally {
      this.checking = false;
    }
  }
}
