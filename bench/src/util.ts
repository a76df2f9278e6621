import { randomBytes } from 'node:crypto';

/** Resolves after `ms` milliseconds (unref'd: never keeps the process alive by itself). */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/** A fresh BOSUN_PREFIX for one scenario: `bench-<12 hex>`. */
export function randomPrefix(tag = 'bench'): string {
  return `${tag}-${randomBytes(6).toString('hex')}`;
}

/** The p-th percentile (0..100) of `values`, nearest-rank on a sorted copy; NaN when empty. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1]!;
}

export function mean(values: readonly number[]): number {
  return values.length === 0 ? Number.NaN : values.reduce((a, b) => a + b, 0) / values.length;
}

/** Formats a number with `digits` decimals, or `—` when not finite. */
export function fmt(n: number | undefined, digits = 1): string {
  return n === undefined || !Number.isFinite(n) ? '—' : n.toFixed(digits);
}

export function mb(kb: number): number {
  return kb / 1024;
}

/** Rejects with `message` after `ms`, unless `p` settles first. */
export async function withTimeout<T>(p: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(message)), ms);
        timer.unref();
      }),
    ]);
  } finally {
    if (timer) clearTimeout(timer);
  }
}

/** Set once SIGINT/SIGTERM arrives: every loop checks it and stops. */
export const abort = { requested: false, reason: '' };

export function checkAbort(): void {
  if (abort.requested) throw new Error(`aborted (${abort.reason})`);
}

/** Progress lines go to stderr so that stdout holds the report. */
export function note(message: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}
