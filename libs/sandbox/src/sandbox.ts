// Its types are read as CommonJS; loaded as ESM, the default export is the variant itself.
import releaseAsyncify from '@jitl/quickjs-wasmfile-release-asyncify';
import {
  newQuickJSAsyncWASMModuleFromVariant,
  newVariant,
  type QuickJSAsyncContext,
  type QuickJSAsyncVariant,
  type QuickJSAsyncWASMModule,
  type QuickJSHandle,
} from 'quickjs-emscripten-core';
import { DEFAULT_SANDBOX_LIMITS, type SandboxLimit, type SandboxLimits } from './limits.js';
import { prelude } from './prelude.js';
import { readTagged, type TaggedResult } from './tagged.js';

/** What a tool call answers the script: its result, or an error the script sees (and may catch) as a `ToolError`. */
export type ToolAnswer = { ok: unknown } | { error: string };

/**
 * What the sandbox asks of its host. A method that throws is a host failure: the script is
 * stopped at once (it cannot catch it) and {@link runScript} throws that error.
 */
export interface SandboxHost {
  /** The tools the script may name in `call_tool`. */
  tools: readonly string[];
  /** Runs the `index`-th `call_tool` of the script (from 0); arguments are plain JSON. */
  callTool(name: string, args: Record<string, unknown>, index: number): Promise<ToolAnswer>;
  /** `Date.now()` and `new Date()` of the script. */
  now(): number;
  /** `Math.random()` of the script. */
  random(): number;
}

/** How a script ended: its tagged result, or a script error (to be shown to the model as it is). */
export type ScriptOutcome =
  | { kind: 'result'; result: TaggedResult; console: string; toolCalls: number }
  | { kind: 'script_error'; message: string; limit?: SandboxLimit; console: string; toolCalls: number };

/** Modules not in use. A module hosts one suspended script at a time (asyncify), so each run takes its own. */
const idle: QuickJSAsyncWASMModule[] = [];
const MAX_IDLE = 8;
let created = 0;

/** How many interpreter modules this process has created, and how many are idle (for tests and the bench). */
export function sandboxModules(): { created: number; idle: number } {
  return { created, idle: idle.length };
}

type EmscriptenModuleLoaderOptions = NonNullable<Parameters<typeof newVariant>[1]>['emscriptenModule'];

/**
 * The engine's own messages (an assertion while freeing a runtime broken by a stack overflow)
 * would go to the process's stderr: they are dropped, and such a module is never reused.
 */
const quiet = { print: () => undefined, printErr: () => undefined } as EmscriptenModuleLoaderOptions;
const variant = newVariant(releaseAsyncify as unknown as QuickJSAsyncVariant, { emscriptenModule: quiet });

async function acquire(): Promise<QuickJSAsyncWASMModule> {
  const reused = idle.pop();
  if (reused) return reused;
  const module = await newQuickJSAsyncWASMModuleFromVariant(variant);
  created++;
  deferRuntimeRelease(module);
  return module;
}

/**
 * Works around the order in which quickjs-emscripten-core 0.32's asyncify module frees a runtime:
 * it forgets the runtime's callbacks before freeing it, so the host functions freed with it find
 * no runtime, the free aborts half-way and the module cannot be reused (a new one costs ~100 ms of
 * CPU). The callbacks are forgotten just after the runtime is freed instead.
 */
function deferRuntimeRelease(module: QuickJSAsyncWASMModule): void {
  const callbacks = (module as unknown as { callbacks?: { deleteRuntime?: (rt: unknown) => void } }).callbacks;
  const remove = callbacks?.deleteRuntime?.bind(callbacks);
  if (!callbacks || !remove) return;
  callbacks.deleteRuntime = (rt) => queueMicrotask(() => remove(rt));
}

/** A run's mutable state, shared by the host functions and the interrupt handler. */
class RunState {
  started = Date.now();
  toolWaitMs = 0;
  toolCalls = 0;
  console = '';
  /** Set when the script must stop now: a limit it cannot catch, or a host failure. */
  abort: { limit: SandboxLimit; message: string } | { hostFailure: unknown } | undefined;

  constructor(readonly limits: SandboxLimits) {}

  runningMs(): number {
    return Date.now() - this.started - this.toolWaitMs;
  }

  shouldInterrupt(): boolean {
    if (this.abort) return true;
    if (this.runningMs() > this.limits.timeMs) {
      this.abort = { limit: 'time', message: `the script ran for more than ${this.limits.timeMs} ms (time limit); it was stopped` };
      return true;
    }
    return false;
  }

  stop(limit: SandboxLimit, message: string): never {
    this.abort ??= { limit, message };
    throw new Error(message);
  }

  fail(err: unknown): never {
    this.abort ??= { hostFailure: err };
    throw new Error('host failure');
  }
}

/**
 * Runs one script in a fresh QuickJS context: nothing of the host is reachable (no `require`,
 * `import`, `process`, file system, network or environment), tools only through `call_tool`, and
 * the limits apply. The script is the body of a function; it ends by returning a tagged result.
 * Throws only for a host failure (what the host threw); everything the script does wrong is a
 * `script_error` outcome.
 */
export async function runScript(script: string, host: SandboxHost, limits: Partial<SandboxLimits> = {}): Promise<ScriptOutcome> {
  const state = new RunState({ ...DEFAULT_SANDBOX_LIMITS, ...limits });
  const module = await acquire();
  const runtime = module.newRuntime();
  runtime.setMemoryLimit(state.limits.memoryBytes);
  runtime.setMaxStackSize(state.limits.stackBytes);
  const context = runtime.newContext();
  let clean = false;
  try {
    const outcome = await evaluate(context, script, host, state);
    clean = true;
    return outcome;
  } catch (err) {
    // The engine's own recursion (deep JSON, regular expressions) can exhaust the process's stack
    // before QuickJS's stack limit sees it: the script failed, not the host.
    if (!(err instanceof RangeError && /call stack/i.test(err.message)) || (state.abort && 'hostFailure' in state.abort)) throw err;
    const message = 'RangeError: the script went too deep for the interpreter (stack limit); it was stopped';
    return { kind: 'script_error', message, limit: 'stack', console: state.console, toolCalls: state.toolCalls };
  } finally {
    try {
      context.dispose();
      runtime.dispose();
    } catch {
      clean = false; // A module whose runtime could not be freed is not reused.
    }
    if (clean && idle.length < MAX_IDLE) idle.push(module);
  }
}

async function evaluate(context: QuickJSAsyncContext, script: string, host: SandboxHost, state: RunState): Promise<ScriptOutcome> {
  installHost(context, host, state);
  const setup = context.evalCode(prelude(host.tools), 'prelude.js');
  if (setup.error) {
    const detail = describeError(context, setup.error);
    setup.error.dispose();
    throw new Error(`the sandbox could not be prepared: ${detail}`);
  }
  setup.value.dispose();
  // The script's time starts now.
  state.started = Date.now();
  context.runtime.setInterruptHandler(() => state.shouldInterrupt());
  const run = await context.evalCodeAsync(`(function () {\n${script}\n})()`, 'script.js');
  const base = { console: state.console, toolCalls: state.toolCalls };
  const abort = state.abort;
  if (abort && 'hostFailure' in abort) {
    (run.error ?? run.value).dispose();
    throw abort.hostFailure;
  }
  if (run.error) {
    const message = describeError(context, run.error);
    run.error.dispose();
    if (abort) return { kind: 'script_error', message: abort.message, limit: abort.limit, ...base };
    return { kind: 'script_error', message, ...errorLimit(message), ...base };
  }
  const value = dumpValue(context, run.value);
  if (run.value.alive) run.value.dispose();
  if (!value.ok) return { kind: 'script_error', message: value.message, ...base };
  if (value.json.length > state.limits.maxOutputChars) {
    const message = `the script's result is ${value.json.length} characters as JSON; the limit is ${state.limits.maxOutputChars} (output limit)`;
    return { kind: 'script_error', message, limit: 'output', ...base };
  }
  const tagged = readTagged(value.value);
  if ('problem' in tagged) return { kind: 'script_error', message: tagged.problem, ...base };
  return { kind: 'result', result: tagged, ...base };
}

/** The raw host functions the prelude takes into its closure. */
function installHost(context: QuickJSAsyncContext, host: SandboxHost, state: RunState): void {
  const fns: Record<string, QuickJSHandle> = {
    __bosun_call: context.newAsyncifiedFunction('call', async (nameH, argsH) => {
      const name = context.getString(nameH);
      const argsJson = context.getString(argsH);
      return context.newString(await callTool(host, state, name, argsJson));
    }),
    __bosun_log: context.newFunction('log', (textH) => {
      const text = context.getString(textH);
      const room = state.limits.maxConsoleChars - state.console.length;
      if (text.length + 1 > room)
        state.stop('console', `console output exceeds ${state.limits.maxConsoleChars} characters (console limit)`);
      state.console += `${text}\n`;
    }),
    __bosun_now: context.newFunction('now', () => context.newNumber(hostValue(state, () => host.now()))),
    __bosun_random: context.newFunction('random', () => context.newNumber(hostValue(state, () => host.random()))),
  };
  for (const [name, fn] of Object.entries(fns)) {
    context.setProp(context.global, name, fn);
    fn.dispose();
  }
}

function hostValue(state: RunState, get: () => number): number {
  try {
    return get();
  } catch (err) {
    return state.fail(err);
  }
}

/** One `call_tool`, counted against the limit; the time it waits is not script time. */
async function callTool(host: SandboxHost, state: RunState, name: string, argsJson: string): Promise<string> {
  // A script being stopped (a limit, a host failure) runs no more tools, even if it caught the error.
  if (state.abort) throw new Error('the script is being stopped');
  const index = state.toolCalls;
  if (index >= state.limits.maxToolCalls)
    state.stop('tool_calls', `the script called more than ${state.limits.maxToolCalls} tools (tool-call limit); it was stopped`);
  const args = parseArgs(argsJson);
  if (typeof args === 'string') return JSON.stringify({ error: args });
  state.toolCalls++;
  const waitStart = Date.now();
  let answer: ToolAnswer;
  try {
    answer = await host.callTool(name, args, index);
  } catch (err) {
    return state.fail(err);
  } finally {
    state.toolWaitMs += Date.now() - waitStart;
  }
  return JSON.stringify('error' in answer ? { error: answer.error } : { ok: answer.ok ?? null });
}

const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

/** The arguments as plain JSON; a string says what is wrong with them. */
function parseArgs(json: string): Record<string, unknown> | string {
  let bad: string | undefined;
  let args: unknown;
  try {
    args = JSON.parse(json, (key, value: unknown) => {
      if (FORBIDDEN_KEYS.has(key)) bad ??= key;
      return value;
    });
  } catch {
    return 'call_tool: the arguments are not plain JSON';
  }
  if (!args || typeof args !== 'object' || Array.isArray(args)) return 'call_tool: the arguments must be one object of named arguments';
  if (bad) return `call_tool: an argument may not be named "${bad}"`;
  return args as Record<string, unknown>;
}

function describeError(context: QuickJSAsyncContext, handle: QuickJSHandle): string {
  try {
    const e: unknown = context.dump(handle);
    if (e && typeof e === 'object' && 'message' in e) {
      const { name, message } = e as { name?: unknown; message?: unknown };
      return `${typeof name === 'string' ? name : 'Error'}: ${String(message)}`;
    }
    return `Uncaught ${typeof e === 'string' ? e : JSON.stringify(e)}`;
  } catch {
    return 'Error: the script failed and its error could not be read';
  }
}

/** Memory and stack exhaustion are script errors that also name the limit reached. */
function errorLimit(message: string): { limit?: SandboxLimit } {
  if (/out of memory/i.test(message)) return { limit: 'memory' };
  if (/stack overflow|call stack size/i.test(message)) return { limit: 'stack' };
  return {};
}

function dumpValue(
  context: QuickJSAsyncContext,
  handle: QuickJSHandle,
): { ok: true; value: unknown; json: string } | { ok: false; message: string } {
  try {
    const promise = context.getPromiseState(handle);
    if (!(promise.type === 'fulfilled' && promise.notAPromise)) {
      if (promise.type === 'fulfilled') promise.value.dispose();
      if (promise.type === 'rejected') promise.error.dispose();
      return {
        ok: false,
        message: 'The script returned a Promise: call_tool is synchronous here, so write plain code without async/await.',
      };
    }
    const value: unknown = context.dump(handle);
    return { ok: true, value, json: JSON.stringify(value) ?? 'null' };
  } catch (err) {
    return { ok: false, message: `the script's result could not be read as JSON: ${(err as Error).message}` };
  }
}
