import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import { sameSecret, sha256 } from './secrets.js';

describe('sameSecret', () => {
  it('is true for the same string and false for any other', () => {
    expect(sameSecret('s3cret', 's3cret')).toBe(true);
    expect(sameSecret('s3cret', 's3creT')).toBe(false);
    expect(sameSecret('s3cret', 's3cret ')).toBe(false);
    expect(sameSecret('', '')).toBe(true);
    expect(sameSecret('', 'x')).toBe(false);
  });

  it('compares values of different lengths without throwing (both sides are hashed first)', () => {
    expect(() => sameSecret('a', 'a much longer value than the first')).not.toThrow();
    expect(sameSecret(Buffer.alloc(3), Buffer.alloc(64))).toBe(false);
  });

  it('compares bytes with bytes and a string with its UTF-8 bytes', () => {
    const digest = sha256('token');
    expect(sameSecret(digest, Buffer.from(digest))).toBe(true);
    expect(sameSecret(digest, sha256('other'))).toBe(false);
    expect(sameSecret('zürich', Buffer.from('zürich', 'utf8'))).toBe(true);
    expect(sameSecret('zürich', Buffer.from('zürich', 'latin1'))).toBe(false);
  });
});

describe('sha256', () => {
  it('is the SHA-256 digest of the UTF-8 text', () => {
    expect(sha256('abc').toString('hex')).toBe(createHash('sha256').update('abc', 'utf8').digest('hex'));
    expect(sha256('abc')).toHaveLength(32);
  });
});
