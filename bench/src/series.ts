/**
 * Pure arithmetic of the soak (`--soak`): durations, the warm-up, the least-squares slope of a
 * memory series and the per-bucket summaries. No I/O here: see soak.ts for the run itself.
 */
import { mean, percentile } from './util.js';

/** One reading: when (Date.now() ms) and how much (kB). RssSampler's samples have this shape. */
export interface Sample {
  t: number;
  kb: number;
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/**
 * A duration written as `90s`, `10m`, `1h`, `1m30s` or `500ms`, in milliseconds. Throws on
 * anything else (a bare number is refused: `10` could mean seconds or minutes).
 */
export function parseDuration(text: string): number {
  const trimmed = text.trim();
  if (!/^(\d+(\.\d+)?(ms|s|m|h))+$/.test(trimmed)) {
    throw new Error(`"${text}" is not a duration: write it as 90s, 10m, 1h or 1m30s`);
  }
  let ms = 0;
  for (const m of trimmed.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)) ms += Number(m[1]) * UNIT_MS[m[2]!]!;
  return Math.round(ms);
}

/**
 * How much of a soak counts as warm-up (start-up allocations, JIT, pools filling): the larger of
 * its first 20 % and its first minute, but never more than half of it.
 */
export function warmupMs(durationMs: number): number {
  return Math.max(0.2 * durationMs, Math.min(60_000, 0.5 * durationMs));
}

/**
 * Least-squares slope of a memory series, in MB per minute, over the samples taken at or after
 * `fromT`. NaN when fewer than 3 samples qualify or they all share one instant.
 */
export function slopeMbPerMin(samples: readonly Sample[], fromT = -Infinity): { mbPerMin: number; samples: number } {
  const used = samples.filter((s) => s.t >= fromT && Number.isFinite(s.kb));
  if (used.length < 3) return { mbPerMin: Number.NaN, samples: used.length };
  // x in minutes from the first sample used, y in MB: the slope comes out in MB/min directly.
  const x = used.map((s) => (s.t - used[0]!.t) / 60_000);
  const y = used.map((s) => s.kb / 1024);
  const mx = mean(x);
  const my = mean(y);
  let sxy = 0;
  let sxx = 0;
  for (let i = 0; i < used.length; i++) {
    sxy += (x[i]! - mx) * (y[i]! - my);
    sxx += (x[i]! - mx) ** 2;
  }
  return { mbPerMin: sxx > 0 ? sxy / sxx : Number.NaN, samples: used.length };
}

/** The width of one bucket of the printed series: a tenth of the soak, 10 s to 60 s. */
export function bucketMs(durationMs: number): number {
  return Math.min(60_000, Math.max(10_000, Math.ceil(durationMs / 10 / 1_000) * 1_000));
}

/** The mean RSS (MB) of each bucket of `widthMs` from `t0`; NaN for a bucket with no sample. */
export function rssBuckets(samples: readonly Sample[], t0: number, widthMs: number, count: number): number[] {
  const sums = Array.from({ length: count }, () => ({ kb: 0, n: 0 }));
  for (const s of samples) {
    const k = Math.floor((s.t - t0) / widthMs);
    if (k < 0 || k >= count) continue;
    sums[k]!.kb += s.kb;
    sums[k]!.n++;
  }
  return sums.map((b) => (b.n > 0 ? b.kb / b.n / 1024 : Number.NaN));
}

/** One published incident of the soak: when it was published (ms after the start) and its outcome. */
export interface SoakRun {
  at: number;
  /** Publish → result in ms; NaN when it failed or timed out. */
  ms: number;
  status: string;
}

/** Latency of one bucket: runs published in it, p50 and p99 publish → result of those that finished. */
export interface LatencyBucket {
  runs: number;
  failed: number;
  p50: number;
  p99: number;
}

/** Groups runs by publish time into buckets of `widthMs` and gives each one's p50 and p99. */
export function latencyBuckets(runs: readonly SoakRun[], widthMs: number, count: number): LatencyBucket[] {
  const groups: SoakRun[][] = Array.from({ length: count }, () => []);
  for (const r of runs) groups[Math.min(count - 1, Math.max(0, Math.floor(r.at / widthMs)))]!.push(r);
  return groups.map((g) => {
    const ms = g.filter((r) => Number.isFinite(r.ms)).map((r) => r.ms);
    return { runs: g.length, failed: g.length - ms.length, p50: percentile(ms, 50), p99: percentile(ms, 99) };
  });
}
