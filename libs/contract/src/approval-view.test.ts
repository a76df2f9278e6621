import { describe, expect, it } from 'vitest';
import { approvalView } from './approval-view.js';
import type { Approval } from './approvals.js';

// What every operator surface says about an approval's progress and decisions (issue 23 item 3).

const base: Approval = {
  id: 'ap-1',
  status: 'pending',
  runId: 'r1',
  incidentId: 'inc-1',
  agent: 'kubernetes',
  taskId: 't1',
  calls: [{ index: 0, tool: 'demo__rollback_deployment', args: {}, needsApproval: true }],
  reason: 'roll back',
  createdAt: '2026-01-01T00:00:00.000Z',
  timeoutAt: '2026-01-01T00:05:00.000Z',
};
const alice = { name: 'alice', verified: true, path: 'slack' as const };
const bob = { name: 'bob', verified: true, path: 'cli' as const };

describe('approvalView', () => {
  it('a pending approval of one person: 0 of 1, no decisions', () => {
    expect(approvalView(base)).toMatchObject({ progress: { approvals: 0, required: 1, text: '0 of 1' }, decisions: [] });
  });

  it('under a rule of two: each vote with its person, path and time; then the completing vote', () => {
    const rule = { required: 2, distinctFrom: 'requester' as const };
    const pending = approvalView({ ...base, rule, votes: [{ actor: alice, at: '2026-01-01T00:01:00.000Z' }] });
    expect(pending.progress.text).toBe('1 of 2');
    expect(pending.decisions).toEqual([
      { decision: 'approve', name: 'alice', verified: true, path: 'slack', at: '2026-01-01T00:01:00.000Z' },
    ]);
    const votes = [
      { actor: alice, at: '2026-01-01T00:01:00.000Z' },
      { actor: bob, at: '2026-01-01T00:02:00.000Z' },
    ];
    const approved = approvalView({
      ...base,
      rule,
      votes,
      status: 'approved',
      approved: [0],
      decidedBy: 'alice, bob',
      actor: bob,
      decidedAt: '2026-01-01T00:02:00.000Z',
    });
    expect(approved.progress.text).toBe('2 of 2');
    expect(approved.decisions.map((d) => [d.decision, d.name, d.path, d.at])).toEqual([
      ['approve', 'alice', 'slack', '2026-01-01T00:01:00.000Z'],
      ['approve', 'bob', 'cli', '2026-01-01T00:02:00.000Z'],
    ]);
  });

  it('a denial after a vote, a single approval, an older decision without an actor, and the timeout', () => {
    const denied = approvalView({
      ...base,
      rule: { required: 2, distinctFrom: 'none' },
      votes: [{ actor: alice, at: '2026-01-01T00:01:00.000Z' }],
      status: 'denied',
      decidedBy: 'bob',
      actor: bob,
      decidedAt: '2026-01-01T00:03:00.000Z',
      denyReason: 'not now',
    });
    expect(denied.decisions.map((d) => [d.decision, d.name, d.reason])).toEqual([
      ['approve', 'alice', undefined],
      ['deny', 'bob', 'not now'],
    ]);
    const single = approvalView({
      ...base,
      status: 'approved',
      approved: [0],
      decidedBy: 'bob',
      actor: bob,
      decidedAt: '2026-01-01T00:01:00.000Z',
    });
    expect(single.progress.text).toBe('1 of 1');
    expect(single.decisions).toEqual([{ decision: 'approve', name: 'bob', verified: true, path: 'cli', at: '2026-01-01T00:01:00.000Z' }]);
    const older = approvalView({ ...base, status: 'approved', approved: [0], decidedBy: 'demo', decidedAt: '2026-01-01T00:01:00.000Z' });
    expect(older.decisions).toEqual([{ decision: 'approve', name: 'demo', at: '2026-01-01T00:01:00.000Z' }]);
    const timeout = approvalView({
      ...base,
      status: 'denied',
      decidedBy: 'bosun (approval timeout)',
      decidedAt: '2026-01-01T00:05:00.000Z',
      denyReason: 'timeout',
    });
    expect(timeout.decisions).toEqual([
      { decision: 'timeout', name: 'bosun (approval timeout)', at: '2026-01-01T00:05:00.000Z', reason: 'timeout' },
    ]);
  });
});
