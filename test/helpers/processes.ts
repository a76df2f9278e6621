import { appendFileSync } from 'node:fs';
import { expect } from 'vitest';
import { ProcessGroup, READY_LINE, type ServiceProcess } from '@bosun/transport';
import { assertFreshBundles } from './bundles.js';
import { ENTRY } from './paths.js';

export { READY_LINE, type ServiceProcess };

// Every service a test starts is SIGKILLed when the test process exits, even when a test timed
// out before its own clean-up ran: nothing outlives the test file that started it.
const processes = new ProcessGroup({ killOnExit: true });

/** The kinds of process {@link startService} starts. */
/** `serve` is `bosun serve`: coordinator, specialists and gateway in one process (the co-located layout). */
export type ServiceKind = 'coordinator' | 'specialist' | 'gateway' | 'intake' | 'a2a' | 'console' | 'serve';

/**
 * How many output lines each process keeps by default (its tail): enough for every line a
 * service prints at `info` in one test file, bounded so that a chatty process cannot fill the
 * test's memory. {@link wholeOutput} refuses to answer once a tail was cut.
 */
export const TAIL_LINES = 2_000;

interface Started {
  process: ServiceProcess;
  /** Lines printed since the start (the tail keeps the last {@link TAIL_LINES}). */
  total: number;
  /** Lines already printed by {@link printTails}. */
  printed: number;
}

/** The processes this test file started, in order: their tails are printed when a test fails. */
const started: Started[] = [];
globalThis.bosunPrintTails = printTails;

/**
 * Starts one service process (the shared launcher of `@bosun/transport`) with `env` over the
 * test process's environment. The last `keepLines` lines of its output (default
 * {@link TAIL_LINES}) are kept for assertions and printed when a test of the file fails
 * (test/helpers/setup.ts); `BOSUN_TEST_VERBOSE=1` also echoes every line to stderr as it comes.
 */
export function startService(
  kind: ServiceKind,
  env: Record<string, string>,
  options: { name?: string; args?: string[]; keepLines?: number } = {},
): ServiceProcess {
  assertFreshBundles();
  const name = options.name ?? kind;
  const verbose = Boolean(process.env.BOSUN_TEST_VERBOSE);
  countStart(kind, name);
  const entry: Started = { process: undefined as unknown as ServiceProcess, total: 0, printed: 0 };
  const p = processes.launch({
    name,
    script: kind === 'serve' ? ENTRY.cli : ENTRY[kind],
    args: kind === 'serve' ? ['serve', ...(options.args ?? [])] : (options.args ?? []),
    env: { ...process.env, ...env },
    keepLines: options.keepLines ?? TAIL_LINES,
    onLine: (line) => {
      entry.total++;
      if (verbose) process.stderr.write(`[${name}] ${line}\n`);
    },
  });
  entry.process = p;
  started.push(entry);
  return p;
}

/**
 * Every line `p` printed, for assertions about all of its output (no secret in it, say).
 * Throws when the tail was cut, rather than let such an assertion pass on part of the output.
 */
export function wholeOutput(p: ServiceProcess): string[] {
  const entry = started.find((s) => s.process === p);
  if (entry && entry.total > p.lines.length)
    throw new Error(`${p.name} printed ${entry.total} lines and keeps the last ${p.lines.length}: start it with a larger keepLines`);
  return p.lines;
}

/**
 * Writes to stderr the lines each process of this file printed since the last call (at most its
 * tail), under its name. Called by test/helpers/setup.ts when a test fails.
 */
export function printTails(title: string): void {
  const out: string[] = [];
  for (const s of started) {
    const fresh = s.total - s.printed;
    if (fresh === 0) continue;
    const lines = s.process.lines.slice(-Math.min(fresh, s.process.lines.length));
    const cut = fresh - lines.length;
    out.push(
      `--- ${s.process.name} (pid ${s.process.pid}${s.process.running ? '' : ', exited'}): ${cut > 0 ? `the last ${lines.length} of ${fresh} new lines` : `${fresh} new lines`}`,
    );
    out.push(...lines);
    s.printed = s.total;
  }
  if (out.length > 0)
    process.stderr.write(`\n=== output of the services, after: ${title}\n${out.join('\n')}\n=== end of the services' output\n`);
}

/**
 * With `BOSUN_TEST_STARTS=<file>`, appends one JSON line per service started (test file, kind,
 * name) to that file: how the suite's cluster starts are counted (docs/testing.md).
 */
function countStart(kind: ServiceKind, name: string): void {
  const file = process.env.BOSUN_TEST_STARTS;
  if (!file) return;
  appendFileSync(file, `${JSON.stringify({ file: expect.getState().testPath ?? '', kind, name })}\n`);
}

/** Options of {@link TestCluster.start}. */
export interface ClusterOptions {
  /**
   * `split` (default): gateway, coordinator and specialists as processes of their own.
   * `colocated`: `bosun serve` processes, each hosting all three (named `serve-1`, `serve-2`, …).
   */
  layout?: 'split' | 'colocated';
  /** How many specialist processes (default 1), each serving every specialist of the config; in the co-located layout, how many `bosun serve` processes. */
  specialists?: number;
  /** The arguments of each specialist process (e.g. `['--only', 'coder']`); their number wins over `specialists`. */
  specialistArgs?: string[][];
  /** More processes started with the others (an intake, an A2A server, a console), with `env` over the cluster's. */
  more?: { kind: ServiceKind; name?: string; env?: Record<string, string>; args?: string[] }[];
}

/** A whole cluster: gateway, coordinator and N specialist processes. */
export class TestCluster {
  readonly processes: ServiceProcess[] = [];

  /**
   * Starts the gateway, the coordinator and the specialists at once and waits until each is
   * ready. None of them waits for another to start: a specialist reads the gateway's catalog
   * when its first task starts, and a test publishes only once all are ready.
   */
  static async start(env: Record<string, string>, options: ClusterOptions = {}): Promise<TestCluster> {
    const cluster = new TestCluster();
    countCluster();
    const argsList = options.specialistArgs ?? Array.from({ length: options.specialists ?? 1 }, () => []);
    const all: ServiceProcess[] = [];
    if (options.layout === 'colocated') {
      argsList.forEach((args, i) => all.push(cluster.add(startService('serve', env, { name: `serve-${i + 1}`, args }))));
    } else {
      all.push(cluster.add(startService('gateway', env)), cluster.add(startService('coordinator', env)));
      argsList.forEach((args, i) => all.push(cluster.add(startService('specialist', env, { name: `specialist-${i + 1}`, args }))));
    }
    for (const m of options.more ?? []) all.push(cluster.add(startService(m.kind, { ...env, ...m.env }, { name: m.name, args: m.args })));
    try {
      // Started one after the other, the gateway had 30 s and then the rest 30 s: started at
      // once, they share the CPU, so the whole cluster gets the same 60 s.
      await Promise.all(all.map((p) => p.ready({ timeoutMs: 60_000 })));
    } catch (err) {
      await cluster.stop();
      throw err;
    }
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

function countCluster(): void {
  const file = process.env.BOSUN_TEST_STARTS;
  if (file) appendFileSync(file, `${JSON.stringify({ file: expect.getState().testPath ?? '', kind: 'cluster', name: 'cluster' })}\n`);
}
