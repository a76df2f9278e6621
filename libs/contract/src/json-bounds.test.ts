import { describe, expect, it } from 'vitest';

import { InvalidInputError, parseWith } from './errors.js';
import { TRUNCATED_KEYS_FIELD, TRUNCATION_MARKER, boundJson, jsonBytes, jsonDepth } from './json-bounds.js';
import { INCIDENT_LIMITS, Incident } from './schemas.js';

/** `{"a":{"a":…1}}` nested `levels` deep, built from text as a publisher's JSON would be (JSON.parse does not recurse). */
function nested(levels: number, key = 'a'): unknown {
  return JSON.parse(`{"${key}":`.repeat(levels) + '1' + '}'.repeat(levels));
}

const base = { id: 'inc-1', source: 'alertmanager', reason: 'PodCrashLooping', summary: 'checkout pods restart' };

function rejection(value: unknown): InvalidInputError {
  try {
    parseWith(Incident, value, 'incident');
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidInputError);
    return err as InvalidInputError;
  }
  throw new Error('expected the incident to be rejected');
}

describe('jsonDepth', () => {
  it('counts levels of objects and arrays', () => {
    expect(jsonDepth('x')).toBe(0);
    expect(jsonDepth(null)).toBe(0);
    expect(jsonDepth({})).toBe(1);
    expect(jsonDepth([1, 2])).toBe(1);
    expect(jsonDepth({ a: { b: [1] } })).toBe(3);
  });

  it('measures 10,000 levels without overflowing the stack, and stops early past a limit', () => {
    const deep = nested(10_000);
    expect(() => JSON.stringify(deep)).toThrow(RangeError);
    expect(jsonDepth(deep)).toBe(10_000);
    expect(jsonDepth(deep, 32)).toBe(33);
  });

  it('ends on a cyclic value when given a limit', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(jsonDepth(cyclic, 64)).toBe(65);
  });
});

describe('jsonBytes', () => {
  it('is the UTF-8 length of JSON.stringify, or undefined past the depth limit', () => {
    expect(jsonBytes({ a: 'é' }, 4)).toBe(Buffer.byteLength('{"a":"é"}'));
    expect(jsonBytes(nested(10_000), 64)).toBeUndefined();
    expect(jsonBytes({ n: 1n }, 4)).toBeUndefined();
  });
});

describe('boundJson', () => {
  it('keeps a value that fits as it is', () => {
    const value = { a: [1, 'two', { three: true }], b: null };
    const r = boundJson(value, { maxDepth: 8, maxBytes: 1_000 });
    expect(r.value).toBe(value);
    expect(r.json).toBe(JSON.stringify(value));
    expect(r.cut).toEqual([]);
  });

  it('cuts a value nested 10,000 levels at the depth limit with a marker, naming the place', () => {
    const r = boundJson({ id: 'x', payload: nested(10_000) }, { maxDepth: 64, maxBytes: 1 << 20, path: 'input' });
    expect(jsonDepth(r.value)).toBe(64);
    expect(r.json).toContain(`${TRUNCATION_MARKER}: nested deeper than 64 levels]`);
    expect(r.cut).toHaveLength(1);
    expect(r.cut[0]).toMatch(/^input\.payload\.a\.a.*: nested deeper than 64 levels$/);
    expect(JSON.parse(r.json)).toEqual(r.value);
    expect((r.value as { id: string }).id).toBe('x');
  });

  it('shortens the longest strings to fit, keeps the short fields, and says how long each was', () => {
    const value = {
      status: 'partial',
      answer: 'x'.repeat(5_000_000),
      summary: 's'.repeat(300_000),
      specialists: [{ name: 'kubernetes', status: 'completed' }],
    };
    const r = boundJson(value, { maxDepth: 64, maxBytes: 64 * 1024, path: 'data' });
    expect(r.bytes).toBeLessThanOrEqual(64 * 1024);
    expect(r.bytes).toBe(Buffer.byteLength(r.json));
    const v = r.value as typeof value;
    expect(v.status).toBe('partial');
    expect(v.specialists).toEqual(value.specialists);
    expect(v.answer).toMatch(/^x+… \[TRUNCATED by bosun: 5000000 characters, kept \d+\]$/);
    expect(v.summary).toMatch(/\[TRUNCATED by bosun: 300000 characters, kept \d+\]$/);
    // Most of the room is used, not thrown away.
    expect(v.answer.length + v.summary.length).toBeGreaterThan(60_000);
    expect(r.cut).toEqual([
      expect.stringMatching(/^data\.answer: 5000000 characters cut to \d+$/),
      expect.stringMatching(/^data\.summary: 300000 characters cut to \d+$/),
    ]);
  });

  it('keeps the first items of a long array, with a marker for the rest', () => {
    const r = boundJson({ items: Array.from({ length: 100_000 }, (_, i) => i) }, { maxDepth: 8, maxBytes: 16 * 1024, path: 'data' });
    expect(r.bytes).toBeLessThanOrEqual(16 * 1024);
    const items = (r.value as { items: unknown[] }).items;
    expect(items.slice(0, 3)).toEqual([0, 1, 2]);
    expect(String(items.at(-1))).toMatch(/^\[TRUNCATED by bosun: \d+ more items\]$/);
    expect(r.cut[0]).toMatch(/^data\.items: \d+ of 100000 items cut$/);
  });

  it('keeps the first keys of a huge object, saying how many it left out', () => {
    const wide = Object.fromEntries(Array.from({ length: 50_000 }, (_, i) => [`k${i}`, i]));
    const r = boundJson(wide, { maxDepth: 8, maxBytes: 16 * 1024, path: 'data' });
    expect(r.bytes).toBeLessThanOrEqual(16 * 1024);
    expect((r.value as Record<string, unknown>).k0).toBe(0);
    expect((r.value as Record<string, unknown>)[TRUNCATED_KEYS_FIELD]).toMatch(/^\d+ more keys$/);
  });

  it('keeps "__proto__" an ordinary key of the copy', () => {
    const value = JSON.parse(`{"__proto__":{"polluted":true},"b":"${'y'.repeat(1_000)}"}`) as Record<string, unknown>;
    const r = boundJson(value, { maxDepth: 4, maxBytes: 600 });
    expect(Object.keys(r.value as object)).toEqual(['__proto__', 'b']);
    expect(Object.getPrototypeOf(r.value)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('never throws: bigints, cycles and throwing getters end as markers', () => {
    const cyclic: Record<string, unknown> = { n: 10n };
    cyclic.self = cyclic;
    const r = boundJson(cyclic, { maxDepth: 8, maxBytes: 1_000 });
    expect(JSON.parse(r.json)).toEqual({ n: '10', self: `${TRUNCATION_MARKER}: repeated reference]` });
    const hostile = {
      get boom(): never {
        throw new Error('no');
      },
    };
    const h = boundJson(hostile, { maxDepth: 8, maxBytes: 1_000, path: 'input' });
    expect(h.value).toBe(`${TRUNCATION_MARKER}: it cannot be serialised]`);
    expect(h.cut).toEqual(['input: replaced whole (it cannot be serialised)']);
  });

  it('replaces a value it cannot bring under a tiny limit by a marker', () => {
    const r = boundJson({ a: 'x'.repeat(1_000) }, { maxDepth: 8, maxBytes: 20 });
    expect(typeof r.value).toBe('string');
    expect(String(r.value)).toContain(TRUNCATION_MARKER);
    expect(r.cut).toHaveLength(1);
  });
});

describe('Incident limits', () => {
  it('rejects a payload nested 10,000 levels with an ordinary error naming payload and the limit', () => {
    const err = rejection({ ...base, payload: nested(10_000) });
    expect(err.fields).toEqual(['payload']);
    expect(err.message).toBe(`invalid incident: payload: must nest objects and arrays at most ${INCIDENT_LIMITS.payloadDepth} levels deep`);
  });

  it('accepts a payload exactly at the depth limit and rejects one level more', () => {
    expect(parseWith(Incident, { ...base, payload: nested(INCIDENT_LIMITS.payloadDepth) }, 'incident').payload).toBeDefined();
    expect(rejection({ ...base, payload: nested(INCIDENT_LIMITS.payloadDepth + 1) }).fields).toEqual(['payload']);
  });

  it('rejects labels nested 10,000 levels as a label that is not a string', () => {
    const err = rejection({ ...base, labels: { service: nested(10_000) } });
    expect(err.fields).toEqual(['labels.service']);
  });

  it('bounds the string fields, naming the field and the limit', () => {
    expect(parseWith(Incident, { ...base, summary: 's'.repeat(INCIDENT_LIMITS.summaryChars) }, 'incident').summary).toHaveLength(
      INCIDENT_LIMITS.summaryChars,
    );
    const summary = rejection({ ...base, summary: 's'.repeat(5 * 1024 * 1024) });
    expect(summary.message).toBe(`invalid incident: summary: must be at most ${INCIDENT_LIMITS.summaryChars} characters`);
    expect(rejection({ ...base, source: 's'.repeat(257) }).message).toMatch(/source: must be at most 256 characters/);
    expect(rejection({ ...base, labels: { service: 'v'.repeat(INCIDENT_LIMITS.labelValueChars + 1) } }).fields).toEqual(['labels.service']);
    const many = Object.fromEntries(Array.from({ length: INCIDENT_LIMITS.labels + 1 }, (_, i) => [`l${i}`, 'v']));
    expect(rejection({ ...base, labels: many }).message).toMatch(/labels: must have at most 128 labels/);
  });

  it('rejects a whole incident over its limit, whose fields are each within theirs', () => {
    const labels = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`l${i}`, 'v'.repeat(INCIDENT_LIMITS.labelValueChars)]));
    const incident = {
      ...base,
      summary: 's'.repeat(INCIDENT_LIMITS.summaryChars),
      labels,
      payload: { blob: 'p'.repeat(INCIDENT_LIMITS.payloadBytes - 20) },
    };
    const err = rejection(incident);
    expect(err.fields).toEqual(['(root)']);
    expect(err.message).toMatch(
      new RegExp(`the whole incident must be at most ${INCIDENT_LIMITS.maxBytes} bytes when serialized \\(it is \\d+\\)`),
    );
  });
});
