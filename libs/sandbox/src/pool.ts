import { readFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { BosunError, errorMessage } from '@bosun/contract';
import { DEFAULT_SANDBOX_LIMITS, timeLimitMessage, type SandboxLimits } from './limits.js';
import { CONTROL_BYTES, type FromThread, type NewValues, type ThreadData, type ThreadOutcome, type ToThread } from './protocol.js';
import { readTagged } from './tagged.js';
import { wasmApi, type WasmModule } from './wasm.js';
import type { RunOptions, SandboxHost, ScriptOutcome } from './types.js';

/** A run was aborted through its `signal`; `cause` is the signal's reason. */
export class SandboxAborted extends BosunError {
  constructor(reason: unknown) {
    super('sandbox_aborted', 'the script was stopped: its run was aborted', { cause: reason });
    this.name = 'SandboxAborted';
  }
}

/** The sandbox could not run the script (its interpreter could not load, or the pool is closed): not the script's fault. */
export class SandboxFailure extends BosunError {
  constructor(message: string, cause?: unknown) {
    super('sandbox_failed', message, cause === undefined ? undefined : { cause });
    this.name = 'SandboxFailure';
  }
}

/** Options of a {@link SandboxPool}. */
export interface SandboxPoolOptions {
  /** Threads at most; scripts share them (default: the machine's parallelism, at most 4). */
  threads?: number;
  /**
   * Limit of each thread's own JavaScript heap, in MB (each script's interpreter memory is bounded
   * on its own). A backstop: what crosses into a thread is bounded far below it, and about 80 KB
   * per script held. Default 256.
   */
  threadHeapMb?: number;
}

/** How far past its time limit a script may compute before its thread is stopped (the interpreter's own check comes first). */
const KILL_GRACE_MS = 200;
/** How long an aborted script may go on computing before its thread is stopped. */
const ABORT_GRACE_MS = 200;
/** How often the pool looks at what each thread is computing, while scripts run. */
const WATCH_EVERY_MS = 50;
/** A thread that dropped this much memory with its modules is retired once idle, so the memory goes back to the system. */
const RETIRE_DROPPED_BYTES = 64 * 1024 * 1024;
/** The largest tool answer (as JSON) that is given to a script. */
const MAX_ANSWER_CHARS = 8 * 1024 * 1024;
/** A script whose thread stopped for no known reason is run again this many times at most. */
const MAX_LOSSES = 1;

// From src/ (tests) and from dist/ alike, the thread is the compiled dist/thread.js.
const THREAD_URL = new URL('../dist/thread.js', import.meta.url);

/** A call of the script, as the pool made it: a run again on another thread gets the same answer. */
interface MadeCall {
  name: string;
  args: string;
  /** The answer as JSON; undefined: the host failed. */
  answer: Promise<string | undefined>;
}

/** One run of a script, across the threads it may need (a thread stopped under it: it is run again). */
class Run {
  readonly limits: SandboxLimits;
  /** Every value of the clock and Math.random the script has read, the host's first. */
  readonly clock: number[];
  readonly random: number[];
  readonly calls: MadeCall[] = [];
  console = '';
  attempt: { thread: Thread; id: number; toolCalls: number } | undefined;
  losses = 0;
  hostFailure: { error: unknown } | undefined;
  aborted: { reason: unknown; at: number } | undefined;
  settled = false;

  constructor(
    readonly script: string,
    readonly host: SandboxHost,
    limits: Partial<SandboxLimits>,
    private readonly ends: { resolve: (o: ScriptOutcome) => void; reject: (e: unknown) => void },
  ) {
    this.limits = { ...DEFAULT_SANDBOX_LIMITS, ...limits };
    this.clock = [...(host.recorded?.clock ?? [])];
    this.random = [...(host.recorded?.random ?? [])];
  }

  resolve(outcome: ScriptOutcome): void {
    this.ends.resolve(outcome);
  }

  reject(error: unknown): void {
    this.ends.reject(error);
  }

  record(values: NewValues): void {
    if (values.clock.length === 0 && values.random.length === 0) return;
    // A loop on Date.now() reads it millions of times: appended one by one, not spread.
    for (const v of values.clock) this.clock.push(v);
    for (const v of values.random) this.random.push(v);
    this.host.record?.(values);
  }
}

/** One sandbox thread and the runs on it. */
class Thread {
  readonly worker: Worker;
  readonly running: Float64Array;
  readonly stopFlag: Int32Array;
  readonly runs = new Map<number, Run>();
  nextId = 1;
  ready = false;
  retiring = false;
  dead = false;
  /** Why the pool stopped it (a culprit's time limit or abort), to tell apart a thread that died on its own. */
  stoppedFor: Run | undefined;
  modules = { created: 0, idle: 0 };
  /** Settles once the thread has its first module ready, or could not start. */
  readonly started: Promise<void>;
  markStarted: () => void = () => undefined;

  constructor(wasm: WasmModule, heapMb: number) {
    this.started = new Promise((resolve) => (this.markStarted = resolve));
    const control = new SharedArrayBuffer(CONTROL_BYTES);
    this.running = new Float64Array(control, 0, 2);
    this.stopFlag = new Int32Array(control, 16, 1);
    this.running[0] = -1;
    const data: ThreadData = { wasm, control };
    this.worker = new Worker(fileURLToPath(THREAD_URL), {
      workerData: data,
      resourceLimits: { maxOldGenerationSizeMb: heapMb, maxYoungGenerationSizeMb: 8 },
      // Nothing of the process's environment is needed there.
      env: {},
    });
    // The pool's timer keeps the process alive while scripts run; an idle thread does not.
    this.worker.unref();
  }

  send(message: ToThread): void {
    if (!this.dead) this.worker.postMessage(message);
  }
}

/**
 * Runs CodeAct scripts off the process's event loop, on a bounded pool of `node:worker_threads`
 * threads, so that lock renewals, health checks and other tasks never wait on a script. Scripts
 * share the threads (each in its own interpreter module, many suspended on tools at once); each
 * `call_tool` comes back to this thread, which runs it on the host exactly as before and posts
 * the answer back.
 *
 * The limits hold from outside: the pool reads what each thread computes, and stops a thread
 * whose script runs past its time limit (one long built-in call the interpreter cannot
 * interrupt) or past its abort. The other scripts of that thread are run again on another one,
 * each call answered by the answer it already had (never run twice) and the clock and
 * `Math.random()` replayed. Each script's interpreter memory is bounded (ArrayBuffers included);
 * a module that grew is dropped after its script, and a thread that dropped much is retired once
 * idle, which gives the memory back.
 */
export class SandboxPool {
  private readonly maxThreads: number;
  private readonly heapMb: number;
  private readonly threads: Thread[] = [];
  private wasm: Promise<WasmModule> | undefined;
  private watch: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly counts = { started: 0, retired: 0, stopped: 0, lost: 0, reruns: 0, modulesCreated: 0 };

  constructor(options: SandboxPoolOptions = {}) {
    const threads = options.threads ?? Math.min(4, availableParallelism());
    if (!Number.isInteger(threads) || threads < 1) throw new RangeError(`SandboxPool: threads must be a positive integer, not ${threads}`);
    this.maxThreads = threads;
    this.heapMb = options.threadHeapMb ?? 256;
  }

  /**
   * Runs one script: the body of a function that ends by returning a tagged result. Throws only
   * for a host failure (what the host threw), an abort ({@link SandboxAborted}) or a sandbox that
   * cannot run ({@link SandboxFailure}); everything the script does wrong is a `script_error`.
   */
  run(script: string, host: SandboxHost, limits: Partial<SandboxLimits> = {}, options: RunOptions = {}): Promise<ScriptOutcome> {
    const { signal } = options;
    if (signal?.aborted) return Promise.reject(new SandboxAborted(signal.reason));
    if (this.closed) return Promise.reject(new SandboxFailure('the sandbox pool is closed'));
    return new Promise<ScriptOutcome>((resolve, reject) => {
      const onAbort = () => this.abort(run, signal?.reason);
      const done = () => signal?.removeEventListener('abort', onAbort);
      const run = new Run(script, host, limits, {
        resolve: (o) => (done(), resolve(o)),
        // What the host threw, as it threw it (a ParkError, a ScriptCancelled…), or a sandbox error.
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the host's own error, passed on unchanged
        reject: (e) => (done(), reject(e)),
      });
      signal?.addEventListener('abort', onAbort, { once: true });
      this.start(run).catch((err: unknown) => this.settle(run, { error: err }));
    });
  }

  /**
   * Starts `threads` threads (default all) and their first interpreter module, so that the first
   * scripts do not wait for them; the rest start when scripts need them.
   */
  async warm(threads = this.maxThreads): Promise<void> {
    const wasm = await this.compiled();
    while (this.live().length < Math.min(threads, this.maxThreads)) this.spawn(wasm);
    await Promise.all(this.live().map((t) => t.started));
  }

  /** What the pool holds and has done (for tests and the bench). */
  stats(): {
    threads: number;
    scripts: number;
    threadsStarted: number;
    threadsRetired: number;
    threadsStopped: number;
    threadsLost: number;
    reruns: number;
    modules: { created: number; idle: number };
  } {
    const live = this.live();
    return {
      threads: live.length,
      scripts: live.reduce((n, t) => n + t.runs.size, 0),
      threadsStarted: this.counts.started,
      threadsRetired: this.counts.retired,
      threadsStopped: this.counts.stopped,
      threadsLost: this.counts.lost,
      reruns: this.counts.reruns,
      modules: {
        created: this.counts.modulesCreated + live.reduce((n, t) => n + t.modules.created, 0),
        idle: live.reduce((n, t) => n + t.modules.idle, 0),
      },
    };
  }

  /** Stops every thread; scripts under way fail with {@link SandboxFailure}. */
  async close(): Promise<void> {
    this.closed = true;
    const threads = this.threads.splice(0);
    for (const t of threads) {
      t.dead = true;
      for (const run of t.runs.values())
        this.settle(run, { error: new SandboxFailure('the sandbox pool was closed while the script ran') });
    }
    this.stopWatching();
    await Promise.all(threads.map((t) => t.worker.terminate()));
  }

  private live(): Thread[] {
    return this.threads.filter((t) => !t.dead);
  }

  private compiled(): Promise<WasmModule> {
    // Compiled once per process; each thread instantiates it (the compiled code is shared).
    this.wasm ??= (async () => {
      const path = fileURLToPath(import.meta.resolve('@jitl/quickjs-wasmfile-release-asyncify/wasm'));
      return wasmApi.compile(await readFile(path));
    })();
    return this.wasm;
  }

  private async start(run: Run): Promise<void> {
    const wasm = await this.compiled();
    if (run.settled) return;
    if (run.aborted) return this.finish(run, { kind: 'stopped' }, 0);
    if (this.closed) return this.settle(run, { error: new SandboxFailure('the sandbox pool is closed') });
    const thread = this.pick(wasm);
    const id = thread.nextId++;
    run.attempt = { thread, id, toolCalls: 0 };
    thread.runs.set(id, run);
    run.console = '';
    thread.send({ t: 'run', id, script: run.script, tools: run.host.tools, limits: run.limits, clock: run.clock, random: run.random });
    this.watchSoon();
  }

  /** The thread with the fewest scripts; a new one while the pool has room and every thread is busy. */
  private pick(wasm: WasmModule): Thread {
    const open = this.live().filter((t) => !t.retiring);
    let best: Thread | undefined;
    for (const t of open) if (!best || t.runs.size < best.runs.size) best = t;
    if (best && (best.runs.size === 0 || this.live().length >= this.maxThreads)) return best;
    return this.spawn(wasm);
  }

  private spawn(wasm: WasmModule): Thread {
    const thread = new Thread(wasm, this.heapMb);
    this.counts.started++;
    this.threads.push(thread);
    thread.worker.on('message', (m: FromThread) => this.onMessage(thread, m));
    thread.worker.on('error', (err) => this.onLost(thread, err));
    thread.worker.on('exit', (code) => this.onLost(thread, new Error(`the sandbox thread exited with code ${code}`)));
    return thread;
  }

  private onMessage(thread: Thread, m: FromThread): void {
    if (thread.dead) return;
    switch (m.t) {
      case 'ready':
        thread.ready = true;
        thread.markStarted();
        return;
      case 'fatal':
        this.lose(thread, new SandboxFailure(m.message), { fatal: true });
        return;
      case 'call': {
        const run = thread.runs.get(m.id);
        if (run) this.call(run, thread, m);
        return;
      }
      case 'done': {
        thread.modules = { created: m.modules.created, idle: m.modules.idle };
        if (m.modules.droppedBytes >= RETIRE_DROPPED_BYTES) thread.retiring = true;
        const run = thread.runs.get(m.id);
        thread.runs.delete(m.id);
        if (run) {
          run.console += m.console;
          run.record({ clock: m.clock, random: m.random });
          this.finish(run, m.outcome, m.toolCalls);
        }
        this.retireIfIdle(thread);
        return;
      }
    }
  }

  /** A `call_tool`: the answer the run already had at this position, else the host's. */
  private call(run: Run, thread: Thread, m: Extract<FromThread, { t: 'call' }>): void {
    const { id } = m;
    run.console += m.console;
    run.record({ clock: m.clock, random: m.random });
    if (run.attempt?.id === id) run.attempt.toolCalls = m.index + 1;
    let made = run.calls[m.index];
    if (!made || made.name !== m.name || made.args !== m.args) {
      const answer = this.ask(run, m.name, m.args, m.index);
      made = { name: m.name, args: m.args, answer };
      run.calls[m.index] = made;
    }
    void made.answer.then((json) => {
      // Only the attempt that asked is answered; a thread stopped since has no one to answer.
      if (run.attempt?.id === id && run.attempt.thread === thread && !run.settled)
        thread.send({ t: 'answer', id, ...(json === undefined ? {} : { json }) });
    });
  }

  private async ask(run: Run, name: string, args: string, index: number): Promise<string | undefined> {
    try {
      const answer = await run.host.callTool(name, JSON.parse(args) as Record<string, unknown>, index);
      const json = JSON.stringify('error' in answer ? { error: answer.error } : { ok: answer.ok ?? null });
      // What crosses into a thread stays well under its heap limit (a thread past it can take the
      // process with it); the gateway's own limit on results is far below this.
      const most = Math.min(MAX_ANSWER_CHARS, Math.floor(run.limits.memoryBytes / 2));
      if (json.length <= most) return json;
      return JSON.stringify({
        error: `the result of ${name} is ${json.length} characters as JSON; a script may receive at most ${most} (memory limit); the call was made`,
      });
    } catch (err) {
      run.hostFailure ??= { error: err };
      return undefined;
    }
  }

  private finish(run: Run, outcome: ThreadOutcome, toolCalls: number): void {
    if (run.hostFailure) return this.settle(run, { error: run.hostFailure.error });
    if (run.aborted) return this.settle(run, { error: new SandboxAborted(run.aborted.reason) });
    const base = { console: run.console, toolCalls };
    switch (outcome.kind) {
      case 'stopped':
        // Stopped with neither a host failure nor an abort: not something the pool asks for.
        return this.settle(run, { error: new SandboxFailure('the sandbox stopped the script for no reason it gave') });
      case 'failed':
        return this.settle(run, { error: new SandboxFailure(outcome.message) });
      case 'script_error':
        return this.settle(run, {
          outcome: { kind: 'script_error', message: outcome.message, ...(outcome.limit ? { limit: outcome.limit } : {}), ...base },
        });
      case 'result': {
        let value: unknown;
        try {
          value = outcome.json === undefined ? undefined : JSON.parse(outcome.json);
        } catch (err) {
          return this.settle(run, {
            outcome: { kind: 'script_error', message: `the script's result could not be read as JSON: ${errorMessage(err)}`, ...base },
          });
        }
        const tagged = readTagged(value);
        if ('problem' in tagged) return this.settle(run, { outcome: { kind: 'script_error', message: tagged.problem, ...base } });
        return this.settle(run, { outcome: { kind: 'result', result: tagged, ...base } });
      }
    }
  }

  /**
   * Ends the run. A run stopped with a call still in flight (an abort, a host failure) ends once
   * that call has its answer, so that the host knows the effect before the run throws.
   */
  private settle(run: Run, end: { outcome: ScriptOutcome } | { error: unknown }): void {
    if (run.settled) return;
    run.settled = true;
    const attempt = run.attempt;
    if (attempt) attempt.thread.runs.delete(attempt.id);
    run.attempt = undefined;
    this.stopWatchingIfIdle();
    if ('outcome' in end) return run.resolve(end.outcome);
    void Promise.allSettled(run.calls.map((c) => c.answer)).then(() => run.reject(end.error));
  }

  private abort(run: Run, reason: unknown): void {
    if (run.settled || run.aborted) return;
    run.aborted = { reason, at: Date.now() };
    const attempt = run.attempt;
    if (!attempt) return; // Not on a thread yet: start() ends it.
    // Read by the interpreter's interrupt handler if the script computes now; the message stops
    // it where it waits.
    Atomics.store(attempt.thread.stopFlag, 0, attempt.id);
    attempt.thread.send({ t: 'abort', id: attempt.id });
  }

  private watchSoon(): void {
    this.watch ??= setInterval(() => this.look(), WATCH_EVERY_MS);
  }

  private stopWatchingIfIdle(): void {
    if (this.live().every((t) => t.runs.size === 0)) this.stopWatching();
  }

  private stopWatching(): void {
    if (this.watch) clearInterval(this.watch);
    this.watch = undefined;
  }

  /** The watchdog: a thread computing a script past its time limit, or past its abort, is stopped. */
  private look(): void {
    const now = Date.now();
    for (const thread of this.live()) {
      const id = thread.running[0]!;
      const since = thread.running[1]!;
      if (id < 0 || thread.running[0] !== id) continue;
      const run = thread.runs.get(id);
      if (!run) continue;
      if (now - since > run.limits.timeMs + KILL_GRACE_MS) this.stopThread(thread, run, 'time');
      else if (run.aborted && now - run.aborted.at > ABORT_GRACE_MS) this.stopThread(thread, run, 'abort');
    }
  }

  /**
   * Stops a thread under a script that would not stop: that script ends (its time limit, or its
   * abort); the thread's other scripts are run again on another thread.
   */
  private stopThread(thread: Thread, culprit: Run, why: 'time' | 'abort'): void {
    this.counts.stopped++;
    thread.stoppedFor = culprit;
    const toolCalls = culprit.attempt?.toolCalls ?? 0;
    this.bury(thread);
    if (why === 'time')
      this.settle(culprit, {
        outcome: {
          kind: 'script_error',
          message: timeLimitMessage(culprit.limits.timeMs),
          limit: 'time',
          console: culprit.console,
          toolCalls,
        },
      });
    else this.finish(culprit, { kind: 'stopped' }, toolCalls);
    void thread.worker.terminate();
    for (const run of [...thread.runs.values()]) this.again(run, thread);
    thread.runs.clear();
  }

  /** A thread that stopped on its own (out of its heap, a crash) or could not load. */
  private onLost(thread: Thread, err: unknown): void {
    if (thread.dead) return;
    this.lose(thread, err, { fatal: !thread.ready });
  }

  private lose(thread: Thread, err: unknown, how: { fatal: boolean }): void {
    this.counts.lost++;
    this.bury(thread);
    void thread.worker.terminate();
    const runs = [...thread.runs.values()];
    thread.runs.clear();
    for (const run of runs) {
      if (how.fatal) {
        this.settle(run, { error: new SandboxFailure(`the sandbox could not start: ${errorMessage(err)}`, err) });
        continue;
      }
      run.losses++;
      if (run.losses > MAX_LOSSES) {
        const oom = (err as { code?: unknown }).code === 'ERR_WORKER_OUT_OF_MEMORY';
        const message = oom
          ? 'the script ran its sandbox thread out of memory (memory limit); it was stopped'
          : `the sandbox thread running the script stopped (${errorMessage(err)}), again after the script was run anew; it was stopped`;
        this.settle(run, {
          outcome: {
            kind: 'script_error',
            message,
            ...(oom ? { limit: 'memory' as const } : {}),
            console: run.console,
            toolCalls: run.attempt?.toolCalls ?? 0,
          },
        });
        continue;
      }
      this.again(run, thread);
    }
  }

  private bury(thread: Thread): void {
    thread.dead = true;
    thread.markStarted();
    const at = this.threads.indexOf(thread);
    if (at >= 0) this.threads.splice(at, 1);
    this.counts.modulesCreated += thread.modules.created;
  }

  /** Runs a script again on another thread, its calls answered as before. */
  private again(run: Run, from: Thread): void {
    if (run.settled) return;
    if (run.attempt?.thread === from) run.attempt = undefined;
    if (run.aborted) return this.finish(run, { kind: 'stopped' }, 0);
    this.counts.reruns++;
    this.start(run).catch((err: unknown) => this.settle(run, { error: err }));
  }

  private retireIfIdle(thread: Thread): void {
    if (!thread.retiring || thread.runs.size > 0) return;
    this.counts.retired++;
    this.bury(thread);
    void thread.worker.terminate();
  }
}
