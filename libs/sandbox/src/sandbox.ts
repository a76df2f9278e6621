import type { SandboxLimits } from './limits.js';
import { SandboxPool } from './pool.js';
import type { RunOptions, SandboxHost, ScriptOutcome } from './types.js';

let shared: SandboxPool | undefined;

/**
 * The pool {@link runScript} uses: created on first use with the default size, its threads
 * do not keep the process alive. A service that wants to close its threads makes its own.
 */
export function defaultSandboxPool(): SandboxPool {
  return (shared ??= new SandboxPool());
}

/**
 * Runs one script on the default pool ({@link SandboxPool.run}): nothing of the host is reachable,
 * tools only through `call_tool`, and the limits apply. Throws only for a host failure (what the
 * host threw), an abort, or a sandbox that cannot run; everything the script does wrong is a
 * `script_error` outcome.
 */
export function runScript(
  script: string,
  host: SandboxHost,
  limits: Partial<SandboxLimits> = {},
  options: RunOptions = {},
): Promise<ScriptOutcome> {
  return defaultSandboxPool().run(script, host, limits, options);
}
