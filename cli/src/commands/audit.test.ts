import { describe, expect, it } from 'vitest';
import type { AuditEntry } from '@bosun/contract';
import { decidedBy, formatAudit } from './audit.js';

// `bosun audit --by <person>` and how deciders read (issue 23, item 5).

const base: AuditEntry = {
  at: '2026-01-01T00:00:00.000Z',
  key: 'k1',
  runId: 'r1',
  incidentId: 'inc-1',
  agent: 'kubernetes',
  tool: 'demo__rollback_deployment',
  args: {},
  approvalId: 'ap-1',
  approver: 'alice, bob',
  status: 'ok',
  deciders: [
    { name: 'alice', verified: true, path: 'cli' },
    { name: 'bob', verified: true, path: 'slack', slack: { teamId: 'T1', userId: 'U2' } },
  ],
};

describe('bosun audit --by', () => {
  it('matches any verified decider, case-insensitive; older entries by the approver name', () => {
    expect(decidedBy(base, 'Bob')).toBe(true);
    expect(decidedBy(base, 'carol')).toBe(false);
    const old = { ...base, approver: 'dave', deciders: [] };
    expect(decidedBy(old, 'dave')).toBe(true);
    expect(decidedBy({ ...old, approver: null }, 'dave')).toBe(false);
  });

  it('shows each decider with verified, path, address and Slack ids', () => {
    const text = formatAudit([{ id: '1-0', ...base }]);
    expect(text).toContain('ap-1 (alice (verified, cli), bob (verified, slack slack T1/U2))');
  });
});
