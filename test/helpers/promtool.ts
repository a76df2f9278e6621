import { spawnSync } from 'node:child_process';

/** Prometheus' `promtool` (Debian's `prometheus` package; `.ci/run` installs it); BOSUN_PROMTOOL points elsewhere. */
export const PROMTOOL = process.env.BOSUN_PROMTOOL ?? 'promtool';

/** What one run of promtool printed, and how it exited. */
export interface PromtoolRun {
  code: number | null;
  /** Its standard output and standard error, as one text (promtool writes its findings to both). */
  output: string;
}

/**
 * Runs `promtool <args>` with `input` on its standard input. A missing promtool fails the test
 * with what to install: the check is never skipped silently.
 */
export function promtool(args: string[], options: { input?: string; cwd?: string } = {}): PromtoolRun {
  const run = spawnSync(PROMTOOL, args, { input: options.input ?? '', cwd: options.cwd, encoding: 'utf8', timeout: 30_000 });
  if (run.error) {
    const missing = (run.error as NodeJS.ErrnoException).code === 'ENOENT';
    throw new Error(
      missing
        ? `${PROMTOOL} is not installed: apt-get install prometheus (only its promtool is used), or set BOSUN_PROMTOOL`
        : `${PROMTOOL} ${args.join(' ')}: ${run.error.message}`,
    );
  }
  return { code: run.status, output: `${run.stdout}${run.stderr}`.trim() };
}
