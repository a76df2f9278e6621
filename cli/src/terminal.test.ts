import { describe, expect, it } from 'vitest';
import { escapeControl, safeJson } from './terminal.js';

describe('escapeControl', () => {
  it('shows ESC, NUL, CR, DEL, C1 and bidi overrides as escapes, and keeps printable text and tabs', () => {
    expect(escapeControl('a\u001b[2Jb\u0000c\rd\u007fe\u009bf\u202eg\th é ✓')).toBe('a\\x1b[2Jb\\x00c\\x0dd\\x7fe\\x9bf\\u202eg\th é ✓');
  });

  it('escapes newlines unless they are meant', () => {
    expect(escapeControl('one\ntwo')).toBe('one\\x0atwo');
    expect(escapeControl('one\ntwo\u001b', { keepNewlines: true })).toBe('one\ntwo\\x1b');
  });
});

describe('safeJson', () => {
  it('escapes what JSON.stringify leaves raw, and reads back as the same value', () => {
    const value = { s: 'x\u001by\u009bz\u202e\u2028', n: 1 };
    const text = safeJson(value);
    // eslint-disable-next-line no-control-regex -- the point: no raw control character is left
    expect(text).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202e\u2028]/);
    expect(JSON.parse(text)).toEqual(value);
  });
});
