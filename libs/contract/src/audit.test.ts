import { describe, expect, it } from 'vitest';
import { z } from 'zod';

import { AUDIT_FIELDS, AuditStreamEntry, auditFields, auditStreamKey, parseAuditEntry, type AuditEntry } from './audit.js';
import { BadStoredValueError, parseStored, parseStoredJson } from './errors.js';

const entry: AuditEntry = {
  at: '2026-01-01T00:00:00.000Z',
  key: 'r1-d0-kubernetes-s1-c0',
  runId: 'r1',
  incidentId: 'inc-1',
  agent: 'kubernetes',
  tool: 'demo__restart_pod',
  args: { pod: 'p1', token: '[redacted]' },
  approvalId: 'appr-1',
  approver: 'alice',
  status: 'ok',
  deciders: [{ name: 'alice', verified: true, path: 'slack', address: '10.0.0.7', slack: { teamId: 'T1', userId: 'U1' } }],
};

describe('the audit stream entry', () => {
  it('lives at <prefix>:audit', () => {
    expect(auditStreamKey('bosun')).toBe('bosun:audit');
  });

  it('is written field by field in the order of AUDIT_FIELDS, the fields its schema reads', () => {
    const flat = auditFields(entry);
    expect(flat.filter((_, i) => i % 2 === 0)).toEqual([...AUDIT_FIELDS]);
    expect([...AUDIT_FIELDS]).toEqual(Object.keys(AuditStreamEntry.shape));
    expect(flat).toEqual([
      'at',
      entry.at,
      'key',
      entry.key,
      'runId',
      'r1',
      'incidentId',
      'inc-1',
      'agent',
      'kubernetes',
      'tool',
      'demo__restart_pod',
      'args',
      '{"pod":"p1","token":"[redacted]"}',
      'approvalId',
      'appr-1',
      'approver',
      'alice',
      'status',
      'ok',
      'deciders',
      JSON.stringify(entry.deciders),
    ]);
  });

  it('reads back what was written; no approval is an empty string, read as null', () => {
    expect(parseAuditEntry(auditFields(entry), 'entry 1-0')).toEqual(entry);
    const none = { ...entry, approvalId: null, approver: null, status: 'refused' as const, deciders: [] };
    const flat = auditFields(none);
    expect(flat.slice(14, 18)).toEqual(['approvalId', '', 'approver', '']);
    expect(parseAuditEntry(flat, 'entry 1-1')).toEqual(none);
    // Written before deciders were recorded: read as none.
    expect(parseAuditEntry(flat.slice(0, -2), 'entry 1-2')).toEqual(none);
  });

  it('names every missing or bad field of a stored entry', () => {
    const flat = auditFields(entry);
    const bad = [...flat];
    bad[13] = '{not json';
    bad[19] = 'maybe';
    // Without its key, args not JSON, status unknown.
    const read = () =>
      parseAuditEntry(
        bad.filter((_, i) => i < 2 || i > 3),
        'audit entry 1-0',
      );
    expect(read).toThrow(BadStoredValueError);
    expect(read).toThrow(/^audit entry 1-0 does not parse: key: .*; args: is not valid JSON; status: /);
    try {
      read();
    } catch (err) {
      expect((err as BadStoredValueError).fields).toEqual(['key', 'args', 'status']);
      expect((err as BadStoredValueError).code).toBe('bad_stored_value');
    }
  });
});

describe('parseStored and parseStoredJson', () => {
  const Schema = z.object({ n: z.number() });

  it('return the parsed value', () => {
    expect(parseStored(Schema, { n: 1 }, 'x')).toEqual({ n: 1 });
    expect(parseStoredJson(Schema, '{"n":2}', 'x')).toEqual({ n: 2 });
  });

  it('throw a BadStoredValueError naming the field, or the root for text that is not JSON', () => {
    expect(() => parseStored(Schema, { n: 'one' }, 'checkpoint c1')).toThrow(/^checkpoint c1 does not parse: n: /);
    expect(() => parseStoredJson(Schema, '{', 'checkpoint c2')).toThrow(/^checkpoint c2 does not parse: \(root\): not valid JSON \(/);
  });
});
