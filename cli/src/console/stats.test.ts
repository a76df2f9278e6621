import { describe, expect, it } from 'vitest';
import type { RunSummary } from '@bosun/transport';
import { percentile, runStats } from './stats.js';

const NOW = Date.parse('2026-01-01T12:00:00Z');
const run = (state: RunSummary['state'], startedSecAgo: number, tookMs?: number): RunSummary => ({
  runId: `r${startedSecAgo}`,
  incidentId: 'i',
  state,
  createdAt: new Date(NOW - startedSecAgo * 1000).toISOString(),
  ...(tookMs === undefined ? {} : { finishedAt: new Date(NOW - startedSecAgo * 1000 + tookMs).toISOString() }),
  specialists: [],
});

describe('runStats', () => {
  it('counts runs per minute (last 10), percentiles of finished runs, and degraded runs', () => {
    const s = runStats(
      [run('completed', 10, 1000), run('partial', 30, 3000), run('failed', 125, 2000), run('active', 5), run('completed', 900, 9000)],
      NOW,
    );
    expect(s.perMinute).toEqual([0, 0, 0, 0, 0, 0, 0, 1, 0, 3]);
    expect(s.finished).toBe(4);
    expect(s.p50Ms).toBe(2000);
    expect(s.p99Ms).toBe(9000);
    expect(s.degradedRuns).toBe(2);
    expect(s.byState).toEqual({ completed: 2, partial: 1, failed: 1, active: 1 });
  });

  it('has no percentiles without finished runs', () => {
    expect(runStats([], NOW)).toMatchObject({ finished: 0, p50Ms: null, p99Ms: null, degradedRuns: 0 });
    expect(percentile([1, 2, 3, 4], 50)).toBe(2);
    expect(percentile([5], 99)).toBe(5);
  });
});
