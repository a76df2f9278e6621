import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { RunEvent } from '@bosun/contract';
import { waitUntil } from './wait.js';

/** Collects every run event under a prefix from core NATS, for assertions. */
export class EventCollector {
  readonly events: RunEvent[] = [];
  private readonly sub: Subscription;
  private waiters: { pred: (e: RunEvent) => boolean; resolve: (e: RunEvent) => void }[] = [];

  constructor(nc: NatsConnection, prefix: string) {
    this.sub = nc.subscribe(`${prefix}.runs.>`, {
      callback: (err, msg) => {
        if (err) return;
        const parsed = RunEvent.safeParse(msg.json());
        if (!parsed.success) throw new Error(`event on ${msg.subject} does not match the contract: ${parsed.error.message}`);
        const e = parsed.data;
        this.events.push(e);
        this.waiters = this.waiters.filter((w) => {
          if (w.pred(e)) {
            w.resolve(e);
            return false;
          }
          return true;
        });
      },
    });
  }

  forRun(runId: string): RunEvent[] {
    return this.events.filter((e) => e.runId === runId).sort((a, b) => a.seq - b.seq);
  }

  /**
   * A finished run's events, once all of them are here: its `run.completed` (or `run.failed`)
   * and every `seq` before it. Events of one run come from several processes and may arrive out
   * of `seq` order (docs/protocol.md); a retried publish may arrive twice. Sorted by `seq`,
   * one per `seq`.
   *
   * `unusedAfterMs`, for tests that cut a process's Redis link: a number still missing that long
   * after the run's end is taken as one never used (the numbering was sent again on reconnecting,
   * and its events took the second answer's numbers; docs/protocol.md), and is printed.
   */
  async complete(runId: string, timeoutMs = 15_000, options: { unusedAfterMs?: number } = {}): Promise<RunEvent[]> {
    const deadline = Date.now() + timeoutMs;
    const end = await this.waitFor(
      (e) => e.runId === runId && (e.type === 'run.completed' || e.type === 'run.failed'),
      timeoutMs,
      `end of run ${runId}`,
    );
    let bySeq = new Map<number, RunEvent>();
    let missing: number[] = [];
    const arrived = () => {
      bySeq = new Map(this.events.filter((e) => e.runId === runId).map((e) => [e.seq, e]));
      missing = Array.from({ length: end.seq }, (_, i) => i + 1).filter((s) => !bySeq.has(s));
      return missing.length === 0;
    };
    const { unusedAfterMs } = options;
    if (unusedAfterMs === undefined || unusedAfterMs >= deadline - Date.now()) {
      await waitUntil(arrived, deadline - Date.now(), () => `run ${runId}: events ${missing.join(', ')} of 1..${end.seq} arrived`, 50);
    } else {
      const all = await waitUntil(arrived, unusedAfterMs, 'every number used', 50).then(
        () => true,
        () => false,
      );
      if (!all) process.stdout.write(`[events] run ${runId}: numbers ${missing.join(', ')} of 1..${end.seq} never used\n`);
    }
    return [...bySeq.values()].sort((a, b) => a.seq - b.seq);
  }

  /** Resolves with the first event (seen or to come) matching `pred`; rejects after `timeoutMs`. */
  waitFor(pred: (e: RunEvent) => boolean, timeoutMs = 30_000, what = 'event'): Promise<RunEvent> {
    const seen = this.events.find(pred);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new Error(
              `no ${what} within ${timeoutMs} ms (saw ${this.events.length} events: ${this.events
                .slice(-10)
                .map((e) => e.type)
                .join(', ')})`,
            ),
          ),
        timeoutMs,
      );
      this.waiters.push({
        pred,
        resolve: (e) => {
          clearTimeout(timer);
          resolve(e);
        },
      });
    });
  }

  close(): void {
    this.sub.unsubscribe();
  }
}
