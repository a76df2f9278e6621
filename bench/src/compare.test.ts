import { describe, expect, it } from 'vitest';
import { asResults, assignKeys, compareFigures, compareText, direction, figures, parseFigure, rowKey, verdict } from './compare.js';
import type { Row } from './scenarios.js';

/** A results file as main.ts writes it, reduced to what a comparison reads. */
function doc(scenarios: { id: number; rows: Row[]; data?: Record<string, unknown> }[], extra: Record<string, unknown> = {}) {
  return asResults(
    { machine: { date: '2026-12-01', cpus: 2 }, source: { commit: 'abc1234', dirty: [] }, args: { quick: false }, scenarios, ...extra },
    'test',
  );
}

const latency = (p50: string, ratio: string): Row[] => [
  {
    scenario: '1 latency (300 sequential runs each)',
    metric: 'p50 publish→result (ms)',
    bosun: p50,
    floor: '14.5',
    ratio,
    target: '≤ 2.00× floor',
    result: 'met',
  },
  { scenario: '', metric: 'p99 publish→result (ms)', bosun: '66.2', floor: '36.1', ratio: '1.84×', target: '—', result: 'n/a' },
];

describe('row keys', () => {
  it('leave out the parenthesized counts that move between runs, keep units', () => {
    expect(rowKey(4, '2 specialist processes: incidents/s (peak active 250)')).toBe('4:2 specialist processes: incidents/s');
    expect(rowKey(5, 'kill → next model.called elsewhere, p50 (s) [52/52 runs]')).toBe('5:kill → next model.called elsewhere, p50 (s)');
    expect(rowKey(3, 'specialist peak RSS (MB; VmHWM)')).toBe('3:specialist peak rss (mb; vmhwm)');
  });

  it('are unique within a scenario and keep a row’s own key', () => {
    const rows: Row[] = [
      { scenario: '', metric: 'a', bosun: '1' },
      { scenario: '', metric: 'a', bosun: '2' },
      { scenario: '', metric: 'b', bosun: '3', key: '9:mine' },
    ];
    assignKeys([{ id: 7, rows }]);
    expect(rows.map((r) => r.key)).toEqual(['7:a', '7:a#2', '9:mine']);
  });
});

describe('parseFigure', () => {
  it('reads the number a cell stands for', () => {
    expect(parseFigure('32.7')).toBe(32.7);
    expect(parseFigure('2.26×')).toBe(2.26);
    expect(parseFigure('1.87× vs 1')).toBe(1.87);
    expect(parseFigure('297 (+194)')).toBe(297);
    expect(parseFigure('150/300')).toBe(0.5);
    expect(parseFigure('18.70 − 14.00 = 4.70')).toBe(4.7);
    expect(parseFigure('-0.25')).toBe(-0.25);
    expect(parseFigure('—')).toBeNaN();
    expect(parseFigure(undefined)).toBeNaN();
  });
});

describe('direction', () => {
  it('comes from the row, then the target, then the metric’s words', () => {
    expect(direction({ metric: 'x', better: 'higher', target: '≤ 1' })).toBe('higher');
    expect(direction({ metric: 'x', target: '≤ 2.00× floor' })).toBe('lower');
    expect(direction({ metric: 'x', target: '< 400 MB' })).toBe('lower');
    expect(direction({ metric: 'x', target: '≥ 0.50× floor' })).toBe('higher');
    expect(direction({ metric: 'runs completed after the kill', target: 'all' })).toBe('higher');
    expect(direction({ metric: 'incidents/s, first publish→last result' })).toBe('higher');
    expect(direction({ metric: 'wall time (s)', target: '—' })).toBe('lower');
    expect(direction({ metric: 'memory per in-flight run (KB)' })).toBe('lower');
    expect(direction({ metric: 'peak kubernetes tasks active at once' })).toBeUndefined();
  });
});

describe('verdict', () => {
  it('says better or worse by the direction, same within 5 %, changed without a direction', () => {
    expect(verdict('k', 100, 120, 'lower')).toEqual({ pct: 20, verdict: 'worse' });
    expect(verdict('k', 100, 80, 'lower')).toEqual({ pct: -20, verdict: 'better' });
    expect(verdict('k', 100, 120, 'higher')).toEqual({ pct: 20, verdict: 'better' });
    expect(verdict('k', 100, 104, 'higher')).toEqual({ pct: 4, verdict: 'same' });
    expect(verdict('k', 100, 150, undefined)).toEqual({ pct: 50, verdict: 'changed' });
    expect(verdict('k', 0, 0, 'lower')).toEqual({ pct: 0, verdict: 'same' });
    expect(verdict('k', 0, 3, 'lower').verdict).toBe('worse');
    expect(verdict('k', 0, 3, 'lower').pct).toBeNaN();
  });

  it('judges a soak slope on its absolute change (0.5 MB/min)', () => {
    expect(verdict('9:rss slope:coordinator', 0.1, 0.4, 'lower').verdict).toBe('same');
    expect(verdict('9:rss slope:coordinator', 0.1, 1.2, 'lower').verdict).toBe('worse');
  });
});

describe('comparing two results files', () => {
  it('pairs the rows by key, with their ratios, Redis calls and CPU per incident', () => {
    const old = doc(
      [
        { id: 1, rows: latency('30.0', '2.07×') },
        {
          id: 2,
          rows: [
            { scenario: '2', metric: 'incidents/s, first publish→last result', bosun: '140.0', ratio: '0.37×', target: '≥ 0.50× floor' },
          ],
          data: {
            bosun: { cpu: { cpuSeconds: { coordinator: 10, 'bench (this process)': 5 } }, statuses: { completed: 1000 }, failed: 0 },
          },
        },
      ],
      { commandStats: { totalCalls: 100_000, incidents: 1000, source: 'scenario 2' } },
    );
    const now = doc(
      [
        { id: 1, rows: latency('36.0', '2.48×') },
        {
          id: 2,
          rows: [
            { scenario: '2', metric: 'incidents/s, first publish→last result', bosun: '150.0', ratio: '0.40×', target: '≥ 0.50× floor' },
          ],
          data: { bosun: { cpu: { cpuSeconds: { coordinator: 8 } }, statuses: { completed: 1000 }, failed: 0 } },
        },
      ],
      { commandStats: { totalCalls: 100_000, incidents: 1000, source: 'scenario 2' } },
    );
    const { changes, onlyOld, onlyNew } = compareFigures(figures(old), figures(now));
    const by = new Map(changes.map((c) => [c.key, c]));
    expect(by.get('1:p50 publish→result (ms)')).toMatchObject({ pct: 20, verdict: 'worse' });
    expect(by.get('1:p50 publish→result (ms) (ratio)')?.verdict).toBe('worse');
    expect(by.get('1:p99 publish→result (ms)')?.verdict).toBe('same');
    expect(by.get('2:incidents/s, first publish→last result')?.verdict).toBe('better');
    expect(by.get('2:cpu ms per incident:coordinator')).toMatchObject({ pct: -20, verdict: 'better' });
    expect(by.get('redis:calls per incident:2')?.verdict).toBe('same');
    expect(by.has('2:cpu ms per incident:bench (this process)')).toBe(false);
    expect(onlyOld).toEqual([]);
    expect(onlyNew).toEqual([]);

    // Redis commands counted in scenario 1 (sequential) are another figure than in scenario 2 (bulk).
    const s1 = doc([], { commandStats: { totalCalls: 50_000, incidents: 100, source: 'scenario 1 (100 sequential incidents)' } });
    const cross = compareFigures(figures(old), figures(s1));
    expect(cross.changes).toEqual([]);
    expect(cross.onlyNew.map((f) => f.key)).toEqual(['redis:calls per incident:1']);

    const text = compareText(old, now, { old: 'old.json', new: 'new.json' }).join('\n');
    expect(text).toMatch(/1 p50 publish→result \(ms\)\s+\|\s+30\.0 \|\s+36\.0 \|\s+\+20\.0 % \| ↑ worse/);
    expect(text).toMatch(/\d+ worse, \d+ better/);
    expect(text).toContain('worse: 1 p50 publish→result (ms)');
  });

  it('lists the figures only one side has, and says when none are shared', () => {
    const old = doc([{ id: 1, rows: latency('30.0', '2.07×') }]);
    const now = doc([
      { id: 9, rows: [{ scenario: '9', metric: 'completed runs', bosun: '10/10', target: 'all', key: '9:completed runs' }] },
    ]);
    const text = compareText(old, now, { old: 'old.json', new: 'new.json' }).join('\n');
    expect(text).toContain('no figure in common (old has scenarios 1, new has 9)');
    expect(text).toContain('only in old (not measured now): 1 p50 publish→result (ms)');
    expect(text).toContain('only in new: 9 completed runs');
  });

  it('says when the runs were made with other arguments', () => {
    const old = doc([{ id: 1, rows: latency('30.0', '2.07×') }]);
    const now = doc([{ id: 1, rows: latency('30.0', '2.07×') }], { args: { quick: true } });
    expect(compareText(old, now, { old: 'a', new: 'b' }).join('\n')).toContain('other arguments (quick: false → true)');
  });

  it('refuses a file of another shape with a clear message, and skips malformed rows', () => {
    expect(() => asResults([], 'old.json')).toThrow(/old\.json: not a bench results file/);
    expect(() => asResults({ rows: [] }, 'old.json')).toThrow(/no "scenarios" list/);
    const odd = asResults(
      { scenarios: [{ id: 1, rows: [{ bosun: '3' }, null, { metric: 'p50 publish→result (ms)', bosun: '30' }] }, { name: 'no id' }] },
      'odd',
    );
    expect([...figures(odd).keys()]).toEqual(['1:p50 publish→result (ms)']);
  });
});
