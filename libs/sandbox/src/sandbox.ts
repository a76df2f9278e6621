import type { SandboxLimit, SandboxLimits } from './limits.js';
import { SandboxPool } from './pool.js';
import type { TaggedResult } from './tagged.js';

/** What a tool call answers the script: its result, or an error the script sees (and may catch) as a `ToolError`. */
export type ToolAnswer = { ok: unknown } | { error: string };

/**
 * What the sandbox asks of its host. A `callTool` that throws is a host failure: the script is
 * stopped at once (it cannot catch it) and the run throws that error.
 */
export interface SandboxHost {
  /** The tools the script may name in `call_tool`. */
  tools: readonly string[];
  /** Runs the `index`-th `call_tool` of the script (from 0); arguments are plain JSON. */
  callTool(name: string, args: Record<string, unknown>, index: number): Promise<ToolAnswer>;
  /**
   * The values of `Date.now()` (and `new Date()`) and `Math.random()` the script read on an
   * earlier run (a replay): given back in order, before new ones. None: every value is new.
   */
  recorded?: { clock: readonly number[]; random: readonly number[] };
  /**
   * Called with the new values the script read, in order, before each `callTool` and before the
   * run ends: the values an effect may depend on are known before the effect.
   */
  record?(values: { clock: number[]; random: number[] }): void;
}

/** How a script ended: its tagged result, or a script error (to be shown to the model as it is). */
export type ScriptOutcome =
  | { kind: 'result'; result: TaggedResult; console: string; toolCalls: number }
  | { kind: 'script_error'; message: string; limit?: SandboxLimit; console: string; toolCalls: number };

/** Options of one script run. */
export interface RunOptions {
  /**
   * Stops the script: at once when it computes (its thread is stopped if it does not stop within
   * a grace), or while it waits for a tool, once the call in flight has its answer (so that its
   * effect is known). The run then throws {@link SandboxAborted}.
   */
  signal?: AbortSignal;
}

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
