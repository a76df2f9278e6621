/** The console's stats page: figures computed from the latest runs (`RunControl.list`). */
import type { RunSummary } from '@bosun/transport';

/** What the stats page shows. */
export interface RunStats {
  /** Runs started in each of the last 10 minutes, oldest first. */
  perMinute: number[];
  /** Finished runs among those read, and their duration percentiles (ms); null without any. */
  finished: number;
  p50Ms: number | null;
  p99Ms: number | null;
  /** Runs that ended `partial` or `failed` (some part INCOMPLETE, or worse). */
  degradedRuns: number;
  byState: Record<string, number>;
}

const MINUTES = 10;

/** The nearest-rank percentile `p` (0..100) of sorted values. */
export function percentile(sorted: number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

export function runStats(runs: RunSummary[], now: number): RunStats {
  const perMinute = new Array<number>(MINUTES).fill(0);
  const durations: number[] = [];
  const byState: Record<string, number> = {};
  let degradedRuns = 0;
  for (const r of runs) {
    byState[r.state] = (byState[r.state] ?? 0) + 1;
    if (r.state === 'partial' || r.state === 'failed') degradedRuns++;
    const started = Date.parse(r.createdAt);
    const ago = Math.floor((now - started) / 60_000);
    if (ago >= 0 && ago < MINUTES) perMinute[MINUTES - 1 - ago]!++;
    if (r.finishedAt) durations.push(Math.max(0, Date.parse(r.finishedAt) - started));
  }
  durations.sort((a, b) => a - b);
  return {
    perMinute,
    finished: durations.length,
    p50Ms: percentile(durations, 50),
    p99Ms: percentile(durations, 99),
    degradedRuns,
    byState,
  };
}
