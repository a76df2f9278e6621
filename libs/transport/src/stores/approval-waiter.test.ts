import { describe, expect, it } from 'vitest';
import type { Approval, Decision } from '@bosun/contract';
import { createLogger } from '@bosun/config';

import { ApprovalWaiter, TIMEOUT_DENIAL } from './approval-waiter.js';
import { ApprovalError } from './approvals.js';
import { MemoryEventSink } from '../events/events.js';

/** Approvals in memory, decided once, as the store decides them. */
class MemoryApprovals {
  readonly items = new Map<string, Approval>();
  decisions = 0;

  get(id: string): Promise<Approval | null> {
    return Promise.resolve(this.items.get(id) ?? null);
  }

  decide(id: string, d: Decision): Promise<Approval> {
    const a = this.items.get(id);
    if (!a) return Promise.reject(new ApprovalError('not_found', `no approval ${id}`));
    if (a.status !== 'pending') return Promise.reject(new ApprovalError('already_decided', `approval ${id} was already decided`));
    this.decisions++;
    const decided: Approval = d.approve
      ? { ...a, status: 'approved', approved: d.only ?? [0], decidedBy: d.by, decidedAt: new Date().toISOString() }
      : { ...a, status: 'denied', denyReason: d.reason, decidedBy: d.by, decidedAt: new Date().toISOString() };
    this.items.set(id, decided);
    return Promise.resolve(decided);
  }
}

function approval(id: string, timeoutInMs: number): Approval {
  return {
    id,
    status: 'pending',
    runId: 'r1',
    incidentId: 'inc-1',
    agent: 'k8s',
    taskId: 'r1-d0-k8s',
    calls: [{ index: 0, tool: 'demo__restart', args: {}, needsApproval: true, key: 'r1-d0-k8s-s1-c0' }],
    reason: 'restart it',
    createdAt: new Date().toISOString(),
    timeoutAt: new Date(Date.now() + timeoutInMs).toISOString(),
  };
}

function setup() {
  const approvals = new MemoryApprovals();
  const events = new MemoryEventSink();
  const lines: string[] = [];
  const log = createLogger({ service: 't', level: 'info', destination: { write: (l: string) => void lines.push(l) } });
  return { approvals, events, lines, waiter: new ApprovalWaiter({ approvals, events, log }) };
}

describe('ApprovalWaiter', () => {
  it('is due once an undecided approval reaches its timeout, not before, and never once decided', () => {
    const a = approval('ap-1', 1_000);
    const t = Date.parse(a.timeoutAt);
    expect(ApprovalWaiter.isDue(a, t - 1)).toBe(false);
    expect(ApprovalWaiter.isDue(a, t)).toBe(true);
    expect(ApprovalWaiter.isDue({ ...a, status: 'approved' }, t + 1)).toBe(false);
  });

  it('expires an undecided approval: denied once with reason timeout, approval.resolved published, logged', async () => {
    const { approvals, events, lines, waiter } = setup();
    const a = approval('ap-2', -1);
    approvals.items.set(a.id, a);
    const decided = await waiter.expire(a);
    expect(decided).toMatchObject({ status: 'denied', denyReason: 'timeout', decidedBy: TIMEOUT_DENIAL.by });
    expect(events.events.map((e) => [e.type, e.data.approvalId, e.data.status, e.data.denyReason])).toEqual([
      ['approval.resolved', 'ap-2', 'denied', 'timeout'],
    ]);
    expect(lines.some((l) => l.includes('approval timed out: denied'))).toBe(true);
  });

  it('returns the decision another process made first, publishing nothing itself', async () => {
    const { approvals, events, waiter } = setup();
    const a = approval('ap-3', -1);
    approvals.items.set(a.id, { ...a, status: 'approved', approved: [0], decidedBy: 'alice' });
    expect(await waiter.expire(a)).toMatchObject({ status: 'approved', decidedBy: 'alice' });
    expect(events.events).toEqual([]);
  });

  it('lets any other failure through', async () => {
    const { waiter } = setup();
    await expect(waiter.expire(approval('ap-missing', -1))).rejects.toMatchObject({ code: 'not_found' });
  });

  it('waits until an operator decides, with a progress call at once', async () => {
    const { approvals, waiter } = setup();
    const a = approval('ap-4', 10_000);
    approvals.items.set(a.id, a);
    let progress = 0;
    const waiting = waiter.wait(a, { signal: new AbortController().signal, pollMs: 10, onProgress: () => progress++ });
    expect(progress).toBe(1);
    await approvals.decide(a.id, { approve: true, by: 'alice' });
    expect(await waiting).toMatchObject({ status: 'approved', decidedBy: 'alice' });
    expect(approvals.decisions).toBe(1);
  });

  it('denies at the timeout when nobody decides, sending progress at most every progressMs', async () => {
    const { approvals, events, waiter } = setup();
    const a = approval('ap-5', 300);
    approvals.items.set(a.id, a);
    let progress = 0;
    const decided = await waiter.wait(a, {
      signal: new AbortController().signal,
      pollMs: 20,
      progressMs: 100,
      onProgress: () => progress++,
    });
    expect(decided).toMatchObject({ status: 'denied', denyReason: 'timeout' });
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(a.timeoutAt));
    expect(progress).toBeGreaterThanOrEqual(2);
    expect(progress).toBeLessThanOrEqual(4);
    expect(events.events.map((e) => e.type)).toEqual(['approval.resolved']);
  });

  it('ends the wait when aborted, leaving the approval pending', async () => {
    const { approvals, events, waiter } = setup();
    const a = approval('ap-6', 10_000);
    approvals.items.set(a.id, a);
    const abort = new AbortController();
    const waiting = waiter.wait(a, { signal: abort.signal, pollMs: 1_000 });
    abort.abort();
    expect(await waiting).toBeUndefined();
    expect(approvals.items.get(a.id)?.status).toBe('pending');
    expect(events.events).toEqual([]);
  });

  it('fails with not_found when the approval disappears while waited for', async () => {
    const { approvals, waiter } = setup();
    const a = approval('ap-7', 10_000);
    const err = await waiter.wait(a, { signal: new AbortController().signal, pollMs: 5 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApprovalError);
    expect(err).toMatchObject({ code: 'not_found', message: 'approval ap-7 no longer exists' });
    expect(approvals.decisions).toBe(0);
  });
});
