import { describe, expect, it } from 'vitest';

import { InvalidInputError, parseWith } from './errors.js';
import { runIdFor, taskIdFor, toolCallKey } from './ids.js';
import { STALL_INSTRUCTION, STALL_MARKER, eventSubject, runsStreamName } from './names.js';
import { Incident, MAX_PAYLOAD_BYTES } from './schemas.js';
import { isStalled, stallText } from './stall.js';

const base = { id: 'inc-1', source: 'alertmanager', reason: 'PodCrashLooping', summary: 'checkout pods restart' };

/** Parses, expecting an {@link InvalidInputError}; returns it. */
function rejection(value: unknown): InvalidInputError {
  try {
    parseWith(Incident, value, 'incident');
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidInputError);
    return err as InvalidInputError;
  }
  throw new Error('expected the incident to be rejected');
}

describe('Incident parsing', () => {
  it('defaults severity to warning and keeps the given fields', () => {
    const incident = parseWith(Incident, base, 'incident');
    expect(incident.severity).toBe('warning');
    expect(incident.id).toBe('inc-1');
    expect(incident.reason).toBe('PodCrashLooping');
  });

  it('keeps an explicit severity', () => {
    expect(parseWith(Incident, { ...base, severity: 'critical' }, 'incident').severity).toBe('critical');
  });

  it('rejects an id of digits only (BullMQ refuses integer job ids), naming id', () => {
    const err = rejection({ ...base, id: '12345' });
    expect(err.fields).toEqual(['id']);
    expect(err.message).toMatch(/id: must not be only digits/);
  });

  it('rejects an id with a space, naming id', () => {
    const err = rejection({ ...base, id: 'inc 1' });
    expect(err.fields).toEqual(['id']);
    expect(err.message).toContain('id:');
    expect(err.code).toBe('invalid_input');
  });

  it('accepts a 128-character id and rejects a 129-character one, naming id', () => {
    expect(parseWith(Incident, { ...base, id: 'a'.repeat(128) }, 'incident').id).toHaveLength(128);
    const err = rejection({ ...base, id: 'a'.repeat(129) });
    expect(err.fields).toEqual(['id']);
  });

  it('rejects a payload over 256 KiB, naming payload', () => {
    // A string of n characters serializes to n + 2 bytes (the quotes).
    const ok = 'x'.repeat(MAX_PAYLOAD_BYTES - 2);
    expect(parseWith(Incident, { ...base, payload: ok }, 'incident').payload).toBe(ok);
    const err = rejection({ ...base, payload: { blob: 'x'.repeat(MAX_PAYLOAD_BYTES) } });
    expect(err.fields).toEqual(['payload']);
    expect(err.message).toContain('payload');
  });

  it('rejects a missing reason, naming reason', () => {
    const { reason: _omit, ...rest } = base;
    const err = rejection(rest);
    expect(err.fields).toEqual(['reason']);
    expect(err.message).toMatch(/^invalid incident: reason:/);
  });

  it('names every bad field at once', () => {
    const err = rejection({ ...base, id: 'bad id', reason: '' });
    expect(err.fields.sort()).toEqual(['id', 'reason']);
    expect(err.data).toEqual({ fields: err.fields });
  });
});

describe('stall text', () => {
  it('starts with the marker, names the agent and keeps the last words verbatim', () => {
    const lastWords = '  Which cluster?\n  I  could not tell.  ';
    const text = stallText('kubernetes', lastWords, 'ended its turn');
    expect(text.startsWith(STALL_MARKER)).toBe(true);
    expect(text).toContain('Agent: kubernetes');
    expect(text).toContain('Reason: ended its turn');
    expect(text).toContain(STALL_INSTRUCTION);
    expect(text.endsWith(lastWords)).toBe(true);
  });

  it('says so when the agent said nothing', () => {
    const text = stallText('db', '   ');
    expect(text).toContain('(the agent said nothing)');
    expect(text).not.toContain('Reason:');
  });

  it('isStalled recognises a stall text, an object with a stall summary, and nothing else', () => {
    const text = stallText('kubernetes', 'no idea');
    expect(isStalled(text)).toBe(true);
    expect(isStalled({ summary: text, findings: [] })).toBe(true);
    expect(isStalled('The pods restart because of OOM.')).toBe(false);
    expect(isStalled(`Note: ${STALL_MARKER}`)).toBe(false);
    expect(isStalled({ summary: 'all fine', findings: [] })).toBe(false);
    expect(isStalled([text])).toBe(false);
    expect(isStalled(null)).toBe(false);
    expect(isStalled(undefined)).toBe(false);
  });
});

describe('ids', () => {
  it('runIdFor is deterministic, depends on the time, and is one subject token', () => {
    const a = runIdFor('inc-1', 1_700_000_000_000);
    expect(runIdFor('inc-1', 1_700_000_000_000)).toBe(a);
    expect(runIdFor('inc-1', 1_700_000_000_001)).not.toBe(a);
    expect(runIdFor('inc-2', 1_700_000_000_000)).not.toBe(a);
    expect(a).toMatch(/^r[0-9a-f]{20}$/);
    expect(runIdFor('inc.with.dots', 1)).not.toContain('.');
  });

  it('taskIdFor and toolCallKey derive from the place in the run', () => {
    const task = taskIdFor('rabc', 2, 'kubernetes');
    expect(task).toBe('rabc-d2-kubernetes');
    expect(toolCallKey(task, 3, 0)).toBe('rabc-d2-kubernetes-s3-c0');
    expect(toolCallKey(task, 3, 1)).not.toBe(toolCallKey(task, 3, 0));
  });

  it('eventSubject and runsStreamName', () => {
    expect(eventSubject('bosun', 'rabc', 'agent.started')).toBe('bosun.runs.rabc.agent.started');
    expect(runsStreamName('bosun')).toBe('bosun-runs');
  });
});
