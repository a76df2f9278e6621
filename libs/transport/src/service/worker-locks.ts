import { ErrorCode, type Worker } from 'bullmq';
import type { Logger } from '@bosun/config';
import { metrics } from '../base/metrics.js';

/** How a worker learnt that it lost a job's lock (the `kind` label of `bosun_worker_lock_errors_total`). */
export type LockErrorKind = 'renewal' | 'fenced' | 'finish';

/** Options of {@link watchWorkerLocks}. */
export interface WorkerLocksOptions {
  /** The queue's name, for the log and the metric's label. */
  queue: string;
  log: Pick<Logger, 'warn'>;
  /** Every other error of the worker (logged by the caller as before). */
  onError: (err: Error) => void;
  /** How long without a lock error ends a burst. Default 10 s. */
  burstMs?: number;
}

/** What {@link watchWorkerLocks} gives the processor. */
export interface WorkerLocks {
  /** The processor found it lost `jobId`'s lock (a fenced write refused): counted and logged with the burst. */
  lost(jobId: string, kind?: LockErrorKind): void;
  /** Ends the burst under way (its summary is logged) and stops the timer. */
  close(): void;
}

/** Whether `err` is BullMQ's refusal of a job command made under a lock the worker no longer holds. */
export function isLockError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === ErrorCode.JobLockNotExist || code === ErrorCode.JobLockMismatch;
}

/**
 * Watches a BullMQ worker's locks. When a lock renewal fails, the job's processor is told at
 * once (BullMQ aborts the `signal` it was given: the job passes to its next owner, and the
 * processor must stop before its next effect). Lock errors — renewals that failed, fenced writes
 * refused, jobs BullMQ could not finish under a lost lock — are counted in
 * `bosun_worker_lock_errors_total` and logged once per burst (the first, then a summary when the
 * burst ends), not with a stack per job: under load a burst can hold thousands. Every other
 * worker error goes to `onError`.
 */
export function watchWorkerLocks(worker: Worker, options: WorkerLocksOptions): WorkerLocks {
  const { queue, log } = options;
  const burstMs = options.burstMs ?? 10_000;
  let burst: { started: number; count: number; byKind: Record<string, number>; timer: NodeJS.Timeout } | undefined;
  // BullMQ emits one 'error' per job of a failed renewal right after 'lockRenewalFailed': those are counted there.
  let renewalErrors = 0;

  const end = () => {
    if (!burst) return;
    clearTimeout(burst.timer);
    log.warn(
      { queue, count: burst.count, byKind: burst.byKind, seconds: Math.round((Date.now() - burst.started) / 1000) },
      'lock errors: the burst is over',
    );
    burst = undefined;
  };
  const note = (kind: LockErrorKind, jobIds: string[]) => {
    metrics.lockErrors.inc({ queue, kind }, jobIds.length);
    if (!burst) {
      log.warn(
        { queue, kind, jobs: jobIds.slice(0, 5), count: jobIds.length },
        'lost the lock of a job: it passes to its next owner (logged once per burst; counted in bosun_worker_lock_errors_total)',
      );
      burst = { started: Date.now(), count: 0, byKind: {}, timer: setTimeout(end, burstMs) };
    }
    burst.count += jobIds.length;
    burst.byKind[kind] = (burst.byKind[kind] ?? 0) + jobIds.length;
    burst.timer.refresh();
  };

  worker.on('lockRenewalFailed', (jobIds: string[]) => {
    renewalErrors += jobIds.length;
    note('renewal', jobIds);
    // The processor's signal: it stops before its next effect (its fenced writes would be refused anyway).
    for (const id of jobIds) worker.cancelJob(id, 'lock lost');
  });
  worker.on('error', (err: Error) => {
    if (renewalErrors > 0) {
      renewalErrors--;
      return;
    }
    if (isLockError(err)) return note('finish', ['?']);
    options.onError(err);
  });
  return { lost: (jobId, kind = 'fenced') => note(kind, [jobId]), close: end };
}
