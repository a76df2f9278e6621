import { describe, expect, it } from 'vitest';
import { bucketMs, latencyBuckets, parseDuration, rssBuckets, slopeMbPerMin, warmupMs, type Sample } from './series.js';

/** A sample every `everyMs` for `minutes`, RSS = base + slope × minutes (MB), with an optional wobble. */
function series(minutes: number, everyMs: number, baseMb: number, slopeMb: number, wobbleMb = 0): Sample[] {
  const out: Sample[] = [];
  for (let t = 0; t <= minutes * 60_000; t += everyMs) {
    const wobble = (out.length % 2 === 0 ? 1 : -1) * wobbleMb;
    out.push({ t: 1_000_000 + t, kb: (baseMb + (slopeMb * t) / 60_000 + wobble) * 1024 });
  }
  return out;
}

describe('parseDuration', () => {
  it('reads seconds, minutes, hours, milliseconds and combinations', () => {
    expect(parseDuration('90s')).toBe(90_000);
    expect(parseDuration('10m')).toBe(600_000);
    expect(parseDuration('1h')).toBe(3_600_000);
    expect(parseDuration('1m30s')).toBe(90_000);
    expect(parseDuration('1.5m')).toBe(90_000);
    expect(parseDuration('500ms')).toBe(500);
  });

  it('refuses a bare number, an unknown unit and text', () => {
    for (const bad of ['10', '10x', 'ten minutes', '', 'm', '-5s', '5 s']) expect(() => parseDuration(bad), bad).toThrow(/not a duration/);
  });
});

describe('warmupMs', () => {
  it('is the larger of 20 % and a minute, at most half the run', () => {
    expect(warmupMs(600_000)).toBe(120_000); // 10 min: 20 %
    expect(warmupMs(180_000)).toBe(60_000); // 3 min: the first minute
    expect(warmupMs(90_000)).toBe(45_000); // 90 s: half
  });
});

describe('slopeMbPerMin', () => {
  it('finds the slope of a straight line in MB/min', () => {
    expect(slopeMbPerMin(series(10, 2_000, 100, 0.5)).mbPerMin).toBeCloseTo(0.5, 6);
    expect(slopeMbPerMin(series(10, 2_000, 100, -2)).mbPerMin).toBeCloseTo(-2, 6);
    expect(slopeMbPerMin(series(10, 2_000, 100, 0)).mbPerMin).toBeCloseTo(0, 6);
  });

  it('is not thrown off by a symmetric wobble (GC)', () => {
    expect(slopeMbPerMin(series(10, 2_000, 100, 0.3, 5)).mbPerMin).toBeCloseTo(0.3, 1);
  });

  it('uses only the samples after the warm-up', () => {
    // A steep start (10 MB/min for 2 minutes), then flat: the slope after the warm-up is 0.
    const start = series(2, 2_000, 100, 10);
    const flat = series(8, 2_000, 120, 0).map((s) => ({ ...s, t: s.t + 2 * 60_000 + 2_000 }));
    const all = [...start, ...flat];
    expect(slopeMbPerMin(all).mbPerMin).toBeGreaterThan(1);
    const after = slopeMbPerMin(all, 1_000_000 + 2 * 60_000 + 2_000);
    expect(after.mbPerMin).toBeCloseTo(0, 6);
    expect(after.samples).toBe(flat.length);
  });

  it('says NaN with fewer than three samples or all at one instant', () => {
    expect(slopeMbPerMin([]).mbPerMin).toBeNaN();
    expect(slopeMbPerMin(series(10, 2_000, 100, 1).slice(0, 2)).mbPerMin).toBeNaN();
    expect(
      slopeMbPerMin([
        { t: 1, kb: 1 },
        { t: 1, kb: 2 },
        { t: 1, kb: 3 },
      ]).mbPerMin,
    ).toBeNaN();
  });
});

describe('the buckets of the series', () => {
  it('are a tenth of the run, 10 s to 60 s wide', () => {
    expect(bucketMs(600_000)).toBe(60_000);
    expect(bucketMs(3_600_000)).toBe(60_000);
    expect(bucketMs(90_000)).toBe(10_000);
    expect(bucketMs(200_000)).toBe(20_000);
  });

  it('average the RSS of each bucket and leave an empty one NaN', () => {
    const t0 = 1_000;
    const samples = [
      { t: t0, kb: 1024 },
      { t: t0 + 5_000, kb: 3072 },
      { t: t0 + 25_000, kb: 10 * 1024 },
      { t: t0 + 40_000, kb: 99 * 1024 }, // past the last bucket
    ];
    const b = rssBuckets(samples, t0, 10_000, 3);
    expect(b[0]).toBe(2);
    expect(b[1]).toBeNaN();
    expect(b[2]).toBe(10);
  });

  it('give the p50 and p99 of the runs published in each bucket, and count the failed ones', () => {
    const runs = [
      ...Array.from({ length: 100 }, (_, i) => ({ at: i * 10, ms: i + 1, status: 'completed' })),
      { at: 500, ms: Number.NaN, status: 'error: timed out' },
      { at: 10_500, ms: 7, status: 'completed' },
    ];
    const [first, second] = latencyBuckets(runs, 10_000, 2);
    expect(first).toEqual({ runs: 101, failed: 1, p50: 50, p99: 99 });
    expect(second).toEqual({ runs: 1, failed: 0, p50: 7, p99: 7 });
  });
});
