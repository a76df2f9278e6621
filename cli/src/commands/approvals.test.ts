import { describe, expect, it } from 'vitest';
import type { Approval } from '@bosun/contract';
import { decisionLine, formatApprovals, votesLine } from './approvals.js';

// What `bosun approvals` shows a person deciding (issue 23, items 3 and 4): the incident, and how
// far a rule of several people has got.

const now = Date.parse('2026-01-01T00:10:00.000Z');
const approval: Approval = {
  id: 'ap-1',
  status: 'pending',
  runId: 'r1',
  incidentId: 'inc-1',
  agent: 'kubernetes',
  taskId: 't1',
  calls: [{ index: 0, tool: 'demo__rollback_deployment', args: { toVersion: 'v41' }, needsApproval: true }],
  reason: 'roll back the bad deploy',
  createdAt: '2026-01-01T00:09:00.000Z',
  timeoutAt: '2026-01-01T00:14:00.000Z',
  incident: { id: 'inc-1', title: 'checkout 5xx', severity: 'critical', service: 'checkout', source: 'alertmanager' },
  rule: { required: 2, distinctFrom: 'requester' },
  requester: 'carol',
  votes: [{ actor: { name: 'alice', verified: true, path: 'slack' }, at: '2026-01-01T00:09:30.000Z' }],
  steps: [
    { tool: 'demo__get_pods', args: { namespace: 'payments' }, result: '{"pods":["checkout-1"]}' },
    { tool: 'demo__logs', args: { pod: 'checkout-1' }, result: 'OOMKilled\nagain', isError: true },
  ],
};

describe('bosun approvals', () => {
  it('shows the incident and "1 of 2" under a two-person rule', () => {
    const text = formatApprovals([approval], now);
    expect(text).toContain('incident: inc-1 [critical] checkout 5xx  service checkout  source alertmanager');
    expect(text).toContain('needs: 1 of 2 approvals (alice); not carol');
    expect(votesLine({ ...approval, votes: [] })).toBe('0 of 2 approvals; not carol');
  });

  it('shows the run so far, a line a step, and each decision with its person, path and time', () => {
    const text = formatApprovals([approval], now);
    expect(text).toContain('    so far (2 steps):');
    expect(text).toContain('      demo__get_pods {"namespace":"payments"} -> {"pods":["checkout-1"]}');
    expect(text).toContain('      demo__logs {"pod":"checkout-1"} -> error: OOMKilled again');
    expect(text).toContain('    approve by alice (verified, slack) at 2026-01-01T00:09:30.000Z');
    expect(formatApprovals([{ ...approval, steps: [] }], now)).not.toContain('so far');
    expect(decisionLine({ decision: 'deny', name: 'bob', verified: false, path: 'http', at: 'T', reason: 'not now' })).toBe(
      'deny by bob (unverified, http) at T: not now',
    );
    expect(decisionLine({ decision: 'timeout', name: 'bosun (approval timeout)', at: 'T', reason: 'timeout' })).toBe(
      'timeout by bosun (approval timeout) at T',
    );
  });

  it('shows the run’s other specialists with their last findings, and who has looked at it', () => {
    const text = formatApprovals(
      [
        {
          ...approval,
          specialists: [
            { taskId: 't2', agent: 'database', status: 'completed', finding: 'the pool is\nexhausted' },
            { taskId: 't3', agent: 'network', status: 'queued' },
          ],
          viewers: [{ name: 'bob', verified: true, path: 'console', at: '2026-01-01T00:09:40.000Z' }],
        },
      ],
      now,
    );
    expect(text).toContain(
      '    other specialists:\n      database completed: the pool is exhausted\n      network queued\n    so far (2 steps):',
    );
    expect(text).toContain('    seen by: bob (console) 2026-01-01T00:09:40.000Z');
    expect(formatApprovals([{ ...approval, specialistsProblem: 'checkpoint run:r1 is not valid JSON' }], now)).toContain(
      '    other specialists: unreadable (checkpoint run:r1 is not valid JSON)',
    );
    expect(formatApprovals([approval], now)).not.toMatch(/other specialists|seen by/);
  });
});
