import { appendFileSync } from 'node:fs';
import { expect } from 'vitest';
import { Queue, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { INCIDENTS_QUEUE, specialistQueue } from '@bosun/contract';
import { ProcessGroup, READY_LINE, type ServiceProcess } from '@bosun/transport';
import { assertFreshBundles } from './bundles.js';
import { ENTRY } from './paths.js';
import { waitUntil } from './wait.js';

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

/** What a process hosts: in the split layout, one of these; in the co-located layout, all three. */
export type ClusterRole = 'coordinator' | 'specialist' | 'gateway';

/**
 * The layout a cluster starts in when its test does not name one: `BOSUN_TEST_LAYOUT`
 * (`split` or `colocated`), default `split`. `npm run test:chaos:colocated` runs the chaos files
 * written for either layout (those that reach processes through {@link TestCluster.hosts} and
 * {@link TestCluster.replace}) with `colocated`.
 */
export function testLayout(): 'split' | 'colocated' {
  const layout = process.env.BOSUN_TEST_LAYOUT ?? 'split';
  if (layout !== 'split' && layout !== 'colocated')
    throw new Error(`BOSUN_TEST_LAYOUT must be split or colocated, not ${JSON.stringify(layout)}`);
  return layout;
}

/** A whole cluster: gateway, coordinator and N specialist processes. */
export class TestCluster {
  readonly processes: ServiceProcess[] = [];
  layout: 'split' | 'colocated' = 'split';
  /** The environment the cluster was started with (its replacements get it too). */
  env: Record<string, string> = {};
  private replaced = 0;
  /** The kind of each process the cluster started itself (a process a test adds is known by its name). */
  private readonly kinds = new Map<ServiceProcess, ServiceKind>();

  /**
   * Starts the gateway, the coordinator and the specialists at once and waits until each is
   * ready. None of them waits for another to start: a specialist reads the gateway's catalog
   * when its first task starts, and a test publishes only once all are ready.
   */
  static async start(env: Record<string, string>, options: ClusterOptions = {}): Promise<TestCluster> {
    const cluster = new TestCluster();
    cluster.layout = options.layout ?? testLayout();
    cluster.env = env;
    countCluster();
    const argsList = options.specialistArgs ?? Array.from({ length: options.specialists ?? 1 }, () => []);
    const all: ServiceProcess[] = [];
    if (cluster.layout === 'colocated') {
      argsList.forEach((args, i) => all.push(cluster.launch('serve', env, { name: `serve-${i + 1}`, args })));
    } else {
      all.push(cluster.launch('gateway', env), cluster.launch('coordinator', env));
      argsList.forEach((args, i) => all.push(cluster.launch('specialist', env, { name: `specialist-${i + 1}`, args })));
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

  /** The running processes that host `role`: its own processes when split, every `bosun serve` when co-located. */
  hosts(role: ClusterRole): ServiceProcess[] {
    const kind = this.layout === 'colocated' ? 'serve' : role;
    return this.processes.filter((p) => p.running && (this.kinds.get(p) ?? p.name.split('-')[0]) === kind);
  }

  /** The one running process that hosts `role` (a test of a cluster with one such process). */
  host(role: ClusterRole): ServiceProcess {
    const hosts = this.hosts(role);
    if (hosts.length !== 1)
      throw new Error(`${hosts.length} running processes host the ${role}, not one: ${hosts.map((p) => p.name).join(', ')}`);
    return hosts[0]!;
  }

  /** The running process whose pid is `pid` and that hosts `role` (the owner of a job, from its `processedBy`). */
  hostWithPid(role: ClusterRole, pid: string | undefined): ServiceProcess | undefined {
    return this.hosts(role).find((p) => String(p.pid) === pid);
  }

  /**
   * Waits until run `runId` has its tasks out and waits for them: split, its incident job parked
   * in waiting-children; co-located, its checkpoint `waiting` (local tasks run in the run's own
   * pass, libs/agent run-local.ts, and it parks only for a task handed to a queue).
   */
  async untilTasksOut(redis: Redis, prefix: string, job: Job, runId: string, timeoutMs = 10_000): Promise<void> {
    const waiting = async () => {
      if (this.layout === 'split') return (await job.getState()) === 'waiting-children';
      const ckpt = await redis.get(`${prefix}:ckpt:run:${runId}`);
      return ckpt !== null && (JSON.parse(ckpt) as { phase?: string }).phase === 'waiting';
    };
    await waitUntil(
      waiting,
      timeoutMs,
      this.layout === 'split' ? 'the run parked in waiting-children' : 'the run waits for its local tasks',
    );
  }

  /**
   * The running process that runs task `taskId` of `agent` now: the worker of its job or — a local
   * task of `bosun serve` (libs/agent run-local.ts), which has no job — the process whose
   * coordinator holds the task's run.
   */
  async taskHolder(redis: Redis, prefix: string, agent: string, taskId: string): Promise<ServiceProcess | undefined> {
    const { pid, via } = await taskHolderPid(redis, prefix, agent, taskId);
    return this.hostWithPid(via === 'task' ? 'specialist' : 'coordinator', pid);
  }

  /**
   * Starts a process that hosts `role` in place of one that died or left, with the cluster's
   * environment: the same kind when split, a `bosun serve` (hosting all three) when co-located.
   * Not awaited: call `ready()` on it.
   */
  replace(role: ClusterRole, options: { name?: string; args?: string[]; env?: Record<string, string> } = {}): ServiceProcess {
    this.replaced++;
    const env = { ...this.env, ...options.env };
    if (this.layout === 'colocated')
      return this.launch('serve', env, { name: options.name ?? `serve-r${this.replaced}`, args: options.args });
    return this.launch(role, env, {
      name: options.name ?? (role === 'specialist' ? `specialist-r${this.replaced}` : role),
      args: options.args,
    });
  }

  /** Starts a process of `kind` as one of the cluster's, its kind remembered. */
  private launch(
    kind: ServiceKind,
    env: Record<string, string>,
    options: { name?: string; args?: string[] | undefined } = {},
  ): ServiceProcess {
    const p = this.add(startService(kind, env, options));
    this.kinds.set(p, kind);
    return p;
  }
}

/**
 * The pid of the process that runs task `taskId` of `agent` now, from a worker's name
 * (`<kind>-<host>-<pid>`): its task job's worker (`via: 'task'`) or, for a local task of `bosun
 * serve`, which has no job, the worker of its run's incident job, named in the run's checkpoint
 * (`via: 'run'`). No pid when neither is held.
 */
export async function taskHolderPid(
  redis: Redis,
  prefix: string,
  agent: string,
  taskId: string,
): Promise<{ pid: string | undefined; via: 'task' | 'run' }> {
  const pidOf = (job: Job | undefined) => job?.processedBy?.replace(/^.*-(\d+)$/, '$1');
  const tasks = new Queue(specialistQueue(agent), { connection: redis, prefix });
  const incidents = new Queue(INCIDENTS_QUEUE, { connection: redis, prefix });
  try {
    const job = await tasks.getJob(taskId);
    if (job) return { pid: pidOf(job), via: 'task' };
    const ckpt = await redis.get(`${prefix}:ckpt:run:${taskId.slice(0, taskId.indexOf('-'))}`);
    const jobId = ckpt ? (JSON.parse(ckpt) as { jobId?: string }).jobId : undefined;
    return { pid: jobId === undefined ? undefined : pidOf(await incidents.getJob(jobId)), via: 'run' };
  } finally {
    await Promise.all([tasks.close(), incidents.close()]);
  }
}

function countCluster(): void {
  const file = process.env.BOSUN_TEST_STARTS;
  if (file) appendFileSync(file, `${JSON.stringify({ file: expect.getState().testPath ?? '', kind: 'cluster', name: 'cluster' })}\n`);
}
