import type { SandboxLimit } from './limits.js';
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
