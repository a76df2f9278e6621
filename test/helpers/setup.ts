import { beforeEach } from 'vitest';

/** Set by test/helpers/processes.ts once a file starts a service: prints their tails. */
declare global {
  var bosunPrintTails: ((title: string) => void) | undefined;
}

// Loaded into every test file (vitest.config.ts `setupFiles`), so it imports nothing heavy: when
// a test fails, the output its services printed since the last failure (their bounded tails)
// is written to stderr under each process's name, so a failure in CI comes with what the
// services said.
beforeEach(({ onTestFailed, task }) => {
  onTestFailed(() => globalThis.bosunPrintTails?.(task.fullName ?? task.name));
});
