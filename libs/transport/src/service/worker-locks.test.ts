import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { ErrorCode, type Worker } from 'bullmq';
import { metrics } from '../base/metrics.js';
import { isLockError, watchWorkerLocks } from './worker-locks.js';

// Lock errors of a worker: its processors told at once when a renewal fails, every loss counted
// in bosun_worker_lock_errors_total, and one log line per burst — not a stack per job.

/** The parts of a BullMQ worker the watch uses: its events and cancelJob. */
class FakeWorker extends EventEmitter {
  readonly cancelled: string[] = [];
  cancelJob(id: string): boolean {
    this.cancelled.push(id);
    return true;
  }
  asWorker(): Worker {
    return this as unknown as Worker;
  }
}

const counted = async (queue: string, kind: string) =>
  (await metrics.lockErrors.get()).values.find((v) => v.labels.queue === queue && v.labels.kind === kind)?.value ?? 0;

/** What BullMQ emits when a job's renewal fails: the ids, then one plain error per job. */
function renewalFails(w: FakeWorker, ids: string[]): void {
  w.emit('lockRenewalFailed', ids);
  for (const id of ids) w.emit('error', new Error(`could not renew lock for job ${id}`));
}

describe('watchWorkerLocks', () => {
  it('aborts the processors of jobs whose renewal failed, counts every loss and logs a burst once, then its summary', async () => {
    const w = new FakeWorker();
    const warnings: { fields: Record<string, unknown>; msg: string }[] = [];
    const others: Error[] = [];
    const locks = watchWorkerLocks(w.asWorker(), {
      queue: 'q-burst',
      log: { warn: (fields: Record<string, unknown>, msg: string) => warnings.push({ fields, msg }) } as never,
      onError: (err) => others.push(err),
      burstMs: 60,
    });
    renewalFails(w, ['a', 'b', 'c']);
    renewalFails(w, ['d']);
    const finish = Object.assign(new Error('Missing lock for job e. moveToFinished'), { code: ErrorCode.JobLockNotExist });
    w.emit('error', finish);
    locks.lost('f');
    w.emit('error', new Error('Connection is closed.'));
    expect(w.cancelled).toEqual(['a', 'b', 'c', 'd']);
    expect(others.map((e) => e.message)).toEqual(['Connection is closed.']);
    expect(await counted('q-burst', 'renewal')).toBe(4);
    expect(await counted('q-burst', 'finish')).toBe(1);
    expect(await counted('q-burst', 'fenced')).toBe(1);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.fields).toMatchObject({ queue: 'q-burst', kind: 'renewal', jobs: ['a', 'b', 'c'] });
    await new Promise((r) => setTimeout(r, 150));
    expect(warnings).toHaveLength(2);
    expect(warnings[1]!.fields).toMatchObject({ queue: 'q-burst', count: 6, byKind: { renewal: 4, finish: 1, fenced: 1 } });
    // A new burst is logged again.
    renewalFails(w, ['g']);
    expect(warnings).toHaveLength(3);
    locks.close();
    expect(warnings).toHaveLength(4);
  });

  it("tells BullMQ's lock refusals from other errors by their code", () => {
    expect(isLockError(Object.assign(new Error('x'), { code: ErrorCode.JobLockMismatch }))).toBe(true);
    expect(isLockError(Object.assign(new Error('x'), { code: ErrorCode.JobNotExist }))).toBe(false);
    expect(isLockError(new Error('Lock mismatch for job 1'))).toBe(false);
  });
});
