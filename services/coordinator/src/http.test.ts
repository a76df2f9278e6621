import { describe, expect, it } from 'vitest';

import { NO_REASON_GIVEN, parseCancelBody, parseRunsQuery } from './http.js';

/** The status and message of what `fn` throws. */
function refusal(fn: () => unknown): { status: number; message: string } {
  try {
    fn();
  } catch (err) {
    return { status: (err as { status: number }).status, message: (err as Error).message };
  }
  throw new Error('expected a refusal');
}

describe('parseCancelBody (POST /runs/<runId>/cancel)', () => {
  it('takes an empty body, or reason and by, trimmed', () => {
    expect(parseCancelBody('')).toEqual({ by: 'http-operator', reason: NO_REASON_GIVEN });
    expect(parseCancelBody('{}')).toEqual({ by: 'http-operator', reason: NO_REASON_GIVEN });
    expect(parseCancelBody('{"reason":" wrong incident ","by":" alice "}')).toEqual({ by: 'alice', reason: 'wrong incident' });
  });

  it('answers 400 naming the field', () => {
    expect(refusal(() => parseCancelBody('{"reason":""}'))).toMatchObject({ status: 400, message: expect.stringMatching(/^reason: /) });
    expect(refusal(() => parseCancelBody('{"by":7}'))).toMatchObject({ status: 400, message: expect.stringMatching(/^by: /) });
    expect(refusal(() => parseCancelBody(`{"reason":"${'x'.repeat(10_001)}"}`))).toMatchObject({
      status: 400,
      message: expect.stringMatching(/^reason: .*10000/),
    });
    expect(refusal(() => parseCancelBody('{"constructor":1}'))).toMatchObject({
      status: 400,
      message: 'constructor: unknown field (known: reason, by)',
    });
    expect(refusal(() => parseCancelBody('[1]'))).toMatchObject({ status: 400, message: 'body: must be a JSON object' });
    expect(refusal(() => parseCancelBody('{nope'))).toMatchObject({ status: 400, message: expect.stringMatching(/^body: not valid JSON/) });
  });
});

describe('parseRunsQuery (GET /runs)', () => {
  it('takes a known status and a limit from 1 to 1000 (default 50)', () => {
    expect(parseRunsQuery(new URLSearchParams(''))).toEqual({ limit: 50 });
    expect(parseRunsQuery(new URLSearchParams('status=cancelled&limit=7'))).toEqual({ state: 'cancelled', limit: 7 });
    expect(refusal(() => parseRunsQuery(new URLSearchParams('status=toString')))).toMatchObject({
      status: 400,
      message: expect.stringMatching(/^status: must be one of waiting, /),
    });
    for (const limit of ['0', '1001', 'x', '1.5'])
      expect(refusal(() => parseRunsQuery(new URLSearchParams(`limit=${limit}`))).status, limit).toBe(400);
  });
});
