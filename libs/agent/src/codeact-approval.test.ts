import { describe, expect, it } from 'vitest';
import { APPROVAL_STEP_LIMITS, type CodeActAnswer } from '@bosun/contract';
import { scriptStepsSoFar } from './codeact-approval.js';

// The run so far of a CodeAct script's call that needs approval (issue 23 item 3): the script's
// earlier calls with their answers, redacted and cut, the latest only.

const call = (i: number, answer?: CodeActAnswer) => ({
  key: `t-s1-c${i}`,
  tool: `demo__t${i}`,
  args: { n: i, api_key: 'k-123456' },
  ...(answer ? { answer } : {}),
});

describe('scriptStepsSoFar', () => {
  it('lists the calls before the asking one that have answers: results, errors, secrets redacted', () => {
    const calls = [call(0, { ok: { status: 'degraded', token: 'x' } }), call(1, { error: 'timeout' }), call(2), call(3, { ok: 1 })];
    expect(scriptStepsSoFar(calls, 3)).toEqual([
      { tool: 'demo__t0', args: { n: 0, api_key: '[redacted]' }, result: '{"status":"degraded","token":"[redacted]"}' },
      { tool: 'demo__t1', args: { n: 1, api_key: '[redacted]' }, result: 'timeout', isError: true },
    ]);
    expect(scriptStepsSoFar(calls, 0)).toEqual([]);
  });

  it('cuts each result and keeps the latest steps', () => {
    const many = Array.from({ length: APPROVAL_STEP_LIMITS.steps + 3 }, (_, i) => call(i, { ok: 'y'.repeat(1000) }));
    const steps = scriptStepsSoFar(many, many.length);
    expect(steps).toHaveLength(APPROVAL_STEP_LIMITS.steps);
    expect(steps[0]!.tool).toBe('demo__t3');
    expect(steps[0]!.result).toHaveLength(APPROVAL_STEP_LIMITS.result);
  });
});
