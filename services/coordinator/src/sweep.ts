/**
 * The sweep of finished runs: completed incident jobs (each holding its run's result) older than
 * `retention.runResults` are removed, a batch at a time. Their publishers add them with
 * `removeOnComplete: false` (so that `bosun result` can read a run's answer and a second publish
 * of the same id runs nothing), which leaves their lifetime to the coordinator.
 */
import { Queue } from 'bullmq';
import { INCIDENTS_QUEUE } from '@bosun/contract';
import type { Logger } from '@bosun/config';
import type { RedisClient } from '@bosun/transport';

/** Options of {@link RunResultSweeper}. */
export interface RunResultSweeperOptions {
  redis: RedisClient;
  prefix: string;
  /** Completed incident jobs older than this (since they finished) are removed. */
  keepMs: number;
  log: Logger;
  /** Time between sweeps; default 60 s. */
  intervalMs?: number;
  /** Jobs removed per batch; a sweep runs batches until one comes back short (default 1,000, at most 20 batches a sweep). */
  batch?: number;
}

/** Removes completed incident jobs past their retention, every `intervalMs`. Several coordinators may sweep at once: BullMQ's `clean` is atomic per batch. */
export class RunResultSweeper {
  private readonly queue: Queue;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;

  constructor(private readonly options: RunResultSweeperOptions) {
    this.queue = new Queue(INCIDENTS_QUEUE, { connection: options.redis, prefix: options.prefix });
  }

  /** Starts sweeping (the first sweep at once). */
  start(): void {
    const tick = () => {
      this.running = this.sweep()
        .catch((err: unknown) => {
          // A failed sweep is retried at the next tick; nothing is lost by waiting.
          this.options.log.warn({ err }, 'sweeping finished runs failed');
          return 0;
        })
        .finally(() => (this.running = undefined));
    };
    tick();
    this.timer = setInterval(tick, this.options.intervalMs ?? 60_000);
    this.timer.unref();
  }

  /** One sweep: how many jobs it removed. */
  async sweep(): Promise<number> {
    const batch = this.options.batch ?? 1_000;
    let removed = 0;
    for (let i = 0; i < 20; i++) {
      const ids = await this.queue.clean(this.options.keepMs, batch, 'completed');
      removed += ids.length;
      if (ids.length < batch) break;
    }
    if (removed > 0) this.options.log.info({ removed, keepMs: this.options.keepMs }, 'removed finished runs past their retention');
    return removed;
  }

  /** Stops sweeping, waits for a sweep under way, and closes the queue. */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.running;
    await this.queue.close();
  }
}
