import { setTimeout as sleep } from 'node:timers/promises';
import { APPROVAL_TIMEOUT_REASON, ApprovalError, approvalDue, approvalResolvedEvent, type Approval, type Decision } from '@bosun/contract';
import type { Logger } from '@bosun/config';
import type { ApprovalStore } from './approvals.js';
import type { EventSink } from '../events/events.js';

/** The decision Bosun records for an approval nobody decided before its `timeoutAt`. */
export const TIMEOUT_DENIAL: Decision = { approve: false, reason: APPROVAL_TIMEOUT_REASON, by: 'bosun (approval timeout)' };

/** Options of {@link ApprovalWaiter}. */
export interface ApprovalWaiterOptions {
  approvals: Pick<ApprovalStore, 'get' | 'decide'>;
  /** Where `approval.resolved` is published when the waiter denies an approval. */
  events: Pick<EventSink, 'emit'>;
  log: Logger;
}

/** Options of {@link ApprovalWaiter.wait}. */
export interface ApprovalWaitOptions {
  /** Ends the wait (the approval stays pending). */
  signal: AbortSignal;
  /** How often the approval is read. */
  pollMs: number;
  /** Called at once, then at most every `progressMs` while the wait goes on. */
  onProgress?: () => void;
  /** Default 5 s. */
  progressMs?: number;
}

/**
 * Waiting for an operator's decision, for whoever waits: the specialist's task loop (which parks
 * its job and, woken, looks again) and the gateway's MCP face (which polls while a client waits).
 * One rule for both: an approval still undecided at its `timeoutAt` resolves as denied, reason
 * `timeout`, decided once (another process may decide first: its decision stands) and announced
 * with `approval.resolved` by whoever decided it.
 */
export class ApprovalWaiter {
  private readonly approvals: ApprovalWaiterOptions['approvals'];
  private readonly events: ApprovalWaiterOptions['events'];
  private readonly log: Logger;

  constructor(options: ApprovalWaiterOptions) {
    this.approvals = options.approvals;
    this.events = options.events;
    this.log = options.log;
  }

  /** Whether `a` is undecided and its time is up (at `timeoutAt`, not after): `approvalDue` of `@bosun/contract`. */
  static isDue(a: Approval, now = Date.now()): boolean {
    return approvalDue(a, now);
  }

  /**
   * Denies an undecided approval whose time is up, reason `timeout`, and publishes
   * `approval.resolved`. When another process decided it first, returns that decision.
   */
  async expire(a: Approval): Promise<Approval> {
    try {
      const decided = await this.approvals.decide(a.id, TIMEOUT_DENIAL);
      this.events.emit(approvalResolvedEvent(decided));
      this.log.info({ approvalId: a.id }, 'approval timed out: denied');
      return decided;
    } catch (err) {
      if (!(err instanceof ApprovalError && err.code === 'already_decided')) throw err;
      return (await this.approvals.get(a.id)) ?? a;
    }
  }

  /**
   * Polls until the approval is decided, or its time is up (then {@link expire}s it). Returns
   * undefined when the wait was ended by `signal`: the approval stays pending.
   *
   * @throws ApprovalError `not_found` when the approval disappears while waited for.
   */
  async wait(first: Approval, options: ApprovalWaitOptions): Promise<Approval | undefined> {
    const { signal, pollMs, onProgress } = options;
    const progressMs = options.progressMs ?? 5_000;
    const deadline = Date.parse(first.timeoutAt);
    let lastProgress = Date.now();
    onProgress?.();
    for (;;) {
      if (signal.aborted) return undefined;
      const left = deadline - Date.now();
      if (left <= 0) return this.expire(first);
      try {
        await sleep(Math.min(pollMs, left), undefined, { signal });
      } catch {
        // Only an abort ends the sleep early: the wait ends, and the approval stays pending.
        return undefined;
      }
      const current = await this.approvals.get(first.id);
      if (!current) throw new ApprovalError('not_found', `approval ${first.id} no longer exists`);
      if (current.status !== 'pending') return current;
      if (onProgress && Date.now() - lastProgress >= progressMs) {
        lastProgress = Date.now();
        onProgress();
      }
    }
  }
}
