import type { Logger } from '@bosun/config';
import { ApprovalWaiter, type Approval, type ApprovalStore } from '@bosun/transport';

/** Options of {@link ApprovalSweep}. */
export interface ApprovalSweepOptions {
  approvals: Pick<ApprovalStore, 'pending'>;
  /** Denies an expired approval (reason `timeout`) and announces it. */
  waiter: Pick<ApprovalWaiter, 'expire'>;
  /** Which pending approvals are this sweep's to expire. */
  owns: (a: Approval) => boolean;
  /** How often it sweeps. */
  everyMs: number;
  log: Logger;
}

/**
 * Denies (reason `timeout`) the face's approvals whose timeout passed with nobody waiting for
 * them, as a parked task does for a specialist's approval: at start, then every `everyMs`.
 * Sweeps never overlap; a failure is logged and the next sweep tries again.
 */
export class ApprovalSweep {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(private readonly options: ApprovalSweepOptions) {}

  /** Sweeps now, then every `everyMs` until {@link stop}. */
  start(): void {
    this.timer = setInterval(() => void this.sweep(), this.options.everyMs);
    this.timer.unref();
    void this.sweep();
  }

  /** Stops sweeping; resolves once a sweep under way has ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.running;
  }

  /** One sweep (none when one is under way or the sweep is stopped). Never rejects. */
  sweep(): Promise<void> {
    if (this.running || this.stopped) return this.running ?? Promise.resolve();
    this.running = this.expireDue().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async expireDue(): Promise<void> {
    const { approvals, waiter, owns, log } = this.options;
    try {
      const now = Date.now();
      for (const a of await approvals.pending()) {
        if (this.stopped) break;
        if (!owns(a) || !ApprovalWaiter.isDue(a, now)) continue;
        await waiter.expire(a).catch((err: unknown) => log.warn({ approvalId: a.id, err }, 'could not deny an expired MCP face approval'));
      }
    } catch (err) {
      log.warn({ err }, 'could not sweep expired MCP face approvals');
    }
  }
}
