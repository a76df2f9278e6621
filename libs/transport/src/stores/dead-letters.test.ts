import { describe, expect, it } from 'vitest';
import { DeadLetter, STALL_MARKER, TRUNCATION_MARKER, jsonDepth } from '@bosun/contract';

import { DEAD_LETTER_LIMITS, deadLetterEntry } from './dead-letters.js';

const AT = new Date('2026-01-01T00:00:00.000Z');

describe('deadLetterEntry', () => {
  it('stores ordinary input as it is, with nothing marked as cut', () => {
    const input = { id: 'inc-1', source: 's', summary: 42 };
    const entry = deadLetterEntry({ kind: 'poison', reason: 'invalid incident: summary: expected string', input }, AT);
    expect(entry).toEqual({
      v: 1,
      kind: 'poison',
      marker: STALL_MARKER,
      at: AT.toISOString(),
      reason: 'invalid incident: summary: expected string',
      input,
    });
    expect(DeadLetter.parse(entry)).toEqual(entry);
  });

  it('stores input nested 10,000 levels as a copy that can be serialised, saying where it was cut', () => {
    const deep = JSON.parse(`{"id":"deep-1","payload":${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}}`) as unknown;
    expect(() => JSON.stringify(deep)).toThrow(RangeError);
    const entry = deadLetterEntry({ kind: 'poison', reason: 'invalid incident: payload: too deep', input: deep }, AT);
    const text = JSON.stringify(entry);
    expect(jsonDepth(entry.input)).toBe(DEAD_LETTER_LIMITS.inputDepth);
    expect(text).toContain(`${TRUNCATION_MARKER}: nested deeper than ${DEAD_LETTER_LIMITS.inputDepth} levels]`);
    expect((entry.input as { id: string }).id).toBe('deep-1');
    expect(entry.truncated).toEqual([expect.stringMatching(/^input\.payload\.a\.a.*: nested deeper than 64 levels$/)]);
    expect(DeadLetter.parse(JSON.parse(text))).toEqual(entry);
  });

  it('bounds a 5 MB input and an over-long reason, keeping their beginnings', () => {
    const input = { id: 'big-1', summary: 'x'.repeat(5 * 1024 * 1024) };
    const reason = `invalid incident: ${'r'.repeat(200_000)}`;
    const entry = deadLetterEntry({ kind: 'poison', reason, input }, AT);
    expect(Buffer.byteLength(JSON.stringify(entry.input))).toBeLessThanOrEqual(DEAD_LETTER_LIMITS.inputBytes);
    expect((entry.input as { summary: string }).summary).toMatch(/^x+… \[TRUNCATED by bosun: 5242880 characters, kept \d+\]$/);
    expect(entry.reason.startsWith('invalid incident: rrr')).toBe(true);
    expect(entry.reason).toContain(`${TRUNCATION_MARKER}: ${reason.length} characters, kept ${DEAD_LETTER_LIMITS.textChars}]`);
    expect(entry.truncated).toEqual([
      `reason: ${reason.length} characters cut to ${DEAD_LETTER_LIMITS.textChars}`,
      expect.stringMatching(/^input\.summary: 5242880 characters cut to \d+$/),
    ]);
  });
});
