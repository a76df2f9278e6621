import type { SandboxLimit, SandboxLimits } from './limits.js';
import type { WasmModule } from './wasm.js';

/**
 * The messages between a {@link SandboxPool} (the process's own thread) and one of its sandbox
 * threads. Every script gets an id unique in its thread; a script run again on another thread
 * (its thread was stopped) gets a new id there.
 */

/** What the thread is given when it starts. */
export interface ThreadData {
  /** The compiled interpreter, shared by every thread (only its instances are per thread). */
  wasm: WasmModule;
  /**
   * Shared with the pool, so that it can be read while the thread computes and cannot answer:
   * `Float64Array` [0] the id of the script running now (-1: none), [1] when it started, minus
   * the time it had already run (so `now - [1]` is its running time); `Int32Array` at byte 16:
   * [0] the id of a script the pool asks to stop (read by the interpreter's interrupt handler).
   */
  control: SharedArrayBuffer;
}

/** Byte size of {@link ThreadData.control}. */
export const CONTROL_BYTES = 24;

/** Pool → thread. */
export type ToThread =
  | {
      t: 'run';
      id: number;
      script: string;
      tools: readonly string[];
      limits: SandboxLimits;
      /** The values of `Date.now()` and `Math.random()` to give first, in order (a replay). */
      clock: number[];
      random: number[];
    }
  /** The answer to the script's `call_tool`: `{"ok":…}` or `{"error":…}` as JSON; absent: the host failed, stop the script. */
  | { t: 'answer'; id: number; json?: string }
  /** Stop the script now (it cannot catch it). */
  | { t: 'abort'; id: number };

/** New values of the clock and `Math.random()` the script read since the last message. */
export interface NewValues {
  clock: number[];
  random: number[];
}

/** What the script printed since the last message (carried by the next one, so that printing costs no message). */
export interface NewOutput {
  console: string;
}

/** How a script ended, as the thread reports it. */
export type ThreadOutcome =
  /** `json`: the returned value as JSON; absent when the script returned nothing. */
  | { kind: 'result'; json?: string }
  | { kind: 'script_error'; message: string; limit?: SandboxLimit }
  /** The host failed (the pool holds its error) or the pool asked the script to stop. */
  | { kind: 'stopped' }
  /** The sandbox itself failed (not the script): the run cannot give an outcome. */
  | { kind: 'failed'; message: string };

/** Thread → pool. */
export type FromThread =
  | { t: 'ready' }
  | ({ t: 'call'; id: number; index: number; name: string; args: string } & NewValues & NewOutput)
  | ({
      t: 'done';
      id: number;
      outcome: ThreadOutcome;
      toolCalls: number;
      /** The interpreter modules of the thread: created so far, idle now, and bytes of memory dropped with modules that grew. */
      modules: { created: number; idle: number; droppedBytes: number };
    } & NewValues &
      NewOutput)
  | { t: 'fatal'; message: string };
