import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable } from 'node:stream';
import { BosunError } from '@bosun/contract';
import { READY_LINE } from './service.js';

/** How a launched process ended: its exit code, or the signal that ended it. */
export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** Options of {@link launchProcess}. */
export interface LaunchOptions {
  /** The name in messages (`specialist-2`, `raw-task`). */
  name: string;
  /** The script this Node.js runs (`process.execPath`), e.g. `services/coordinator/dist/bundle/main.js`. */
  script: string;
  /** Arguments after the script. Default none. */
  args?: readonly string[];
  /** Node.js options before the script, e.g. `--cpu-prof`. Default none. */
  nodeArgs?: readonly string[];
  /** The child's whole environment: nothing of this process's is added to it. */
  env: NodeJS.ProcessEnv;
  /** Working folder. Default this process's. */
  cwd?: string;
  /** How many of the last output lines {@link ServiceProcess.lines} keeps; default 200, `Infinity` keeps every line. */
  keepLines?: number;
  /** Called with each line of output (standard output and standard error alike) as it comes. */
  onLine?: (line: string) => void;
  /** Called when {@link ServiceProcess.stop} sends SIGKILL because the grace period ran out. */
  onKill?: (p: ServiceProcess, graceMs: number) => void;
}

/** Time given to the output pipes to close after the process exited, before it counts as ended anyway. */
const PIPE_CLOSE_MS = 2_000;

/**
 * A child process running a Node.js script (a Bosun service, or any script that prints a line
 * once ready), with its output read line by line. It ends ({@link ServiceProcess.exited}) once
 * it has exited and its output is read to the end — or {@link PIPE_CLOSE_MS} after its exit
 * when a process it started still holds the pipes.
 */
export class ServiceProcess {
  readonly name: string;
  readonly child: ChildProcess;
  /** The last output lines, oldest first ({@link LaunchOptions.keepLines} of them). */
  readonly lines: string[] = [];
  /** Resolves once the process has ended, with how it ended. */
  readonly exited: Promise<ExitStatus>;
  private readonly keep: number;
  private readonly listeners = new Set<(line: string) => void>();
  private readonly onKill: LaunchOptions['onKill'];
  private ended = false;

  constructor(options: LaunchOptions) {
    this.name = options.name;
    this.keep = options.keepLines ?? 200;
    this.onKill = options.onKill;
    if (options.onLine) this.listeners.add(options.onLine);
    this.child = spawn(process.execPath, [...(options.nodeArgs ?? []), options.script, ...(options.args ?? [])], {
      cwd: options.cwd,
      env: options.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const flushers = [this.child.stdout, this.child.stderr].map((s) => this.readLines(s));
    this.exited = new Promise((resolve) => {
      const end = (code: number | null, signal: NodeJS.Signals | null) => {
        if (this.ended) return;
        this.ended = true;
        for (const flush of flushers) flush();
        resolve({ code, signal });
      };
      // 'close' comes once the pipes are read to the end, so `lines` is complete by then.
      this.child.once('close', end);
      this.child.once('exit', (code, signal) => setTimeout(() => end(code, signal), PIPE_CLOSE_MS).unref());
      // No process at all (e.g. the working folder does not exist): it ends at once.
      this.child.once('error', (err) => {
        this.push(`${this.name}: ${err.message}`);
        end(null, null);
      });
    });
  }

  /** The process id; -1 when the process could not be started. */
  get pid(): number {
    return this.child.pid ?? -1;
  }

  /** Whether the process has not exited yet. */
  get running(): boolean {
    return !this.ended && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Calls `listener` with every line of output from now on; returns the function that stops it. */
  onLine(listener: (line: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Resolves with the first output line that `match` accepts — among the kept lines, or to come.
   * Rejects when the process ends first or after `timeoutMs` (default 20 s), naming `what` (by
   * default the pattern) and giving the last lines.
   */
  waitForLine(match: RegExp | ((line: string) => boolean), timeoutMs = 20_000, what?: string): Promise<string> {
    const test = typeof match === 'function' ? match : (line: string) => match.test(line);
    const wanted = what ?? (typeof match === 'function' ? 'the line it waits for' : `a line matching ${String(match)}`);
    const seen = this.lines.find(test);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      let stop = (): void => undefined;
      const timer = setTimeout(() => {
        stop();
        reject(new BosunError('process_timeout', `${this.name}: ${wanted} not seen within ${timeoutMs} ms. ${this.lastLines()}`));
      }, timeoutMs);
      stop = this.onLine((line) => {
        if (!test(line)) return;
        stop();
        clearTimeout(timer);
        resolve(line);
      });
      void this.exited.then(({ code, signal }) => {
        stop();
        clearTimeout(timer);
        const status = `code ${String(code)}, signal ${String(signal)}`;
        reject(new BosunError('process_exited', `${this.name} exited (${status}) before printing ${wanted}. ${this.lastLines()}`));
      });
    });
  }

  /**
   * Waits for the documented ready line of a Bosun service (`{"bosun":"ready",…}` on standard
   * output, printed whatever LOG_LEVEL says; see `readyLine`) — of `service` when given.
   * Default timeout 30 s.
   */
  async ready(options: { service?: string; timeoutMs?: number } = {}): Promise<this> {
    const { service, timeoutMs = 30_000 } = options;
    const isReady = (line: string) =>
      READY_LINE.test(line) && (service === undefined || (JSON.parse(line) as { service: string }).service === service);
    await this.waitForLine(isReady, timeoutMs, `its ready line ({"bosun":"ready",…})`);
    return this;
  }

  /** Sends `signal` (default SIGKILL) unless the process has already exited. */
  kill(signal: NodeJS.Signals = 'SIGKILL'): void {
    if (this.running) this.child.kill(signal);
  }

  /** SIGTERM, then SIGKILL after `graceMs` (default 20 s); resolves with how the process ended. */
  async stop(graceMs = 20_000): Promise<ExitStatus> {
    if (!this.running) return this.exited;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => {
      if (!this.running) return;
      this.onKill?.(this, graceMs);
      this.kill('SIGKILL');
    }, graceMs);
    timer.unref();
    const status = await this.exited;
    clearTimeout(timer);
    return status;
  }

  /** `name (pid N)` and its last 10 lines of output, for error messages. */
  describe(): string {
    const tail = this.lines.slice(-10);
    return `${this.name} (pid ${this.pid})${tail.length ? `; last output:\n  ${tail.join('\n  ')}` : ''}`;
  }

  private lastLines(): string {
    return `Last lines:\n${this.lines.slice(-15).join('\n')}`;
  }

  private push(line: string): void {
    if (this.keep > 0) {
      this.lines.push(line);
      if (this.lines.length > this.keep) this.lines.shift();
    }
    for (const listener of [...this.listeners]) listener(line);
  }

  /** Splits a stream into lines; returns the function that emits what is left after the last newline. */
  private readLines(stream: Readable | null): () => void {
    let buffer = '';
    stream?.setEncoding('utf8');
    stream?.on('data', (chunk: string) => {
      buffer += chunk;
      let i: number;
      while ((i = buffer.indexOf('\n')) >= 0) {
        this.push(buffer.slice(0, i).replace(/\r$/, ''));
        buffer = buffer.slice(i + 1);
      }
    });
    return () => {
      if (buffer !== '') this.push(buffer);
      buffer = '';
    };
  }
}

/** Starts a Node.js script as a child process (see {@link ServiceProcess}). */
export function launchProcess(options: LaunchOptions): ServiceProcess {
  return new ServiceProcess(options);
}

/**
 * The processes one program started and has not seen end: stopped together, and — with
 * `killOnExit` — SIGKILLed when this process exits, so that none outlives it (a test that timed
 * out, a bench or demo that failed).
 */
export class ProcessGroup {
  private readonly live = new Set<ServiceProcess>();

  constructor(options: { killOnExit?: boolean } = {}) {
    if (options.killOnExit) process.once('exit', () => this.killAll());
  }

  /** Starts a process in this group (see {@link launchProcess}). */
  launch(options: LaunchOptions): ServiceProcess {
    const p = launchProcess(options);
    this.live.add(p);
    void p.exited.then(() => this.live.delete(p));
    return p;
  }

  /** The processes of this group still running. */
  get running(): ServiceProcess[] {
    return [...this.live];
  }

  /** Stops every process still running (SIGTERM, SIGKILL after `graceMs`) and waits for them. */
  async stopAll(graceMs = 20_000): Promise<ExitStatus[]> {
    return Promise.all([...this.live].map((p) => p.stop(graceMs)));
  }

  /** SIGKILLs every process still running, at once (synchronous: usable in an `exit` handler). */
  killAll(): void {
    for (const p of this.live) p.kill('SIGKILL');
  }
}
