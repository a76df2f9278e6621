import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Redis } from 'ioredis';
import type { NatsConnection } from '@nats-io/transport-node';
import { parse } from 'yaml';
import { runsStreamName } from '@bosun/contract';
import { ProcessGroup, type LaunchOptions, type ServiceProcess } from '@bosun/transport';
import { note } from './util.js';

/** The services, and `serve`: `bosun serve`, all three in one process (the co-located layout). */
export type ServiceName = 'tool-gateway' | 'coordinator' | 'specialist' | 'serve';
export const SERVICES: readonly ServiceName[] = ['tool-gateway', 'coordinator', 'specialist', 'serve'];

/** Every child process the bench started and has not seen end: stopped on error, SIGINT and exit. */
const processes = new ProcessGroup({ killOnExit: true });

/**
 * One child process (a Bosun service or a raw-chain role), started and stopped by the shared
 * launcher (`@bosun/transport`), plus what the bench reads of it in /proc.
 */
export class ManagedProcess {
  /** The launched process: its output lines, ready line, exit. */
  readonly proc: ServiceProcess;

  /** Starts `options.script`, keeping its last 40 lines of output for error messages. */
  constructor(options: LaunchOptions) {
    this.proc = processes.launch({
      keepLines: 40,
      onKill: (p, graceMs) => note(`${p.name} (pid ${p.pid}) did not stop within ${graceMs} ms; SIGKILL`),
      ...options,
    });
  }

  get label(): string {
    return this.proc.name;
  }

  get pid(): number {
    return this.proc.pid;
  }

  /** SIGTERM, then wait for the exit; SIGKILL after `timeoutMs`. */
  async stop(timeoutMs = 45_000): Promise<void> {
    await this.proc.stop(timeoutMs);
  }

  /** SIGKILL and wait for the exit. */
  async kill(): Promise<void> {
    this.proc.kill('SIGKILL');
    await this.proc.exited;
  }

  /** A field of /proc/<pid>/status in kB (VmRSS, VmHWM), or NaN once the process is gone. */
  statusKb(field: StatusField): number {
    return pidStatusKb(this.pid, field);
  }

  describe(): string {
    return this.proc.describe();
  }
}

/**
 * Children that are not Node.js scripts (the Restate server of the peer scenarios), started by
 * their own code: stopped and killed with the launcher's processes.
 */
const otherChildren = new Set<ChildProcess>();

/** Adds a child that the launcher did not start to those {@link stopAllProcesses} and the exit handler stop. */
export function trackChild(child: ChildProcess): void {
  if (child.exitCode !== null || child.signalCode !== null) return;
  otherChildren.add(child);
  child.once('exit', () => otherChildren.delete(child));
}

/** SIGTERM, then SIGKILL after `timeoutMs`; resolves once the child has exited. */
export async function stopChild(child: ChildProcess, timeoutMs = 20_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  timer.unref();
  await exited;
  clearTimeout(timer);
}

/** Stops every child still running: SIGTERM, up to `timeoutMs`, then SIGKILL. */
export async function stopAllProcesses(timeoutMs = 20_000): Promise<void> {
  await Promise.all([processes.stopAll(timeoutMs), ...[...otherChildren].map((c) => stopChild(c, timeoutMs))]);
}

/** Last resort at process exit: SIGKILL whatever is left (synchronous). */
export function killAllProcessesSync(): void {
  processes.killAll();
  for (const c of otherChildren) c.kill('SIGKILL');
}

export type StatusField = 'VmRSS' | 'VmHWM';

/** A field of /proc/<pid>/status in kB, or NaN once the process is gone. */
export function pidStatusKb(pid: number, field: StatusField): number {
  try {
    const text = readFileSync(`/proc/${pid}/status`, 'utf8');
    const m = new RegExp(`^${field}:\\s+(\\d+)\\s+kB`, 'm').exec(text);
    return m ? Number(m[1]) : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/**
 * The summed VmRSS/VmHWM of a process's direct children (the gateway's MCP servers), looked up
 * anew at each call so that a restarted child is followed; NaN when it has none.
 */
export function childrenOf(pid: number): { statusKb(field: StatusField): number } {
  return {
    statusKb: (field) => {
      const kbs = childPids(pid).map((c) => pidStatusKb(c, field));
      return kbs.length === 0 ? Number.NaN : kbs.reduce((a, b) => a + b, 0);
    },
  };
}

/** Samples VmRSS of a process (or anything that reads like one, see `childrenOf`) every `intervalMs`. */
export class RssSampler {
  readonly samples: { t: number; kb: number }[] = [];
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly proc: { statusKb(field: StatusField): number },
    intervalMs = 200,
  ) {
    this.sample();
    this.timer = setInterval(() => this.sample(), intervalMs);
    this.timer.unref();
  }

  private sample(): void {
    const kb = this.proc.statusKb('VmRSS');
    if (Number.isFinite(kb)) this.samples.push({ t: Date.now(), kb });
  }

  /** Stops sampling; returns the largest sample and the count. */
  stop(): { peakKb: number; count: number } {
    clearInterval(this.timer);
    this.sample();
    return { peakKb: this.samples.reduce((m, s) => Math.max(m, s.kb), 0), count: this.samples.length };
  }
}

/**
 * CPU time over an interval: the machine's busy share (/proc/stat), each process's utime+stime
 * (/proc/<pid>/stat; its direct children — the gateway's MCP server — under `<label> children`),
 * Redis (INFO cpu) and the bench process itself.
 */
export class CpuMeter {
  private readonly t0 = Date.now();
  private readonly machine0 = machineTicks();
  private readonly bench0 = process.cpuUsage();
  private readonly ticks0: Map<number, number>;
  private readonly io0: Map<number, { syscw: number; wchar: number }>;
  private constructor(
    private readonly procs: ManagedProcess[],
    private readonly redis: Redis,
    private readonly redis0: number,
  ) {
    this.ticks0 = new Map();
    this.io0 = new Map();
    for (const p of procs) {
      for (const pid of [p.pid, ...childPids(p.pid)]) this.ticks0.set(pid, processTicks(pid));
      this.io0.set(p.pid, processIo(p.pid));
    }
    const natsPid = findProcess('nats-server');
    this.nats = natsPid === undefined ? undefined : { pid: natsPid, ticks: processTicks(natsPid) };
  }

  private readonly nats: { pid: number; ticks: number } | undefined;

  static async start(procs: ManagedProcess[], redis: Redis): Promise<CpuMeter> {
    return new CpuMeter(procs, redis, await redisCpuSeconds(redis));
  }

  /** Busy share of all cores, and CPU seconds per process label (summed by label), Redis and the bench. */
  async stop(): Promise<{
    wallS: number;
    machineBusyPct: number;
    cpuSeconds: Record<string, number>;
    /** write(2)-family syscalls and bytes written, per process label (summed by label). */
    writes: Record<string, { syscalls: number; bytes: number }>;
  }> {
    const m1 = machineTicks();
    const busy = m1.total - m1.idle - (this.machine0.total - this.machine0.idle);
    const total = m1.total - this.machine0.total;
    const cpuSeconds: Record<string, number> = {};
    const add = (key: string, ticks: number) => {
      if (Number.isFinite(ticks)) cpuSeconds[key] = (cpuSeconds[key] ?? 0) + ticks / CLOCK_TICKS;
    };
    const writes: Record<string, { syscalls: number; bytes: number }> = {};
    for (const p of this.procs) {
      const key = p.label.replace(/-\d+$/, '');
      add(key, processTicks(p.pid) - (this.ticks0.get(p.pid) ?? 0));
      const io = processIo(p.pid);
      const io0 = this.io0.get(p.pid);
      if (io0 && Number.isFinite(io.syscw)) {
        const w = (writes[key] ??= { syscalls: 0, bytes: 0 });
        w.syscalls += io.syscw - io0.syscw;
        w.bytes += io.wchar - io0.wchar;
      }
      for (const c of childPids(p.pid)) add(`${key} children`, processTicks(c) - (this.ticks0.get(c) ?? 0));
    }
    cpuSeconds.redis = (await redisCpuSeconds(this.redis)) - this.redis0;
    if (this.nats) add('nats-server', processTicks(this.nats.pid) - this.nats.ticks);
    const b = process.cpuUsage(this.bench0);
    cpuSeconds['bench (this process)'] = (b.user + b.system) / 1e6;
    return { wallS: (Date.now() - this.t0) / 1000, machineBusyPct: total > 0 ? (100 * busy) / total : Number.NaN, cpuSeconds, writes };
  }
}

/** Write syscalls and bytes written so far (/proc/<pid>/io); NaN once the process is gone. */
function processIo(pid: number): { syscw: number; wchar: number } {
  try {
    const text = readFileSync(`/proc/${pid}/io`, 'utf8');
    return { syscw: Number(/^syscw:\s+(\d+)/m.exec(text)?.[1]), wchar: Number(/^wchar:\s+(\d+)/m.exec(text)?.[1]) };
  } catch {
    return { syscw: Number.NaN, wchar: Number.NaN };
  }
}

/** The pid of a local process by its command name (the NATS server, to count its CPU time). */
function findProcess(comm: string): number | undefined {
  try {
    for (const name of readdirSync('/proc')) {
      if (!/^\d+$/.test(name)) continue;
      try {
        if (readFileSync(`/proc/${name}/comm`, 'utf8').trim() === comm) return Number(name);
      } catch {
        /* gone */
      }
    }
  } catch {
    /* no /proc */
  }
  return undefined;
}

/** The direct children of a process (/proc/<pid>/task/<pid>/children); none once it is gone. */
export function childPids(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** USER_HZ: 100 on every Linux this runs on. */
export const CLOCK_TICKS = 100;

function machineTicks(): { total: number; idle: number } {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
    return { total, idle: (f[3] ?? 0) + (f[4] ?? 0) };
  } catch {
    return { total: Number.NaN, idle: Number.NaN };
  }
}

/** utime + stime of a process in clock ticks; NaN once it is gone. */
export function processTicks(pid: number): number {
  return statFields(pid).own;
}

/**
 * cutime + cstime of a process in clock ticks: the CPU of its children that ended and that it
 * waited for (a server's exited workers); NaN once it is gone.
 */
export function reapedTicks(pid: number): number {
  return statFields(pid).reaped;
}

function statFields(pid: number): { own: number; reaped: number } {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    // After the command: state(0) ppid(1) … utime(11) stime(12) cutime(13) cstime(14)
    return { own: Number(f[11]) + Number(f[12]), reaped: Number(f[13]) + Number(f[14]) };
  } catch {
    return { own: Number.NaN, reaped: Number.NaN };
  }
}

async function redisCpuSeconds(redis: Redis): Promise<number> {
  const text = await redis.info('cpu');
  const sys = Number(/used_cpu_sys:([\d.]+)/.exec(text)?.[1] ?? Number.NaN);
  const user = Number(/used_cpu_user:([\d.]+)/.exec(text)?.[1] ?? Number.NaN);
  return sys + user;
}

// ---------------------------------------------------------------------------------------------
// Configuration of one scenario

/** What a scenario changes in the demo config. */
export interface ScenarioConfig {
  /** The fake model's latency for the kubernetes specialist (the others get 0). */
  kubernetesLatencyMs?: number;
  kubernetesConcurrency?: number;
  coordinatorConcurrency?: number;
  gatewayConcurrency?: number;
  workers?: { lockDurationMs?: number; stalledIntervalMs?: number; maxStalledCount?: number };
  /** `gateway.transport`: how the specialists send tool calls. */
  toolTransport?: 'nats' | 'queue' | undefined;
}

/** The parts of the demo config (infra/demo/bosun.yaml) that a scenario changes. */
interface DemoConfig extends Record<string, unknown> {
  mcpServers: { demo: { args?: string[] } };
  coordinator: { model?: unknown; concurrency?: number };
  specialists: Record<string, { model?: unknown; concurrency?: number }>;
  gateway: { concurrency?: number; transport?: string };
  workers?: unknown;
}

/**
 * The demo config (infra/demo/bosun.yaml) with the MCP server at its absolute path, the fake
 * model everywhere (never Gemini, whatever the environment), and the scenario's settings.
 */
export function buildConfig(root: string, s: ScenarioConfig): Record<string, unknown> {
  const demo = parse(readFileSync(join(root, 'infra/demo/bosun.yaml'), 'utf8')) as DemoConfig;
  demo.mcpServers.demo.args = [resolve(root, 'mcp-servers/demo/dist/bundle/main.js')];
  demo.coordinator.model = { provider: 'fake' };
  if (s.coordinatorConcurrency !== undefined) demo.coordinator.concurrency = s.coordinatorConcurrency;
  for (const [name, spec] of Object.entries(demo.specialists)) {
    spec.model = { provider: 'fake', latencyMs: name === 'kubernetes' ? (s.kubernetesLatencyMs ?? 0) : 0 };
  }
  if (s.kubernetesConcurrency !== undefined) demo.specialists.kubernetes!.concurrency = s.kubernetesConcurrency;
  if (s.gatewayConcurrency !== undefined) demo.gateway.concurrency = s.gatewayConcurrency;
  if (s.toolTransport !== undefined) demo.gateway.transport = s.toolTransport;
  if (s.workers) demo.workers = { ...s.workers };
  return demo;
}

// ---------------------------------------------------------------------------------------------
// A Bosun cluster of separate processes

export interface ClusterOptions {
  root: string;
  prefix: string;
  redisUrl: string;
  natsUrl: string;
  config: Record<string, unknown>;
  /** Control connection, for the readiness check through CLIENT LIST. */
  redis: Redis;
  /** Start this service under `node --cpu-prof` into `dir`. */
  profile?: { service: ServiceName; dir: string } | undefined;
  /** More environment for the process of this label (scenario 6: health ports, OTEL_*). */
  env?: (label: string) => Record<string, string>;
}

/** The services of one scenario, started as `node services/<name>/dist/main.js`. */
export class Cluster {
  readonly dir: string;
  readonly configPath: string;
  readonly procs: ManagedProcess[] = [];

  constructor(private readonly opts: ClusterOptions) {
    this.dir = mkdtempSync(join(tmpdir(), `${opts.prefix}-`));
    this.configPath = join(this.dir, 'bosun.json');
    // A JSON document is valid YAML: the services read it as their config file.
    writeFileSync(this.configPath, JSON.stringify(opts.config, null, 2));
  }

  get prefix(): string {
    return this.opts.prefix;
  }

  /** Starts one service and waits until it is ready (60 s at most). */
  async start(service: ServiceName, label: string = service): Promise<ManagedProcess> {
    const { root, prefix, redisUrl, natsUrl, profile } = this.opts;
    const script = service === 'serve' ? join(root, 'cli', 'dist', 'main.js') : join(root, 'services', service, 'dist', 'main.js');
    if (!existsSync(script)) throw new Error(`${script} does not exist: build first (npx tsc -b)`);
    const nodeArgs: string[] = [];
    if (profile && profile.service === service) {
      mkdirSync(profile.dir, { recursive: true });
      // Node names the file CPU.<date>.<time>.<pid>.<tid>.<seq>.cpuprofile; it is written when the service exits.
      nodeArgs.push('--cpu-prof', '--cpu-prof-dir', profile.dir);
    }
    // Node flags for the specialist (e.g. `--require snap.cjs` to take heap snapshots; see bench/README.md).
    const specialistArgs = process.env.BENCH_SPECIALIST_NODE_ARGS?.trim();
    if (specialistArgs && service === 'specialist') nodeArgs.push(...specialistArgs.split(/\s+/));
    // Only what the services need: no GEMINI_API_KEY, no NODE_OPTIONS from the caller.
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      REDIS_URL: redisUrl,
      NATS_URL: natsUrl,
      BOSUN_PREFIX: prefix,
      BOSUN_CONFIG: this.configPath,
      LOG_LEVEL: 'warn',
      // `REDIS_COALESCE_WRITES=off node bench/dist/main.js …`: the services write each Redis command on its own, to compare.
      ...(process.env.REDIS_COALESCE_WRITES ? { REDIS_COALESCE_WRITES: process.env.REDIS_COALESCE_WRITES } : {}),
      ...this.opts.env?.(label),
    };
    const args = service === 'serve' ? ['serve'] : [];
    const proc = new ManagedProcess({ name: label, script, args, nodeArgs, cwd: root, env });
    this.procs.push(proc);
    // Ready = the service's ready line on stdout (`{"bosun":"ready","service":"<service>",…}`,
    // printed whatever LOG_LEVEL says; see docs/architecture.md, "Knowing that a service is ready").
    await proc.proc.ready({ service: service === 'serve' ? 'bosun-serve' : service, timeoutMs: 60_000 });
    return proc;
  }

  /** Stops every service (SIGTERM, wait for the exit) and removes the temp dir. */
  async stop(): Promise<void> {
    await Promise.all(this.procs.map((p) => p.stop()));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// Clean-up and Redis counters

/** Deletes every key `<prefix>:*` (SCAN + DEL) and the stream `<prefix>-runs`. */
export async function cleanupPrefix(redis: Redis, nc: NatsConnection | null, prefix: string): Promise<{ keys: number; stream: string }> {
  let cursor = '0';
  let deleted = 0;
  for (let i = 0; i < 100_000; i++) {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    for (let j = 0; j < keys.length; j += 500) deleted += await redis.del(...keys.slice(j, j + 500));
    cursor = next;
    if (cursor === '0') break;
  }
  let stream = 'no NATS';
  if (nc) {
    try {
      const m = await nc.request(`$JS.API.STREAM.DELETE.${runsStreamName(prefix)}`, '', { timeout: 5_000 });
      const r = m.json<{ success?: boolean; error?: { code?: number; err_code?: number; description?: string } }>();
      stream = r.success ? 'deleted' : r.error?.err_code === 10059 ? 'absent' : `error: ${r.error?.description ?? 'unknown'}`;
    } catch (err) {
      stream = `error: ${(err as Error).message}`;
    }
  }
  return { keys: deleted, stream };
}

/** `INFO commandstats` as command → { calls, usec }. */
export async function commandStats(redis: Redis): Promise<Map<string, { calls: number; usec: number }>> {
  const text = await redis.info('commandstats');
  const out = new Map<string, { calls: number; usec: number }>();
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    out.set(m[1]!, { calls: Number(m[2]), usec: Number(m[3]) });
  }
  return out;
}

export function diffStats(
  before: Map<string, { calls: number; usec: number }>,
  after: Map<string, { calls: number; usec: number }>,
): { command: string; calls: number; usec: number }[] {
  const rows: { command: string; calls: number; usec: number }[] = [];
  for (const [command, a] of after) {
    const b = before.get(command) ?? { calls: 0, usec: 0 };
    if (a.calls > b.calls) rows.push({ command, calls: a.calls - b.calls, usec: a.usec - b.usec });
  }
  return rows.sort((x, y) => y.calls - x.calls);
}

/** Throws if a URL's host is not the loopback: the bench sends no traffic elsewhere. */
export function assertLoopback(name: string, url: string): void {
  for (const one of url.split(',')) {
    let host: string;
    try {
      host = new URL(one.trim().includes('://') ? one.trim() : `nats://${one.trim()}`).hostname;
    } catch {
      throw new Error(`${name}: cannot parse "${one}"`);
    }
    if (!['127.0.0.1', 'localhost', '[::1]', '::1'].includes(host)) {
      throw new Error(`${name}: ${host} is not 127.0.0.1 — the bench only talks to a local Redis and NATS`);
    }
  }
}
