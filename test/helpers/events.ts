import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { RunEvent } from '@bosun/contract';

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

  /** Resolves with the first event (seen or to come) matching `pred`; rejects after `timeoutMs`. */
  waitFor(pred: (e: RunEvent) => boolean, timeoutMs = 30_000, what = 'event'): Promise<RunEvent> {
    const seen = this.events.find(pred);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no ${what} within ${timeoutMs} ms (saw ${this.events.length} events: ${this.events.slice(-10).map((e) => e.type).join(', ')})`)), timeoutMs);
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
