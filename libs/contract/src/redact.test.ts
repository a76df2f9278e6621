import { describe, expect, it } from 'vitest';

import { callDigest } from './ids.js';
import { redactSecrets } from './redact.js';

describe('redactSecrets', () => {
  it('replaces the values of secret-looking keys at any depth and leaves the input as it was', () => {
    const args = {
      user: 'svc',
      password: 'hunter2',
      nested: [{ api_key: 'k1', keep: 1 }, { Authorization: 'Bearer x' }],
      token_count: 5,
      note: 'fine',
    };
    const before = JSON.stringify(args);
    expect(redactSecrets(args)).toEqual({
      user: 'svc',
      password: '[redacted]',
      nested: [{ api_key: '[redacted]', keep: 1 }, { Authorization: '[redacted]' }],
      token_count: '[redacted]',
      note: 'fine',
    });
    expect(JSON.stringify(args)).toBe(before);
  });

  it('cuts known values out of strings, survives cycles, and keeps a __proto__ key a key', () => {
    const o: Record<string, unknown> = { msg: 'with sekrit-value inside' };
    o.self = o;
    expect(redactSecrets(o, { values: ['sekrit-value', 'short'] })).toEqual({ msg: 'with [redacted] inside', self: '[circular]' });
    const proto = JSON.parse('{"__proto__": {"password": "p"}, "a": 1}') as Record<string, unknown>;
    const r = redactSecrets(proto) as Record<string, unknown>;
    expect(Object.getPrototypeOf(r)).toBe(Object.prototype);
    expect(Object.keys(r)).toEqual(['__proto__', 'a']);
    expect(JSON.stringify(r)).toBe('{"__proto__":{"password":"[redacted]"},"a":1}');
  });

  it('shows values as JSON would: a Date as its string', () => {
    const at = new Date('2026-01-02T03:04:05.000Z');
    expect(redactSecrets({ at, token: at })).toEqual({ at: '2026-01-02T03:04:05.000Z', token: '[redacted]' });
  });
});

describe('callDigest', () => {
  it('names one call of one approval: tool and arguments (any key order), key and approval', () => {
    const d = callDigest('ap-1', 'k-1', 'vault__set', { user: 'u', password: 'p' });
    expect(d).toMatch(/^[0-9a-f]{64}$/);
    expect(callDigest('ap-1', 'k-1', 'vault__set', { password: 'p', user: 'u' })).toBe(d);
    expect(callDigest('ap-1', 'k-1', 'vault__set', { password: 'q', user: 'u' })).not.toBe(d);
    expect(callDigest('ap-1', 'k-2', 'vault__set', { user: 'u', password: 'p' })).not.toBe(d);
    expect(callDigest('ap-2', 'k-1', 'vault__set', { user: 'u', password: 'p' })).not.toBe(d);
  });
});
