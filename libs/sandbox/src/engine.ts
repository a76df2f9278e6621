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
import { timeLimitMessage, type SandboxLimit, type SandboxLimits } from './limits.js';
import { prelude } from './prelude.js';
import type { NewValues, ThreadOutcome } from './protocol.js';
import { wasmApi, type WasmMemory, type WasmModule } from './wasm.js';

// This file runs inside a sandbox thread (thread.ts), never on the process's own thread.

/** What a script run needs of the thread around it. */
export interface EngineChannel {
  /** Sends the script's `index`-th `call_tool` and waits for its answer (JSON); undefined: stop the script (the host failed). */
  call(index: number, name: string, args: string, values: NewValues): Promise<string | undefined>;
  /** What the script printed (one `console.log`). */
  log(text: string): void;
  /** The script starts or resumes computing: `ranMs` is the time it has run so far. */
  running(ranMs: number): void;
  /** The script waits for a tool, or has ended. */
  idle(): void;
  /** True when the pool asked this script to stop (read by the interrupt handler, so it works while the script computes). */
  stopRequested(): boolean;
}

/** One script to run, with what a replay gives back first. */
export interface EngineJob {
  script: string;
  tools: readonly string[];
  limits: SandboxLimits;
  clock: number[];
  random: number[];
}

/** How a run ended, with the new values it read after its last call. */
export interface EngineResult {
  outcome: ThreadOutcome;
  toolCalls: number;
  values: NewValues;
}

const PAGE = 65_536;
/** The memory a module starts with (the build's initial memory); a script's `memoryBytes` comes on top of it. */
export const BASE_MEMORY_BYTES = 16 * 1024 * 1024;
/** A module whose memory grew past this is dropped after its script, so that the memory is given back. */
const REUSE_MAX_BYTES = BASE_MEMORY_BYTES + 8 * 1024 * 1024;
/** The longest tool name and arguments (as JSON) a call may carry out of the interpreter. */
const MAX_NAME_CHARS = 256;
const MAX_ARGS_CHARS = 1024 * 1024;
/** Modules not in use kept for the next scripts; a new one costs a few ms (the compiled code is shared). */
const MAX_IDLE = 8;

/** An interpreter module and the cap on the growth of its memory (the running script's). */
interface Engine {
  module: QuickJSAsyncWASMModule;
  memory: WasmMemory;
  cap: { bytes: number };
}

/**
 * The interpreter modules of one thread. A module hosts one suspended script at a time
 * (asyncify), so each running script takes its own; idle ones are reused.
 */
export class Engines {
  private readonly idle: Engine[] = [];
  private readonly variant: QuickJSAsyncVariant;
  private pendingMemory: WasmMemory | undefined;
  private creating: Promise<unknown> = Promise.resolve();
  created = 0;
  droppedBytes = 0;

  constructor(wasm: WasmModule) {
    // The engine's own messages (an assertion while freeing a runtime broken by a stack
    // overflow) are dropped, and such a module is never reused.
    const quiet = { print: () => undefined, printErr: () => undefined };
    this.variant = newVariant(releaseAsyncify as unknown as QuickJSAsyncVariant, {
      wasmModule: wasm,
      wasmMemory: () => {
        if (!this.pendingMemory) return Promise.reject(new Error('an interpreter module was created outside Engines.acquire'));
        return Promise.resolve(this.pendingMemory);
      },
      emscriptenModule: quiet as NonNullable<Parameters<typeof newVariant>[1]['emscriptenModule']>,
    });
  }

  idleCount(): number {
    return this.idle.length;
  }

  async acquire(): Promise<Engine> {
    const reused = this.idle.pop();
    if (reused) return reused;
    // One module at a time: the variant's memory loader hands out the memory made for this one.
    const made = this.creating.then(() => this.create());
    this.creating = made.catch(() => undefined); // A failed creation is the caller's error; the next one may try again.
    return made;
  }

  private async create(): Promise<Engine> {
    // Every byte of the interpreter (objects, strings, arrays and ArrayBuffers, which QuickJS's
    // own limit does not count) lives in this memory: a growth past the cap fails, and the
    // allocation that needed it is an out-of-memory error in the script.
    const cap = { bytes: Number.POSITIVE_INFINITY };
    const memory = new wasmApi.Memory({ initial: BASE_MEMORY_BYTES / PAGE, maximum: 32_768 });
    const grow = memory.grow.bind(memory);
    Object.defineProperty(memory, 'grow', {
      value: (pages: number) => {
        if (memory.buffer.byteLength + pages * PAGE > cap.bytes) throw new RangeError('the script reached its memory limit');
        return grow(pages);
      },
    });
    this.pendingMemory = memory;
    try {
      const module = await newQuickJSAsyncWASMModuleFromVariant(this.variant);
      this.created++;
      deferRuntimeRelease(module);
      return { module, memory, cap };
    } finally {
      this.pendingMemory = undefined;
    }
  }

  release(engine: Engine, clean: boolean): void {
    const size = engine.memory.buffer.byteLength;
    if (clean && size <= REUSE_MAX_BYTES && this.idle.length < MAX_IDLE) {
      this.idle.push(engine);
      return;
    }
    // Dropped: its memory goes with it (the pool retires a thread that dropped much, which
    // gives every byte back).
    if (size > BASE_MEMORY_BYTES) this.droppedBytes += size;
  }
}

/**
 * Works around the order in which quickjs-emscripten-core 0.32's asyncify module frees a runtime:
 * it forgets the runtime's callbacks before freeing it, so the host functions freed with it find
 * no runtime, the free aborts half-way and the module cannot be reused. The callbacks are
 * forgotten just after the runtime is freed instead.
 */
function deferRuntimeRelease(module: QuickJSAsyncWASMModule): void {
  const callbacks = (module as unknown as { callbacks?: { deleteRuntime?: (rt: unknown) => void } }).callbacks;
  const remove = callbacks?.deleteRuntime?.bind(callbacks);
  if (!callbacks || !remove) return;
  callbacks.deleteRuntime = (rt) => queueMicrotask(() => remove(rt));
}

/** A run's mutable state, shared by the host functions and the interrupt handler. */
class RunState {
  /** When the current slice of computing started, minus the time already run. */
  private origin = Date.now();
  private waiting = false;
  toolCalls = 0;
  consoleChars = 0;
  clockAt = 0;
  randomAt = 0;
  readonly fresh: NewValues = { clock: [], random: [] };
  /** Set when the script must stop now: a limit it cannot catch, or the host's or the pool's stop. */
  abort: { limit: SandboxLimit; message: string } | { stopped: true } | undefined;

  constructor(
    readonly job: EngineJob,
    readonly channel: EngineChannel,
  ) {}

  runningMs(): number {
    return Date.now() - this.origin;
  }

  start(): void {
    this.origin = Date.now();
    this.channel.running(0);
  }

  suspend(): number {
    this.waiting = true;
    this.channel.idle();
    return this.runningMs();
  }

  resume(ranMs: number): void {
    this.waiting = false;
    this.origin = Date.now() - ranMs;
    this.channel.running(ranMs);
  }

  shouldInterrupt(): boolean {
    if (this.abort) return true;
    if (this.channel.stopRequested()) {
      this.abort = { stopped: true };
      return true;
    }
    if (!this.waiting && this.runningMs() > this.job.limits.timeMs) {
      this.abort = { limit: 'time', message: timeLimitMessage(this.job.limits.timeMs) };
      return true;
    }
    return false;
  }

  stop(limit: SandboxLimit, message: string): never {
    this.abort ??= { limit, message };
    throw new Error(message);
  }

  /** New values of the clock and Math.random since the last report, handed over once. */
  takeValues(): NewValues {
    const values = { clock: this.fresh.clock.splice(0), random: this.fresh.random.splice(0) };
    return values;
  }
}

/**
 * Runs one script in a fresh QuickJS context of a module of this thread: nothing of the host is
 * reachable (no `require`, `import`, `process`, file system, network or environment), tools
 * only through `call_tool`, and the limits apply.
 */
export async function runInEngine(engines: Engines, job: EngineJob, channel: EngineChannel): Promise<EngineResult> {
  const state = new RunState(job, channel);
  const engine = await engines.acquire();
  engine.cap.bytes = BASE_MEMORY_BYTES + job.limits.memoryBytes;
  const runtime = engine.module.newRuntime();
  runtime.setMemoryLimit(job.limits.memoryBytes);
  runtime.setMaxStackSize(job.limits.stackBytes);
  const context = runtime.newContext();
  let clean = false;
  let outcome: ThreadOutcome;
  try {
    outcome = await evaluate(context, state);
    clean = true;
  } catch (err) {
    // The engine's own recursion (deep JSON, regular expressions) can exhaust the thread's stack
    // before QuickJS's stack limit sees it: the script failed, not the host.
    if (!(err instanceof RangeError && /call stack/i.test(err.message))) throw err;
    outcome = state.abort
      ? abortOutcome(state.abort)
      : {
          kind: 'script_error',
          message: 'RangeError: the script went too deep for the interpreter (stack limit); it was stopped',
          limit: 'stack',
        };
  } finally {
    channel.idle();
    try {
      context.dispose();
      runtime.dispose();
    } catch {
      clean = false; // A module whose runtime could not be freed is not reused.
    }
    engine.cap.bytes = Number.POSITIVE_INFINITY;
  }
  engines.release(engine, clean);
  return { outcome, toolCalls: state.toolCalls, values: state.takeValues() };
}

function abortOutcome(abort: NonNullable<RunState['abort']>): ThreadOutcome {
  return 'stopped' in abort ? { kind: 'stopped' } : { kind: 'script_error', message: abort.message, limit: abort.limit };
}

async function evaluate(context: QuickJSAsyncContext, state: RunState): Promise<ThreadOutcome> {
  installHost(context, state);
  const setup = context.evalCode(prelude(state.job.tools), 'prelude.js');
  if (setup.error) {
    const detail = JSON.stringify(context.dump(setup.error)).slice(0, 1_000);
    setup.error.dispose();
    throw new Error(`the sandbox could not be prepared: ${detail}`);
  }
  // The prelude's own JSON.stringify and error reader, taken before the script could replace them.
  const encode = context.getProp(setup.value, 0);
  const describe = context.getProp(setup.value, 1);
  setup.value.dispose();
  const describeError = (handle: QuickJSHandle) => readError(context, describe, handle);
  try {
    state.start();
    context.runtime.setInterruptHandler(() => state.shouldInterrupt());
    const run = await context.evalCodeAsync(`(function () {\n${state.job.script}\n})()`, 'script.js');
    if (run.error) {
      const message = state.abort ? '' : describeError(run.error);
      run.error.dispose();
      if (state.abort) return abortOutcome(state.abort);
      return { kind: 'script_error', message, ...errorLimit(message) };
    }
    try {
      // Written out under the same interrupt handler: a `toJSON` of the script is the script's time.
      const outcome = state.abort ? abortOutcome(state.abort) : resultOf(context, run.value, { encode, describeError }, state.job.limits);
      return state.abort ? abortOutcome(state.abort) : outcome;
    } finally {
      if (run.value.alive) run.value.dispose();
    }
  } finally {
    state.channel.idle();
    encode.dispose();
    describe.dispose();
  }
}

/**
 * The script's returned value as JSON, measured inside the interpreter before any of it crosses:
 * a result too large for the output limit (or too large to be written out at all within the
 * memory limit) is the output-limit error, never a half-read value.
 */
function resultOf(
  context: QuickJSAsyncContext,
  value: QuickJSHandle,
  prelude: { encode: QuickJSHandle; describeError: (h: QuickJSHandle) => string },
  limits: SandboxLimits,
): ThreadOutcome {
  const { encode, describeError } = prelude;
  const promise = context.getPromiseState(value);
  if (!(promise.type === 'fulfilled' && promise.notAPromise)) {
    if (promise.type === 'fulfilled') promise.value.dispose();
    if (promise.type === 'rejected') promise.error.dispose();
    return {
      kind: 'script_error',
      message: 'The script returned a Promise: call_tool is synchronous here, so write plain code without async/await.',
    };
  }
  const json = context.callFunction(encode, context.undefined, value);
  if (json.error) {
    const message = describeError(json.error);
    json.error.dispose();
    if (/out of memory/i.test(message))
      return {
        kind: 'script_error',
        message: `the script's result is too large to be written as JSON within the memory limit; the limit is ${limits.maxOutputChars} characters (output limit)`,
        limit: 'output',
      };
    return { kind: 'script_error', message: `the script's result could not be written as JSON: ${message}` };
  }
  try {
    // JSON.stringify gives undefined for undefined (and functions): the script returned nothing.
    if (context.typeof(json.value) !== 'string') return { kind: 'result' };
    const length = lengthOf(context, json.value);
    if (length > limits.maxOutputChars)
      return {
        kind: 'script_error',
        message: `the script's result is ${length} characters as JSON; the limit is ${limits.maxOutputChars} (output limit)`,
        limit: 'output',
      };
    return { kind: 'result', json: context.getString(json.value) };
  } finally {
    json.value.dispose();
  }
}

/** The raw host functions the prelude takes into its closure. */
function installHost(context: QuickJSAsyncContext, state: RunState): void {
  const { job, channel } = state;
  const fns: Record<string, QuickJSHandle> = {
    __bosun_call: context.newAsyncifiedFunction('call', async (nameH, argsH) => {
      // Measured before they are read out: what crosses into this thread's heap stays small.
      const nameLength = lengthOf(context, nameH);
      const argsLength = lengthOf(context, argsH);
      if (nameLength > MAX_NAME_CHARS)
        return context.newString(JSON.stringify({ error: `call_tool: a tool name has at most ${MAX_NAME_CHARS} characters` }));
      if (argsLength > MAX_ARGS_CHARS)
        return context.newString(
          JSON.stringify({
            error: `call_tool: the arguments are ${argsLength} characters as JSON; a call takes at most ${MAX_ARGS_CHARS}`,
          }),
        );
      return context.newString(await callTool(state, context.getString(nameH), context.getString(argsH)));
    }),
    __bosun_log: context.newFunction('log', (textH) => {
      // Measured before it is read out of the interpreter: a 50 MB line never crosses.
      const length = lengthOf(context, textH);
      const room = job.limits.maxConsoleChars - state.consoleChars;
      if (length + 1 > room) state.stop('console', `console output exceeds ${job.limits.maxConsoleChars} characters (console limit)`);
      state.consoleChars += length + 1;
      channel.log(`${context.getString(textH)}\n`);
    }),
    __bosun_now: context.newFunction('now', () => context.newNumber(hostValue(state, 'clock'))),
    __bosun_random: context.newFunction('random', () => context.newNumber(hostValue(state, 'random'))),
  };
  for (const [name, fn] of Object.entries(fns)) {
    context.setProp(context.global, name, fn);
    fn.dispose();
  }
}

/** The clock or Math.random: the recorded values first (a replay), then new ones, which are reported. */
function hostValue(state: RunState, kind: 'clock' | 'random'): number {
  const at = kind === 'clock' ? state.clockAt++ : state.randomAt++;
  const known = state.job[kind][at];
  if (known !== undefined) return known;
  const value = kind === 'clock' ? Date.now() : Math.random();
  state.fresh[kind].push(value);
  return value;
}

/** One `call_tool`, counted against the limit; the time it waits is not script time. */
async function callTool(state: RunState, name: string, argsJson: string): Promise<string> {
  const { limits } = state.job;
  // A script being stopped (a limit, a host failure) runs no more tools, even if it caught the error.
  if (state.abort) throw new Error('the script is being stopped');
  const index = state.toolCalls;
  if (index >= limits.maxToolCalls)
    state.stop('tool_calls', `the script called more than ${limits.maxToolCalls} tools (tool-call limit); it was stopped`);
  const problem = argsProblem(argsJson);
  if (problem) return JSON.stringify({ error: problem });
  state.toolCalls++;
  const ran = state.suspend();
  const answer = await state.channel.call(index, name, argsJson, state.takeValues());
  state.resume(ran);
  if (answer === undefined) {
    state.abort ??= { stopped: true };
    throw new Error('the script is being stopped');
  }
  return answer;
}

const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

/** What is wrong with the arguments, or undefined when they are one plain JSON object. */
function argsProblem(json: string): string | undefined {
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
  return undefined;
}

/** A script error as text, read with the prelude's reader (bounded), never the error object itself. */
function readError(context: QuickJSAsyncContext, describe: QuickJSHandle, handle: QuickJSHandle): string {
  const text = context.callFunction(describe, context.undefined, handle);
  if (text.error) {
    text.error.dispose();
    // Reading the error failed (an out-of-memory error leaves no room): its kind is still known.
    return context.typeof(handle) === 'object' && isOutOfMemory(context, handle)
      ? 'InternalError: out of memory'
      : 'Error: the script failed and its error could not be read';
  }
  try {
    return context.typeof(text.value) === 'string' ? context.getString(text.value) : 'Error: the script failed';
  } finally {
    text.value.dispose();
  }
}

/** Whether an error is QuickJS's out-of-memory error (its name and message are short strings of the engine's own). */
function isOutOfMemory(context: QuickJSAsyncContext, handle: QuickJSHandle): boolean {
  const message = context.getProp(handle, 'message');
  try {
    return context.typeof(message) === 'string' && lengthOf(context, message) < 64 && /out of memory/i.test(context.getString(message));
  } finally {
    message.dispose();
  }
}

/** The `length` of a string handle, read inside the interpreter. */
function lengthOf(context: QuickJSAsyncContext, handle: QuickJSHandle): number {
  const length = context.getProp(handle, 'length');
  try {
    return context.getNumber(length);
  } finally {
    length.dispose();
  }
}

/** Memory and stack exhaustion are script errors that also name the limit reached. */
function errorLimit(message: string): { limit?: SandboxLimit } {
  if (/out of memory/i.test(message)) return { limit: 'memory' };
  if (/stack overflow|call stack size/i.test(message)) return { limit: 'stack' };
  return {};
}
