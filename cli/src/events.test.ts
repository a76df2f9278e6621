import { describe, expect, it } from 'vitest';
import type { RunEvent } from '@bosun/contract';
import { SeqOrder, formatEvent } from './events.js';

const ev = (seq: number, type: RunEvent['type'] = 'model.called'): RunEvent => ({
  v: 1,
  type,
  runId: 'r1',
  incidentId: 'i1',
  seq,
  at: '2026-01-01T00:00:00.000Z',
  data: {},
});
const seqs = (es: RunEvent[]) => es.map((e) => e.seq);

describe('SeqOrder (bosun watch <run>)', () => {
  it('passes events through in order and holds one that arrives ahead of an earlier one', () => {
    const o = new SeqOrder();
    expect(seqs(o.push(ev(1)))).toEqual([1]);
    expect(seqs(o.push(ev(3)))).toEqual([]);
    expect(o.gapped).toBe(true);
    expect(seqs(o.push(ev(2)))).toEqual([2, 3]);
    expect(o.gapped).toBe(false);
  });

  it('drops repeats (a retried publish seen twice)', () => {
    const o = new SeqOrder();
    o.push(ev(1));
    expect(seqs(o.push(ev(1)))).toEqual([]);
    o.push(ev(3));
    expect(seqs(o.push(ev(3)))).toEqual([]);
  });

  it('skips a gap that is not filled, naming the missing seqs, and goes on in order', () => {
    const o = new SeqOrder();
    o.push(ev(1));
    o.push(ev(5, 'run.completed'));
    o.push(ev(3));
    const { ready, missing } = o.skipGap();
    expect(seqs(ready)).toEqual([3, 5]);
    expect(missing).toEqual([2, 4]);
    expect(o.gapped).toBe(false);
    expect(seqs(o.push(ev(4)))).toEqual([]);
    expect(seqs(o.push(ev(6)))).toEqual([6]);
  });
});

describe('formatEvent (bosun watch)', () => {
  it('prints control characters from event data escaped, one line per event', () => {
    const started: RunEvent = {
      ...ev(1, 'run.started'),
      data: { incident: { summary: 'red \u001b[31mALERT\u001b[0m\u0000 done \u202eevil' } },
    };
    const line = formatEvent(started);
    expect(line).toContain('red \\x1b[31mALERT\\x1b[0m\\x00 done \\u202eevil');
    // eslint-disable-next-line no-control-regex -- the point: no raw control character is left
    expect(line).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202e]/);
    // Fields that are not shortened (and so not flattened) stay on one line too.
    const resolved: RunEvent = {
      ...ev(2, 'approval.resolved'),
      data: { approvalId: 'ap-1', status: 'denied', decidedBy: 'bob\r', denyReason: 'no\nfake line\u0007' },
    };
    const one = formatEvent(resolved);
    expect(one.split('\n')).toHaveLength(1);
    expect(one).toContain('by bob\\x0d (no\\x0afake line\\x07)');
  });

  it('names who cancelled a run, and why', () => {
    const done: RunEvent = {
      ...ev(9, 'run.completed'),
      data: { status: 'cancelled', stalled: 1, cancelled: { by: 'alice', reason: 'wrong incident', at: '2026-01-01T00:00:00.000Z' } },
    };
    expect(formatEvent(done)).toContain('run.completed    cancelled by alice: wrong incident (1 incomplete)');
  });

  it('shows how many calls of a finished run are in doubt', () => {
    const done = {
      ...ev(9, 'run.completed'),
      data: { status: 'partial', stalled: 0, inDoubt: { count: 1, calls: [{ key: 'k', tool: 't', agent: 'a' }] } },
    };
    expect(formatEvent(done)).toMatch(/run\.completed\s+partial \(1 in doubt\)$/);
    expect(formatEvent({ ...done, data: { status: 'completed', stalled: 0 } })).toMatch(/run\.completed\s+completed$/);
  });
});
