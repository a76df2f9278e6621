import { describe, expect, it } from 'vitest';

import {
  ApprovalDecisionRecord,
  DECISION_LIMITS,
  DecisionError,
  decisionInput,
  parseDecision,
  taskApprovalId,
  type Decision,
} from './approvals.js';
import { TaskCheckpoint, taskCheckpointId } from './task-checkpoint.js';

/** The error `parseDecision` throws for `input`, or undefined. */
function refusal(input: unknown, options?: Parameters<typeof parseDecision>[1]): DecisionError | undefined {
  try {
    parseDecision(input, options);
    return undefined;
  } catch (err) {
    if (err instanceof DecisionError) return err;
    throw err;
  }
}

describe('parseDecision', () => {
  it('returns an approval (all calls, or only some, duplicates dropped) and a denial with its reason, trimmed', () => {
    expect(parseDecision({ decision: 'approve' }, { defaultBy: 'http-operator' })).toEqual({ approve: true, by: 'http-operator' });
    expect(parseDecision({ decision: 'approve', only: [2, 0, 2], by: ' alice ' })).toEqual({ approve: true, only: [2, 0], by: 'alice' });
    expect(parseDecision({ decision: 'deny', reason: '  not now ', by: 'bob' })).toEqual({ approve: false, reason: 'not now', by: 'bob' });
  });

  it('names the field at fault, and how', () => {
    const cases: [unknown, string, string, RegExp][] = [
      [[], 'body', 'invalid', /^body: must be a JSON object$/],
      [{ decision: 'approve', extra: true }, 'extra', 'unknown_field', /^extra: unknown field \(known: decision, only, reason, by\)$/],
      [{ decision: 'maybe' }, 'decision', 'invalid', /^decision: must be "approve" or "deny"$/],
      [{ decision: 'approve', by: 7 }, 'by', 'invalid', /^by: must be a non-empty string of at most 200 characters$/],
      [{ decision: 'approve', by: '  ' }, 'by', 'invalid', /^by: /],
      [{ decision: 'approve', reason: 'why' }, 'reason', 'not_allowed', /^reason: only a denial takes a reason$/],
      [{ decision: 'approve', only: 'all' }, 'only', 'invalid', /^only: must be a non-empty array of call indexes/],
      [{ decision: 'approve', only: [] }, 'only', 'invalid', /^only: /],
      [{ decision: 'approve', only: [1.5] }, 'only', 'invalid', /^only: /],
      [{ decision: 'approve', only: [-1] }, 'only', 'invalid', /^only: /],
      [{ decision: 'deny', only: [0], reason: 'r' }, 'only', 'not_allowed', /^only: only an approval takes call indexes/],
      [{ decision: 'deny' }, 'reason', 'missing', /^reason: required to deny/],
      [{ decision: 'deny', reason: ' ' }, 'reason', 'missing', /^reason: required to deny/],
      [{ decision: 'deny', reason: 'x'.repeat(DECISION_LIMITS.reason + 1) }, 'reason', 'too_long', /^reason: at most 10000 characters$/],
    ];
    for (const [input, field, problem, message] of cases) {
      const err = refusal(input, { defaultBy: 'op' });
      expect(err, JSON.stringify(input).slice(0, 80)).toBeInstanceOf(DecisionError);
      expect(err).toMatchObject({ field, problem, code: 'bad_decision' });
      expect(err!.message).toMatch(message);
    }
  });

  it('requires by without a default, and applies no length limit when told (a decision Bosun makes itself)', () => {
    expect(refusal({ decision: 'approve' })).toMatchObject({ field: 'by', problem: 'invalid' });
    const long = 'r'.repeat(DECISION_LIMITS.reason + 50);
    expect(parseDecision({ decision: 'deny', reason: long, by: 'b'.repeat(300) }, { limits: false })).toEqual({
      approve: false,
      reason: long,
      by: 'b'.repeat(300),
    });
    expect(refusal({ decision: 'deny', reason: ' ', by: 'x' }, { limits: false })).toMatchObject({ field: 'reason', problem: 'missing' });
  });

  it('reads back every decision in its input form', () => {
    for (const d of [
      { approve: true, by: 'a' },
      { approve: true, only: [1], by: 'a' },
      { approve: false, reason: 'no', by: 'b' },
    ] satisfies Decision[]) {
      expect(parseDecision(decisionInput(d))).toEqual(d);
    }
  });

  it('takes the decider from a verified actor, keeping a different typed name only as its note', () => {
    const alice = { name: 'alice', verified: true, path: 'cli' } as const;
    expect(parseDecision({ decision: 'approve' }, { actor: alice })).toEqual({ approve: true, by: 'alice', actor: alice });
    expect(parseDecision({ decision: 'approve', by: 'alice' }, { actor: alice })).toEqual({ approve: true, by: 'alice', actor: alice });
    expect(parseDecision({ decision: 'deny', reason: 'no', by: 'mallory' }, { actor: alice })).toEqual({
      approve: false,
      reason: 'no',
      by: 'alice',
      actor: { ...alice, note: 'mallory' },
    });
  });

  it('names an unverified actor (the shared token) by the typed name, and refuses a malformed actor', () => {
    const shared = { name: 'http-operator', verified: false, path: 'http' } as const;
    expect(parseDecision({ decision: 'approve', by: 'bob' }, { actor: shared })).toEqual({
      approve: true,
      by: 'bob',
      actor: { ...shared, name: 'bob' },
    });
    expect(parseDecision({ decision: 'approve' }, { actor: shared })).toEqual({ approve: true, by: 'http-operator', actor: shared });
    const bad = refusal({ decision: 'approve' }, { actor: { name: '', verified: true, path: 'fax' } as never });
    expect(bad).toMatchObject({ field: 'actor', problem: 'invalid' });
    expect(bad?.message).toMatch(/^actor: name: .*; path: /);
  });
});

describe('stored approval formats', () => {
  it('names approvals and checkpoints as the loops and the store key them', () => {
    expect(taskApprovalId('r1-d0-k8s', 3)).toBe('ap-r1-d0-k8s-s3');
    expect(taskCheckpointId('r1-d0-k8s')).toBe('task:r1-d0-k8s');
  });

  it('parses a stored decision, and refuses one that is neither approved nor denied', () => {
    const at = '2026-01-01T00:00:00.000Z';
    expect(ApprovalDecisionRecord.parse({ status: 'approved', decidedBy: 'a', decidedAt: at, approved: [1] })).toEqual({
      status: 'approved',
      decidedBy: 'a',
      decidedAt: at,
      approved: [1],
    });
    expect(ApprovalDecisionRecord.safeParse({ status: 'pending', decidedBy: 'a', decidedAt: at }).success).toBe(false);
  });
});

describe('TaskCheckpoint', () => {
  const base = {
    v: 1,
    taskId: 't',
    step: 1,
    toolRounds: 0,
    invalidOutputs: 0,
    askedToFinish: false,
    messages: [{ role: 'user', text: 'go' }],
  };

  it('reads each kind of step under way, including the model step of earlier versions', () => {
    const at = '2026-01-01T00:00:00.000Z';
    for (const pending of [
      { kind: 'tools', step: 1, keys: ['t-s1-c0'], at },
      { kind: 'approval', step: 1, approvalId: 'ap-t-s1', at },
      { kind: 'model', step: 2, at },
    ]) {
      expect(TaskCheckpoint.parse({ ...base, pending }, 'task:t')?.pending).toEqual(pending);
    }
    expect(TaskCheckpoint.parse(null, 'task:t')).toBeNull();
  });

  it('refuses a step under way that lacks what its kind needs, naming the checkpoint', () => {
    const at = '2026-01-01T00:00:00.000Z';
    expect(() => TaskCheckpoint.parse({ ...base, pending: { kind: 'approval', step: 1, at } }, 'task:t')).toThrow(
      /checkpoint task:t cannot be used: .*pending/,
    );
    expect(() => TaskCheckpoint.parse({ ...base, pending: { kind: 'later', step: 1, at } }, 'task:t')).toThrow(/task:t/);
  });
});
