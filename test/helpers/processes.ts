import { spawn, type ChildProcess } from 'node:child_process';
import { ENTRY } from './paths.js';
import { reap } from './reaper.js';

/** The line a service prints on stdout once ready (libs/transport/src/service.ts, `readyLine`). */
export const READY_LINE = /^\{"bosun":"ready","service":"[a-z-]+","pid":\d+\}$/;

/** One service started as a real process, with its output kept for assertions. */
export class ServiceProcess {
  readonly name: string;
  readonly child: ChildProcess;
  readonly lines: string[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private waiters: { re: RegExp; resolve: (line: string) => void }[] = [];

  constructor(name: string, script: string, args: string[], env: Record<string, string>) {
    this.name = name;
    this.child = reap(spawn(process.execPath, [script, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] }));
    let buffer = '';
    const onData = (chunk: Buffer) => {
      buffer += chunk.toString('utf8');
      let i: number;
      while ((i = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, i);
        buffer = buffer.slice(i + 1);
        this.lines.push(line);
        if (process.env.BOSUN_TEST_VERBOSE) process.stderr.write(`[${name}] ${line}\n`);
        this.waiters = this.waiters.filter((w) => {
          if (w.re.test(line)) {
            w.resolve(line);
            return false;
          }
          return true;
        });
      }
    };
    this.child.stdout?.on('data', onData);
    this.child.stderr?.on('data', onData);
    // 'close', not 'exit': by then stdout and stderr are read to the end, so `lines` is complete.
    this.exited = new Promise((resolve) => this.child.once('close', (code, signal) => resolve({ code, signal })));
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Resolves with the first output line matching `re` (already printed or to come). */
  waitForLine(re: RegExp, timeoutMs = 20_000): Promise<string> {
    const seen = this.lines.find((l) => re.test(l));
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new Error(`${this.name}: no line matching ${re} within ${timeoutMs} ms. Last lines:\n${this.lines.slice(-15).join('\n')}`),
          ),
        timeoutMs,
      );
      this.waiters.push({
        re,
        resolve: (l) => {
          clearTimeout(timer);
          resolve(l);
        },
      });
      void this.exited.then(({ code, signal }) => {
        clearTimeout(timer);
        reject(
          new Error(
            `${this.name} exited (code ${String(code)}, signal ${String(signal)}) before printing ${re}. Last lines:\n${this.lines.slice(-15).join('\n')}`,
          ),
        );
      });
    });
  }

  /** Waits for the service's documented ready line (`{"bosun":"ready",…}`, printed whatever LOG_LEVEL says). */
  async ready(timeoutMs = 30_000): Promise<this> {
    await this.waitForLine(READY_LINE, timeoutMs);
    return this;
  }

  kill(signal: NodeJS.Signals = 'SIGKILL'): void {
    if (this.running) this.child.kill(signal);
  }

  /** SIGTERM, then SIGKILL after `graceMs`; resolves with the exit status. */
  async stop(graceMs = 20_000) {
    if (!this.running) return this.exited;
    this.child.kill('SIGTERM');
    const t = setTimeout(() => this.kill('SIGKILL'), graceMs);
    const status = await this.exited;
    clearTimeout(t);
    return status;
  }
}

/** Starts one service process. */
export function startService(
  kind: 'coordinator' | 'specialist' | 'gateway',
  env: Record<string, string>,
  options: { name?: string; args?: string[] } = {},
): ServiceProcess {
  return new ServiceProcess(options.name ?? kind, ENTRY[kind], options.args ?? [], env);
}

/** A whole cluster: gateway, coordinator and N specialist processes. */
export class TestCluster {
  readonly processes: ServiceProcess[] = [];

  static async start(
    env: Record<string, string>,
    options: { specialists?: number; specialistArgs?: string[][] } = {},
  ): Promise<TestCluster> {
    const cluster = new TestCluster();
    const gateway = cluster.add(startService('gateway', env));
    await gateway.ready();
    const argsList = options.specialistArgs ?? Array.from({ length: options.specialists ?? 1 }, () => []);
    const started = [cluster.add(startService('coordinator', env))];
    argsList.forEach((args, i) => started.push(cluster.add(startService('specialist', env, { name: `specialist-${i + 1}`, args }))));
    await Promise.all(started.map((p) => p.ready()));
    return cluster;
  }

  add(p: ServiceProcess): ServiceProcess {
    this.processes.push(p);
    return p;
  }

  get(name: string): ServiceProcess {
    const p = [...this.processes].reverse().find((x) => x.name === name);
    if (!p) throw new Error(`no process ${name}`);
    return p;
  }

  async stop(): Promise<void> {
    await Promise.all(this.processes.map((p) => p.stop()));
  }
}
