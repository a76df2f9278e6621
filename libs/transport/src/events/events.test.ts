import { describe, expect, it } from 'vitest';
import { RunEvent, TRUNCATION_MARKER } from '@bosun/contract';

import { encodeEvent } from './events.js';

const event = (data: Record<string, unknown>): RunEvent => ({
  v: 1,
  type: 'run.completed',
  runId: 'r0123456789abcdef0123',
  incidentId: 'inc-1',
  seq: 42,
  at: '2026-01-01T00:00:00.000Z',
  data,
});

describe('encodeEvent', () => {
  it('sends an event that fits as it is', () => {
    const e = event({ status: 'completed', stalled: 0, answer: 'all good' });
    expect(encodeEvent(e, 1024)).toEqual({ body: JSON.stringify(e) });
  });

  it('cuts the large fields of an event over the limit, keeping its envelope, its seq and its small fields', () => {
    const e = event({
      status: 'partial',
      stalled: 1,
      specialists: [{ name: 'kubernetes', status: 'completed' }],
      answer: `Incident inc-1: ${'s'.repeat(5 * 1024 * 1024)}`,
    });
    const limit = 64 * 1024;
    const { body, truncated } = encodeEvent(e, limit);
    expect(Buffer.byteLength(body)).toBeLessThanOrEqual(limit);
    const sent = RunEvent.parse(JSON.parse(body));
    expect(sent).toMatchObject({ v: 1, type: 'run.completed', runId: e.runId, incidentId: 'inc-1', seq: 42, at: e.at });
    expect(sent.data).toMatchObject({ status: 'partial', stalled: 1, specialists: [{ name: 'kubernetes', status: 'completed' }] });
    expect(String(sent.data.answer)).toMatch(/^Incident inc-1: s+… \[TRUNCATED by bosun: \d+ characters, kept \d+\]$/);
    expect(String(sent.data.answer).length).toBeGreaterThan(limit / 2);
    expect(truncated).toEqual([expect.stringMatching(/^data\.answer: \d+ characters cut to \d+$/)]);
    expect(sent.truncated).toEqual(truncated);
  });

  it('cuts data nested deeper than 64 levels, which JSON.stringify could not even serialise at 10,000', () => {
    const deep = JSON.parse(`${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`) as Record<string, unknown>;
    const { body, truncated } = encodeEvent(event({ output: deep }), 1024 * 1024);
    const sent = RunEvent.parse(JSON.parse(body));
    expect(body).toContain(`${TRUNCATION_MARKER}: nested deeper than 64 levels]`);
    expect(sent.seq).toBe(42);
    expect(truncated).toHaveLength(1);
  });

  it('stays within a tiny limit by dropping data it cannot fit, never the envelope', () => {
    const { body } = encodeEvent(event({ answer: 'x'.repeat(100_000), more: Array.from({ length: 1000 }, (_, i) => ({ i })) }), 600);
    expect(Buffer.byteLength(body)).toBeLessThanOrEqual(600);
    expect(RunEvent.parse(JSON.parse(body)).seq).toBe(42);
  });
});
