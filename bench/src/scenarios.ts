import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Queue, QueueEvents, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import type { NatsConnection } from '@nats-io/transport-node';
import { INCIDENTS_QUEUE, INCIDENT_JOB, allRunsSubject, specialistQueue, type IncidentInput } from '@bosun/contract';
import {
  Cluster,
  CpuMeter,
  RssSampler,
  buildConfig,
  cleanupPrefix,
  commandStats,
  diffStats,
  type ScenarioConfig,
  type ServiceName,
} from './cluster.js';
import { RAW_INCIDENTS, RawChain } from './raw-chain.js';
import { checkAbort, fmt, mb, mean, note, percentile, randomPrefix, sleep } from './util.js';

// ---------------------------------------------------------------------------------------------
// Shared types

export interface Ctx {
  root: string;
  redisUrl: string;
  natsUrl: string;
  redis: Redis;
  nc: NatsConnection | null;
  quick: boolean;
  /** `--profile <service>`: that service runs under --cpu-prof, profiles under `dir/s<N>`. */
  profile?: { service: ServiceName; dir: string } | undefined;
  /** Prefixes in use, for clean-up on SIGINT. */
  prefixes: Set<string>;
  /** The whole bench ends by then (Date.now() ms)… */
  deadlineAt: number;
  /** …leaving this much for the scenarios still to come. */
  reserveMs: number;
  /** `--tool-transport`: the `gateway.transport` of every cluster (default: the demo config's). */
  toolTransport?: 'nats' | 'queue' | undefined;
  /** `--layout`: separate processes (default), or `bosun serve` processes hosting all three services. */
  layout?: 'split' | 'colocated';
}

/** Time this scenario may still spend (ms), for the whole bench to stay within its budget. */
export function budgetLeft(ctx: Ctx): number {
  return ctx.deadlineAt - ctx.reserveMs - Date.now();
}

/** `ms`, cut to what the budget leaves (at least 5 s). */
export function within(ctx: Ctx, ms: number, share = 1): number {
  return Math.max(5_000, Math.min(ms, budgetLeft(ctx) * share));
}

/** One line of the report table. */
export interface Row {
  scenario: string;
  metric: string;
  bosun: string;
  floor?: string;
  ratio?: string;
  target?: string;
  result?: 'met' | 'missed' | 'n/a';
  /** Matches the row across results files (`--compare`); derived from the scenario and metric when absent (compare.ts). */
  key?: string;
  /** The figure as a number, where `bosun` rounds it or says more than one number. */
  value?: number;
  /** Which way is better, where the target and the metric's words do not say it. */
  better?: 'higher' | 'lower';
}

export interface CommandStatsReport {
  source: string;
  incidents: number;
  totalCalls: number;
  /** Top commands, calls per incident. */
  top: { command: string; calls: number; perIncident: number; usecPerIncident: number }[];
  raw?: { totalCalls: number; perIncident: number; top: { command: string; perIncident: number }[] } | undefined;
}

export interface ScenarioResult {
  id: number;
  name: string;
  rows: Row[];
  notes: string[];
  data: Record<string, unknown>;
  commandStats?: CommandStatsReport | undefined;
}

type RunStatusCounts = Record<string, number>;

// ---------------------------------------------------------------------------------------------
// Helpers

/** The standard incident: route → kubernetes → two read-only tool calls → finish → answer. */
export function standardIncident(id: string): IncidentInput {
  return {
    id,
    source: 'bench',
    reason: 'PodCrashLooping',
    summary: 'bench',
    labels: { service: 'checkout' },
    payload: {
      fake: {
        calls: {
          kubernetes: [
            { tool: 'demo__get_pods', args: { service: 'checkout' } },
            { tool: 'demo__get_deployments', args: { service: 'checkout' } },
          ],
        },
      },
    },
  };
}

/** Runs `fn` under a fresh prefix, and deletes the prefix's keys and stream afterwards. */
export async function withPrefix<T>(ctx: Ctx, fn: (prefix: string) => Promise<T>): Promise<T> {
  const prefix = randomPrefix();
  ctx.prefixes.add(prefix);
  try {
    return await fn(prefix);
  } finally {
    const r = await cleanupPrefix(ctx.redis, ctx.nc, prefix).catch((err: unknown) => ({ keys: -1, stream: String(err) }));
    ctx.prefixes.delete(prefix);
    note(`cleaned ${prefix}: ${r.keys} keys deleted, stream ${r.stream}`);
  }
}

/** Publishes incidents on a queue and waits for their results. */
export class IncidentClient {
  private constructor(
    readonly queue: Queue,
    readonly events: QueueEvents,
    private readonly conns: Redis[],
  ) {}

  static async open(ctx: Ctx, prefix: string, queueName: string): Promise<IncidentClient> {
    const conn = new Redis(ctx.redisUrl, { maxRetriesPerRequest: null });
    const eventsConn = new Redis(ctx.redisUrl, { maxRetriesPerRequest: null });
    const queue = new Queue(queueName, { connection: conn, prefix });
    const events = new QueueEvents(queueName, { connection: eventsConn, prefix });
    events.setMaxListeners(0);
    // Every waiting `one()` listens for the queue's closing: many at once in the soak (scenario 9).
    queue.setMaxListeners(0);
    await events.waitUntilReady();
    return new IncidentClient(queue, events, [conn, eventsConn]);
  }

  /** One incident, publish → result; its latency in ms and the run status. */
  async one(id: string, timeoutMs = 30_000, incident: IncidentInput = standardIncident(id)): Promise<{ ms: number; status: string }> {
    const t0 = performance.now();
    const job = await this.queue.add(INCIDENT_JOB, incident, { jobId: id });
    const value = (await job.waitUntilFinished(this.events, timeoutMs)) as { status?: string } | undefined;
    return { ms: performance.now() - t0, status: String(value?.status ?? 'unknown') };
  }

  /**
   * Publishes `ids` with addBulk and waits until every one has finished (QueueEvents, with a
   * count poll every 500 ms as a backstop should the event stream be trimmed under load).
   */
  async bulk(
    ids: string[],
    timeoutMs: number,
    options: { onPoll?: () => Promise<void>; label?: string } = {},
  ): Promise<{ wallMs: number; done: number; failed: number; statuses: RunStatusCounts; timedOut: boolean; publishMs: number }> {
    const pending = new Set(ids);
    const statuses: RunStatusCounts = {};
    let failed = 0;
    let lastAt = 0;
    const onCompleted = ({ jobId, returnvalue }: { jobId: string; returnvalue: unknown }) => {
      if (!pending.delete(jobId)) return;
      lastAt = performance.now();
      const s = String((returnvalue as { status?: string } | null)?.status ?? 'unknown');
      statuses[s] = (statuses[s] ?? 0) + 1;
    };
    const onFailed = ({ jobId }: { jobId: string }) => {
      if (!pending.delete(jobId)) return;
      lastAt = performance.now();
      failed++;
    };
    this.events.on('completed', onCompleted);
    this.events.on('failed', onFailed);
    const t0 = performance.now();
    try {
      for (let i = 0; i < ids.length; i += 500) {
        await this.queue.addBulk(
          ids.slice(i, i + 500).map((id) => ({ name: INCIDENT_JOB, data: standardIncident(id), opts: { jobId: id } })),
        );
      }
      const publishMs = performance.now() - t0;
      let lastNote = performance.now();
      while (pending.size > 0) {
        checkAbort();
        if (performance.now() - t0 > timeoutMs) break;
        await sleep(500);
        if (options.onPoll) await options.onPoll();
        const counts = await this.queue.getJobCounts('completed', 'failed');
        if ((counts.completed ?? 0) + (counts.failed ?? 0) >= ids.length && pending.size > 0) {
          // Events were missed (stream trimmed): the counts are authoritative.
          note(`${pending.size} completions not seen as events; using the job counts`);
          failed = counts.failed ?? 0;
          statuses.unknown = (statuses.unknown ?? 0) + pending.size;
          pending.clear();
          lastAt = performance.now();
        }
        if (performance.now() - lastNote > 5_000) {
          lastNote = performance.now();
          note(
            `${options.label ?? 'bulk'}: ${ids.length - pending.size}/${ids.length} finished after ${((performance.now() - t0) / 1000).toFixed(0)} s`,
          );
        }
      }
      const timedOut = pending.size > 0;
      return {
        wallMs: (timedOut ? performance.now() : lastAt) - t0,
        done: ids.length - pending.size - failed,
        failed,
        statuses,
        timedOut,
        publishMs,
      };
    } finally {
      this.events.off('completed', onCompleted);
      this.events.off('failed', onFailed);
    }
  }

  async close(): Promise<void> {
    // Tearing down after the measurement: a failed close must not hide its figures or the closes after it.
    await this.events.close().catch(() => undefined);
    await this.queue.close().catch(() => undefined);
    for (const c of this.conns) c.disconnect();
  }
}

function profileFor(ctx: Ctx, id: number, sub = ''): { service: ServiceName; dir: string } | undefined {
  return ctx.profile ? { service: ctx.profile.service, dir: join(ctx.profile.dir, `s${id}${sub}`) } : undefined;
}

/** Collects the events of runs by incident id, to split each run's latency into segments. */
class RunTracer {
  private readonly events = new Map<string, { type: string; seq: number; at: number }[]>();
  private readonly marks = new Map<string, { publishAt: number; doneAt: number }>();
  private readonly sub: { unsubscribe(): void } | undefined;

  constructor(nc: NatsConnection | null, prefix: string) {
    this.sub = nc?.subscribe(allRunsSubject(prefix), {
      callback: (err, msg) => {
        if (err) return;
        try {
          const e = msg.json<{ type: string; incidentId: string; seq: number; at: string }>();
          const list = this.events.get(e.incidentId) ?? [];
          list.push({ type: e.type, seq: e.seq, at: Date.parse(e.at) });
          this.events.set(e.incidentId, list);
        } catch {
          /* not an event */
        }
      },
    });
  }

  mark(incidentId: string, publishAt: number, doneAt: number): void {
    this.marks.set(incidentId, { publishAt, doneAt });
  }

  breakdown(): { segment: string; p50: number; p90: number; runs: number }[] {
    const names = [
      'publish → run.started (coordinator takes the job, checkpoint read, run-deadline timer and progress)',
      'run.started → agent.delegated (route model call, checkpoint; split: task-deadline timer and child job)',
      'agent.delegated → agent.started (split: a specialist takes the task job; co-located: a local task, same pass)',
      'agent.started → tool.started #1 (catalog, model call 1 and cancel check, checkpoint, tool call sent, gateway claims it)',
      'tool.started #1 → tool.completed #1 (MCP call over stdio, record)',
      'tool.completed #1 → tool.started #2 (result back to the specialist, model call 2, checkpoint, tool call sent, gateway)',
      'tool.started #2 → tool.completed #2 (MCP call, record)',
      'tool.completed #2 → agent.completed (result back, model call 3: finish_task, checkpoint with the result)',
      'agent.completed → run.completed (split: task job completes, parent back to wait, coordinator resumes; collect, answer)',
      'run.completed → result at the client (incident job completes, QueueEvents)',
    ];
    const samples: number[][] = names.map(() => []);
    for (const [id, m] of this.marks) {
      const ev = (this.events.get(id) ?? []).sort((a, b) => a.seq - b.seq);
      const first = (type: string, nth = 0) => ev.filter((e) => e.type === type)[nth]?.at;
      const points = [
        m.publishAt,
        first('run.started'),
        first('agent.delegated'),
        first('agent.started'),
        first('tool.started', 0),
        first('tool.completed', 0),
        first('tool.started', 1),
        first('tool.completed', 1),
        first('agent.completed'),
        first('run.completed'),
        m.doneAt,
      ];
      if (points.some((p) => p === undefined)) continue;
      for (let i = 0; i < names.length; i++) samples[i]!.push(points[i + 1]! - points[i]!);
    }
    return names
      .map((segment, i) => ({ segment, p50: percentile(samples[i]!, 50), p90: percentile(samples[i]!, 90), runs: samples[i]!.length }))
      .filter((b) => b.runs > 0);
  }

  close(): void {
    this.sub?.unsubscribe();
  }
}

/** Starts gateway, coordinator and `specialists` specialist processes. */
export async function startBosun(ctx: Ctx, prefix: string, id: number, cfg: ScenarioConfig, specialists = 1, sub = '') {
  const cluster = new Cluster({
    root: ctx.root,
    prefix,
    redisUrl: ctx.redisUrl,
    natsUrl: ctx.natsUrl,
    redis: ctx.redis,
    config: buildConfig(ctx.root, { ...cfg, toolTransport: ctx.toolTransport }),
    profile: profileFor(ctx, id, sub),
  });
  try {
    if (ctx.layout === 'colocated') {
      // Each process hosts all three: the first is "the gateway" and "the coordinator" of the
      // scenarios' reports too (their CPU is counted once, with every process's).
      const serves = await Promise.all(Array.from({ length: specialists }, (_, i) => cluster.start('serve', `serve-${i + 1}`)));
      return { cluster, gateway: serves[0]!, coordinator: serves[0]!, specialists: serves };
    }
    const gateway = await cluster.start('tool-gateway');
    const [coordinator, ...specs] = await Promise.all([
      cluster.start('coordinator'),
      ...Array.from({ length: specialists }, (_, i) => cluster.start('specialist', `specialist-${i + 1}`)),
    ]);
    return { cluster, gateway, coordinator, specialists: specs };
  } catch (err) {
    await cluster.stop();
    throw err;
  }
}

function commandReport(
  source: string,
  incidents: number,
  rows: { command: string; calls: number; usec: number }[],
  raw?: { incidents: number; rows: { command: string; calls: number; usec: number }[] },
): CommandStatsReport {
  const total = rows.reduce((a, r) => a + r.calls, 0);
  const rawTotal = raw ? raw.rows.reduce((a, r) => a + r.calls, 0) : 0;
  return {
    source,
    incidents,
    totalCalls: total,
    top: rows
      .slice(0, 10)
      .map((r) => ({ command: r.command, calls: r.calls, perIncident: r.calls / incidents, usecPerIncident: r.usec / incidents })),
    raw: raw
      ? {
          totalCalls: rawTotal,
          perIncident: rawTotal / raw.incidents,
          top: raw.rows.slice(0, 10).map((r) => ({ command: r.command, perIncident: r.calls / raw.incidents })),
        }
      : undefined,
  };
}

export type CpuReport = Awaited<ReturnType<CpuMeter['stop']>>;

/** CPU ms per incident of every measured process (Redis, NATS and the bench's client included). */
function cpuMsPerIncident(c: CpuReport, incidents: number): number {
  return (1000 * Object.values(c.cpuSeconds).reduce((a, b) => a + (b > 0 ? b : 0), 0)) / incidents;
}

/** Scenario 2's CPU row: all processes together, against the floor's (target ≤ 1.6×). */
function cpuRow(bosun: CpuReport, bosunN: number, raw: CpuReport, rawN: number): Row {
  const b = cpuMsPerIncident(bosun, bosunN);
  const r = cpuMsPerIncident(raw, rawN);
  return {
    scenario: '',
    metric: 'CPU ms per incident, all processes with Redis and NATS',
    bosun: fmt(b, 2),
    floor: fmt(r, 2),
    ratio: `${fmt(b / r, 2)}×`,
    target: '≤ 1.60× floor',
    result: b / r <= 1.6 ? 'met' : 'missed',
  };
}

/** Scenario 2's Redis row: commands per incident against the floor's (target ≤ 1.2×). */
function commandsRow(c: CommandStatsReport): Row {
  const b = c.totalCalls / c.incidents;
  const r = c.raw?.perIncident ?? Number.NaN;
  return {
    scenario: '',
    metric: 'Redis commands per incident (INFO commandstats, server-wide)',
    bosun: fmt(b),
    floor: fmt(r),
    ratio: `${fmt(b / r, 2)}×`,
    target: '≤ 1.20× floor',
    result: b / r <= 1.2 ? 'met' : 'missed',
  };
}

/** `machine busy 97% of 2 cores; CPU ms per incident: specialist 5.1, …`. */
export function cpuText(c: CpuReport, incidents: number): string {
  const parts = Object.entries(c.cpuSeconds)
    .filter(([, v]) => v > 0)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${fmt((1000 * v) / incidents, 2)}`);
  const sum = Object.values(c.cpuSeconds).reduce((a, b) => a + (b > 0 ? b : 0), 0);
  const machineS = (c.machineBusyPct / 100) * cpus().length * c.wallS;
  const otherPct = (100 * Math.max(0, machineS - sum)) / (cpus().length * c.wallS);
  const writes = Object.entries(c.writes)
    .map(([k, w]) => `${k} ${fmt(w.syscalls / incidents, 0)} (${fmt(w.bytes / incidents / 1024, 1)} KB)`)
    .join(', ');
  return (
    `machine busy ${fmt(c.machineBusyPct, 0)}% of ${cpus().length} cores over ${fmt(c.wallS, 1)} s, of which ${fmt(otherPct, 0)}% by processes outside this bench; ` +
    `CPU ms per incident: ${parts.join(', ')} (sum ${fmt((1000 * sum) / incidents, 2)}); write syscalls per incident: ${writes}`
  );
}

const statusText = (s: RunStatusCounts) =>
  Object.entries(s)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');

// ---------------------------------------------------------------------------------------------
// 1. Latency

export async function scenarioLatency(ctx: Ctx): Promise<ScenarioResult> {
  const n = ctx.quick ? 30 : 300;
  const warm = ctx.quick ? 5 : 20;
  const budgetMs = within(ctx, ctx.quick ? 40_000 : 150_000, 0.8);
  const statsRuns = ctx.quick ? 20 : 50;
  const result: ScenarioResult = { id: 1, name: 'latency', rows: [], notes: [], data: { n, warm } };
  await withPrefix(ctx, async (prefix) => {
    // Both systems run side by side and are measured alternately (one raw run, one Bosun run),
    // so that both see the same background load on this machine.
    note(`1 latency: raw chain and Bosun side by side, ${warm} warm-up + ${n} runs each, alternating`);
    const raw = await RawChain.start({ root: ctx.root, prefix, redisUrl: ctx.redisUrl, concurrency: { incident: 50, task: 50, tool: 64 } });
    try {
      const b = await startBosun(ctx, prefix, 1, {});
      try {
        const rawClient = await IncidentClient.open(ctx, prefix, RAW_INCIDENTS);
        const client = await IncidentClient.open(ctx, prefix, INCIDENTS_QUEUE);
        try {
          const bosunMs: number[] = [];
          const rawMs: number[] = [];
          const statuses: RunStatusCounts = {};
          // Where a Bosun run's latency goes: its events (numbered at `at`) between publish and result.
          const tracer = new RunTracer(ctx.nc, prefix);
          const t0 = performance.now();
          for (let i = 0; i < warm + n; i++) {
            checkAbort();
            if (performance.now() - t0 > budgetMs) {
              note(`1 latency: time budget of ${budgetMs / 1000} s reached after ${bosunMs.length} measured runs`);
              result.notes.push(`time budget of ${budgetMs / 1000} s reached after ${bosunMs.length} measured runs`);
              break;
            }
            // Alternate which goes first, so neither always follows the other's wake-up.
            const order = i % 2 === 0 ? (['raw', 'bosun'] as const) : (['bosun', 'raw'] as const);
            for (const which of order) {
              if (which === 'raw') {
                const r = await rawClient.one(`raw-${i}`);
                if (i >= warm) rawMs.push(r.ms);
              } else {
                const publishAt = Date.now();
                const r = await client.one(`inc-${i}`);
                if (i >= warm) {
                  bosunMs.push(r.ms);
                  statuses[r.status] = (statuses[r.status] ?? 0) + 1;
                  tracer.mark(`inc-${i}`, publishAt, Date.now());
                }
              }
            }
          }
          await sleep(300);
          const breakdown = tracer.breakdown();
          tracer.close();
          if (breakdown.length > 0) {
            result.notes.push(
              `where a Bosun run's latency goes (median per segment, from the events' \`at\`; sum of medians ${fmt(breakdown.reduce((a, b) => a + b.p50, 0))} ms):`,
              ...breakdown.map((b) => `    ${fmt(b.p50).padStart(6)} ms  ${b.segment}`),
            );
          }
          // Redis commands of Bosun alone (the raw chain idle), for when scenario 2 does not run.
          const before = await commandStats(ctx.redis);
          for (let i = 0; i < statsRuns; i++) {
            checkAbort();
            await client.one(`stats-${i}`);
          }
          const stats = diffStats(before, await commandStats(ctx.redis));
          result.commandStats = commandReport(`scenario 1 (${statsRuns} sequential incidents)`, statsRuns, stats);

          const bp50 = percentile(bosunMs, 50);
          const bp99 = percentile(bosunMs, 99);
          const rp50 = percentile(rawMs, 50);
          const rp99 = percentile(rawMs, 99);
          const ratio50 = bp50 / rp50;
          const label = `1 latency (${bosunMs.length} sequential runs each)`;
          result.rows.push(
            {
              scenario: label,
              metric: 'p50 publish→result (ms)',
              bosun: fmt(bp50),
              floor: fmt(rp50),
              ratio: `${fmt(ratio50, 2)}×`,
              target: '≤ 1.30× floor',
              result: ratio50 <= 1.3 ? 'met' : 'missed',
            },
            {
              scenario: '',
              metric: 'p99 publish→result (ms)',
              bosun: fmt(bp99),
              floor: fmt(rp99),
              ratio: `${fmt(bp99 / rp99, 2)}×`,
              target: '—',
              result: 'n/a',
            },
          );
          if ((statuses.completed ?? 0) !== bosunMs.length) result.notes.push(`Bosun run statuses: ${statusText(statuses)}`);
          const summary = (ms: number[]) => ({
            p50: percentile(ms, 50),
            p90: percentile(ms, 90),
            p99: percentile(ms, 99),
            mean: mean(ms),
            min: Math.min(...ms),
            max: Math.max(...ms),
            samples: ms.length,
          });
          result.data = {
            n,
            warm,
            bosun: { ...summary(bosunMs), statuses },
            raw: summary(rawMs),
            ratioP50: ratio50,
            breakdown,
            loadavg: loadavg(),
          };
        } finally {
          await rawClient.close();
          await client.close();
        }
      } finally {
        await b.cluster.stop();
      }
    } finally {
      await raw.stop();
    }
  });
  return result;
}

// ---------------------------------------------------------------------------------------------
// 2. Throughput

export async function scenarioThroughput(ctx: Ctx, requested?: number): Promise<ScenarioResult> {
  const n = requested ?? (ctx.quick ? 500 : 5000);
  const timeoutMs = ctx.quick ? 120_000 : 240_000;
  const result: ScenarioResult = { id: 2, name: 'throughput', rows: [], notes: [], data: { n } };
  await withPrefix(ctx, async (prefix) => {
    const ids = (tag: string) => Array.from({ length: n }, (_, i) => `${tag}-${i}`);

    note(`2 throughput: raw chain, ${n} incidents in bulk`);
    const raw = await RawChain.start({ root: ctx.root, prefix, redisUrl: ctx.redisUrl, concurrency: { incident: 50, task: 50, tool: 64 } });
    let rawRes: Awaited<ReturnType<IncidentClient['bulk']>>;
    let rawStats: ReturnType<typeof diffStats>;
    let rawCpu: CpuReport | undefined;
    try {
      const client = await IncidentClient.open(ctx, prefix, RAW_INCIDENTS);
      try {
        await client.one('raw-warm-0');
        const before = await commandStats(ctx.redis);
        const meter = await CpuMeter.start(raw.procs, ctx.redis);
        rawRes = await client.bulk(ids('raw'), within(ctx, timeoutMs, 0.3), { label: 'raw' });
        rawCpu = await meter.stop();
        rawStats = diffStats(before, await commandStats(ctx.redis));
      } finally {
        await client.close();
      }
    } finally {
      await raw.stop();
    }

    note(`2 throughput: Bosun, ${n} incidents in bulk`);
    const b = await startBosun(ctx, prefix, 2, {});
    let res: Awaited<ReturnType<IncidentClient['bulk']>>;
    let stats: ReturnType<typeof diffStats>;
    let cpu: CpuReport | undefined;
    try {
      const client = await IncidentClient.open(ctx, prefix, INCIDENTS_QUEUE);
      try {
        for (let i = 0; i < 3; i++) await client.one(`warm-${i}`);
        const before = await commandStats(ctx.redis);
        const meter = await CpuMeter.start(b.cluster.procs, ctx.redis);
        res = await client.bulk(ids('inc'), within(ctx, timeoutMs), { label: 'bosun' });
        cpu = await meter.stop();
        stats = diffStats(before, await commandStats(ctx.redis));
      } finally {
        await client.close();
      }
    } finally {
      await b.cluster.stop();
    }

    const tput = (res.done + res.failed) / (res.wallMs / 1000);
    const rawTput = (rawRes.done + rawRes.failed) / (rawRes.wallMs / 1000);
    const ratio = tput / rawTput;
    result.rows.push({
      scenario: `2 throughput (${n} in bulk${ctx.quick ? ', quick' : ''})`,
      metric: 'incidents/s, first publish→last result',
      bosun: fmt(tput),
      floor: fmt(rawTput),
      ratio: `${fmt(ratio, 2)}×`,
      target: '≥ 0.70× floor',
      result: ratio >= 0.7 ? 'met' : 'missed',
    });
    if (cpu && rawCpu) result.rows.push(cpuRow(cpu, res.done + res.failed, rawCpu, rawRes.done + rawRes.failed));
    const commands = commandReport(`scenario 2 (${n} incidents in bulk)`, n, stats, { incidents: n, rows: rawStats });
    result.rows.push(commandsRow(commands));
    if (res.timedOut)
      result.notes.push(
        `Bosun: only ${res.done + res.failed}/${n} finished within ${fmt(res.wallMs / 1000, 0)} s (time budget); throughput is over those.`,
      );
    if (rawRes.timedOut)
      result.notes.push(
        `raw chain: only ${rawRes.done + rawRes.failed}/${n} finished within ${fmt(rawRes.wallMs / 1000, 0)} s (time budget); throughput is over those.`,
      );
    if ((res.statuses.completed ?? 0) !== n)
      result.notes.push(`Bosun run statuses: ${statusText(res.statuses)}; failed jobs ${res.failed}`);
    if (cpu) result.notes.push(`Bosun: ${cpuText(cpu, res.done + res.failed)}`);
    if (rawCpu) result.notes.push(`raw chain: ${cpuText(rawCpu, rawRes.done + rawRes.failed)}`);
    result.data = {
      n,
      loadavg: loadavg(),
      bosun: {
        wallMs: res.wallMs,
        publishMs: res.publishMs,
        perSecond: tput,
        statuses: res.statuses,
        failed: res.failed,
        timedOut: res.timedOut,
        cpu,
      },
      raw: {
        wallMs: rawRes.wallMs,
        publishMs: rawRes.publishMs,
        perSecond: rawTput,
        failed: rawRes.failed,
        timedOut: rawRes.timedOut,
        cpu: rawCpu,
      },
      ratio,
      concurrency: { coordinator: 50, specialist: 50, gateway: 64 },
    };
    result.commandStats = commands;
  });
  return result;
}

// ---------------------------------------------------------------------------------------------
// 3. Many in flight, and 4. scale-out: the same workload

interface InFlightRun {
  wallMs: number;
  done: number;
  failed: number;
  statuses: RunStatusCounts;
  timedOut: boolean;
  peakActiveTasks: number;
  specialists: { pid: number; idleKb: number; peakSampledKb: number; hwmKb: number; samples: number }[];
  otherHwmKb: Record<string, number>;
  cpu: CpuReport;
}

async function inFlightWorkload(
  ctx: Ctx,
  prefix: string,
  id: number,
  opts: {
    n: number;
    latencyMs: number;
    concurrency: number;
    processes: number;
    timeoutMs: number;
    sub?: string;
    workers?: ScenarioConfig['workers'];
  },
): Promise<InFlightRun> {
  const b = await startBosun(
    ctx,
    prefix,
    id,
    {
      kubernetesLatencyMs: opts.latencyMs,
      kubernetesConcurrency: opts.concurrency,
      coordinatorConcurrency: 500,
      gatewayConcurrency: 256,
      ...(opts.workers ? { workers: opts.workers } : {}),
    },
    opts.processes,
    opts.sub ?? '',
  );
  try {
    const client = await IncidentClient.open(ctx, prefix, INCIDENTS_QUEUE);
    const kq = new Queue(specialistQueue('kubernetes'), { connection: ctx.redis, prefix });
    try {
      await sleep(1_500); // let start-up allocations settle before the idle reading
      const idle = b.specialists.map((p) => p.statusKb('VmRSS'));
      const samplers = b.specialists.map((p) => new RssSampler(p, 200));
      let peakActive = 0;
      const meter = await CpuMeter.start(b.cluster.procs, ctx.redis);
      const res = await client.bulk(
        Array.from({ length: opts.n }, (_, i) => `inc-${i}`),
        opts.timeoutMs,
        {
          label: `${opts.processes} specialist(s)`,
          onPoll: async () => {
            const c = await kq.getJobCounts('active');
            peakActive = Math.max(peakActive, c.active ?? 0);
          },
        },
      );
      const cpu = await meter.stop();
      const sampled = samplers.map((s) => s.stop());
      const specialists = b.specialists.map((p, i) => ({
        pid: p.pid,
        idleKb: idle[i]!,
        peakSampledKb: sampled[i]!.peakKb,
        hwmKb: p.statusKb('VmHWM'),
        samples: sampled[i]!.count,
      }));
      return {
        wallMs: res.wallMs,
        done: res.done,
        failed: res.failed,
        statuses: res.statuses,
        timedOut: res.timedOut,
        peakActiveTasks: peakActive,
        specialists,
        otherHwmKb: { 'tool-gateway': b.gateway.statusKb('VmHWM'), coordinator: b.coordinator.statusKb('VmHWM') },
        cpu,
      };
    } finally {
      await kq.close();
      await client.close();
    }
  } finally {
    await b.cluster.stop();
  }
}

/** The peak RSS targets of scenario 3 (issue 15): < 400 MB with 2,000 runs in flight, < 500 MB with 10,000. */
function inFlightTargetMb(n: number): number {
  return n <= 2000 ? 400 : 500;
}

/**
 * 3. Many in flight: `n` incidents at once on one specialist process (kubernetes concurrency `n`,
 * at least 2,000). Without `nOverride`, 2,000 then 10,000 (quick: 200).
 */
export async function scenarioInFlight(ctx: Ctx, nOverride?: number): Promise<ScenarioResult> {
  const counts = nOverride !== undefined ? [nOverride] : ctx.quick ? [200] : [2000, 10_000];
  const result: ScenarioResult = { id: 3, name: 'many in flight', rows: [], notes: [], data: {} };
  const runs: Record<string, unknown>[] = [];
  for (const [k, n] of counts.entries()) {
    checkAbort();
    if (k > 0 && budgetLeft(ctx) < 60_000) {
      result.notes.push(`${n} in flight: skipped, the time budget is spent`);
      continue;
    }
    runs.push(await inFlightOnce(ctx, n, result));
  }
  // The first count's figures at the top level, as before scenario 3 ran more than one count.
  result.data = { ...runs[0], runs };
  return result;
}

/** One count of scenario 3: its rows and notes go into `result`; returns its data. */
async function inFlightOnce(ctx: Ctx, n: number, result: ScenarioResult): Promise<Record<string, unknown>> {
  const latencyMs = 2000;
  const concurrency = Math.max(2000, n);
  const targetMb = inFlightTargetMb(n);
  // More than 2,000 tasks in one process: a lock of 30 s (BullMQ's default) rather than the
  // config's 10 s, so that a busy event loop renews it in time (docs/scaling.md).
  const workers = n > 2000 ? { lockDurationMs: 30_000, stalledIntervalMs: 5_000, maxStalledCount: 2 } : undefined;
  return withPrefix(ctx, async (prefix) => {
    note(`3 in flight: ${n} incidents at once, one specialist, kubernetes concurrency ${concurrency}, model latency ${latencyMs} ms`);
    const r = await inFlightWorkload(ctx, prefix, 3, {
      n,
      latencyMs,
      concurrency,
      processes: 1,
      timeoutMs: within(ctx, 240_000),
      sub: `-n${n}`,
      ...(workers ? { workers } : {}),
    });
    const s = r.specialists[0]!;
    const peakKb = Math.max(s.hwmKb, s.peakSampledKb);
    const perRunKb = (peakKb - s.idleKb) / n;
    const allDone = !r.timedOut && r.done === n && (r.statuses.completed ?? 0) === n;
    const label = `3 in flight (${n} at once, latency ${latencyMs} ms)`;
    result.rows.push(
      {
        scenario: label,
        metric: 'completed runs',
        bosun: `${r.statuses.completed ?? 0}/${n}`,
        target: 'all',
        result: allDone ? 'met' : 'missed',
      },
      { scenario: '', metric: 'wall time (s)', bosun: fmt(r.wallMs / 1000), target: '—', result: 'n/a' },
      { scenario: '', metric: 'peak kubernetes tasks active at once', bosun: String(r.peakActiveTasks), target: '—', result: 'n/a' },
      {
        scenario: '',
        metric: 'specialist peak RSS (MB; VmHWM)',
        bosun: fmt(mb(peakKb)),
        target: `< ${targetMb} MB`,
        result: mb(peakKb) < targetMb ? 'met' : 'missed',
      },
      { scenario: '', metric: 'specialist idle RSS (MB)', bosun: fmt(mb(s.idleKb)), target: '—', result: 'n/a' },
      { scenario: '', metric: 'memory per in-flight run (KB)', bosun: fmt(perRunKb), target: '—', result: 'n/a' },
    );
    if (!allDone) result.notes.push(`${n}: statuses: ${statusText(r.statuses)}; failed ${r.failed}; timed out: ${r.timedOut}`);
    result.notes.push(`${n}: ${cpuText(r.cpu, r.done + r.failed)}`);
    return {
      n,
      latencyMs,
      kubernetesConcurrency: concurrency,
      coordinatorConcurrency: 500,
      gatewayConcurrency: 256,
      workers: workers ?? 'config defaults',
      wallMs: r.wallMs,
      statuses: r.statuses,
      failed: r.failed,
      peakActiveTasks: r.peakActiveTasks,
      specialist: { ...s, peakKb, perRunKb },
      otherHwmKb: r.otherHwmKb,
      cpu: r.cpu,
      loadavg: loadavg(),
    };
  });
}

export async function scenarioScaleOut(ctx: Ctx, capOverride?: number): Promise<ScenarioResult> {
  const n = ctx.quick ? 200 : 2000;
  const latencyMs = 2000;
  const cap = capOverride ?? (ctx.quick ? 50 : 125);
  const result: ScenarioResult = {
    id: 4,
    name: 'scale-out',
    rows: [],
    notes: [],
    data: { n, latencyMs, kubernetesConcurrencyPerProcess: cap },
  };
  const runs: {
    processes: number;
    wallMs: number;
    perSecond: number;
    completed: number;
    peakActiveTasks: number;
    cpu: CpuReport;
    loadavg: number[];
  }[] = [];
  const counts = [1, 2, 4];
  for (const [k, processes] of counts.entries()) {
    checkAbort();
    if (budgetLeft(ctx) < 20_000) {
      result.notes.push(`${processes} process(es): skipped, the time budget is spent`);
      continue;
    }
    // Leave the later configurations (fewer seconds each: more capacity) their share of the budget.
    const share = [0.5, 0.6, 1][k]!;
    await withPrefix(ctx, async (prefix) => {
      note(`4 scale-out: ${n} incidents, ${processes} specialist process(es) × kubernetes concurrency ${cap}`);
      const r = await inFlightWorkload(ctx, prefix, 4, {
        n,
        latencyMs,
        concurrency: cap,
        processes,
        timeoutMs: within(ctx, 240_000, share),
        sub: `-p${processes}`,
      });
      const finished = r.done + r.failed;
      runs.push({
        processes,
        wallMs: r.wallMs,
        perSecond: finished / (r.wallMs / 1000),
        completed: r.statuses.completed ?? 0,
        peakActiveTasks: r.peakActiveTasks,
        cpu: r.cpu,
        loadavg: loadavg(),
      });
      result.notes.push(`${processes} process(es): ${cpuText(r.cpu, finished)}`);
      if (r.timedOut || (r.statuses.completed ?? 0) !== n)
        result.notes.push(`${processes} process(es): statuses ${statusText(r.statuses)}, failed ${r.failed}, timed out ${r.timedOut}`);
    });
  }
  const base = runs[0]?.perSecond ?? Number.NaN;
  runs.forEach((r, i) => {
    const ratio = r.perSecond / base;
    result.rows.push({
      scenario: i === 0 ? `4 scale-out (${n} runs, kubernetes concurrency ${cap}/process, latency ${latencyMs} ms)` : '',
      metric: `${r.processes} specialist process${r.processes > 1 ? 'es' : ''}: incidents/s (peak active ${r.peakActiveTasks})`,
      bosun: fmt(r.perSecond),
      ratio: `${fmt(ratio, 2)}× vs 1`,
      target: r.processes === 2 ? '≥ 1.80× vs 1' : '—',
      result: r.processes === 2 ? (ratio >= 1.8 ? 'met' : 'missed') : 'n/a',
    });
  });
  result.data = {
    n,
    latencyMs,
    kubernetesConcurrencyPerProcess: cap,
    runs,
    idealPerSecond: runs.map((r) => ({ processes: r.processes, capacityBound: (r.processes * cap) / ((3 * latencyMs) / 1000) })),
  };
  result.notes.push(
    `each specialist process is capped at kubernetes concurrency ${cap}, so capacity (processes × ${cap} tasks, each ≥ 3 model calls × ${latencyMs} ms) is the limit: the ideal is ${runs.map((r) => fmt((r.processes * cap) / ((3 * latencyMs) / 1000), 0)).join(' / ')} incidents/s, as long as the machine's CPU keeps up (see the CPU lines).`,
  );
  return result;
}

// ---------------------------------------------------------------------------------------------
// 5. Recovery

export async function scenarioRecovery(ctx: Ctx): Promise<ScenarioResult> {
  const n = ctx.quick ? 40 : 100;
  const latencyMs = 2000;
  const workers = { lockDurationMs: 3000, stalledIntervalMs: 1000 };
  const result: ScenarioResult = { id: 5, name: 'recovery', rows: [], notes: [], data: {} };
  if (!ctx.nc) throw new Error('scenario 5 needs NATS');
  const nc = ctx.nc;
  await withPrefix(ctx, async (prefix) => {
    note(
      `5 recovery: ${n} runs in flight on 2 specialists (lock ${workers.lockDurationMs} ms, stalled check ${workers.stalledIntervalMs} ms), SIGKILL one`,
    );
    const b = await startBosun(
      ctx,
      prefix,
      5,
      { kubernetesLatencyMs: latencyMs, kubernetesConcurrency: n, coordinatorConcurrency: 200, workers },
      2,
    );
    const modelCalls: { runId: string; taskId: string; at: number; recv: number }[] = [];
    const sub = nc.subscribe(allRunsSubject(prefix), {
      callback: (err, msg) => {
        if (err) return;
        try {
          const e = msg.json<{ type: string; runId: string; agent?: string; at: string; data?: { taskId?: string } }>();
          if (e.type === 'model.called' && e.agent === 'kubernetes') {
            modelCalls.push({ runId: e.runId, taskId: String(e.data?.taskId ?? ''), at: Date.parse(e.at), recv: Date.now() });
          }
        } catch {
          /* not an event */
        }
      },
    });
    await nc.flush();
    const client = await IncidentClient.open(ctx, prefix, INCIDENTS_QUEUE);
    const kq = new Queue(specialistQueue('kubernetes'), { connection: ctx.redis, prefix });
    try {
      const ids = Array.from({ length: n }, (_, i) => `inc-${i}`);
      const finished = client.bulk(ids, within(ctx, 120_000), { label: 'recovery' });
      // Awaited below, after the kill; a rejection meanwhile is not unhandled.
      finished.catch(() => undefined);
      // Wait until (nearly) every task is active, then a second more: the tasks are mid-model-call.
      const t0 = Date.now();
      for (;;) {
        checkAbort();
        const c = await kq.getJobCounts('active');
        if ((c.active ?? 0) >= n || Date.now() - t0 > 20_000) break;
        await sleep(100);
      }
      await sleep(1_000);
      const active = (await kq.getActive(0, -1)) as Job[];
      const held = new Map<number, Job[]>();
      for (const j of active) {
        const pid = Number(/-(\d+)$/.exec(j.processedBy ?? '')?.[1]);
        if (!held.has(pid)) held.set(pid, []);
        held.get(pid)!.push(j);
      }
      const victim = [...b.specialists].sort((x, y) => (held.get(y.pid)?.length ?? 0) - (held.get(x.pid)?.length ?? 0))[0]!;
      const survivor = b.specialists.find((p) => p !== victim)!;
      const victimJobs = held.get(victim.pid) ?? [];
      const victimRuns = new Map(victimJobs.map((j) => [String((j.data as { runId?: string }).runId), String(j.id)]));
      note(
        `5 recovery: ${active.length} tasks active; ${victimJobs.length} held by ${victim.label} (pid ${victim.pid}), ${held.get(survivor.pid)?.length ?? 0} by ${survivor.label}; SIGKILL ${victim.label}`,
      );
      const killAt = Date.now();
      await victim.kill();

      // The next model.called of each of the victim's runs, numbered after the kill.
      const firstAfter = new Map<string, number>();
      const deadline = Date.now() + within(ctx, 60_000);
      while (firstAfter.size < victimRuns.size && Date.now() < deadline) {
        checkAbort();
        for (const e of modelCalls) {
          if (e.at > killAt && victimRuns.has(e.runId) && !firstAfter.has(e.runId)) firstAfter.set(e.runId, e.recv - killAt);
        }
        await sleep(50);
      }
      const all = await finished;
      // Who finished the victim's tasks?
      let bySurvivor = 0;
      for (const taskId of victimRuns.values()) {
        const j = (await kq.getJob(taskId)) as Job | undefined;
        if (j?.processedBy?.endsWith(`-${survivor.pid}`)) bySurvivor++;
      }
      const delays = [...firstAfter.values()];
      const p50 = percentile(delays, 50);
      const max = delays.length ? Math.max(...delays) : Number.NaN;
      const label = `5 recovery (${n} in flight, 2 specialists, SIGKILL one; lock ${workers.lockDurationMs} ms, stalled check ${workers.stalledIntervalMs} ms)`;
      const allCompleted = !all.timedOut && (all.statuses.completed ?? 0) === n;
      result.rows.push(
        {
          scenario: label,
          metric: `kill → next model.called elsewhere, p50 (s) [${delays.length}/${victimRuns.size} runs]`,
          bosun: fmt(p50 / 1000, 2),
          target: '—',
          result: 'n/a',
        },
        { scenario: '', metric: 'kill → next model.called elsewhere, max (s)', bosun: fmt(max / 1000, 2), target: '—', result: 'n/a' },
        {
          scenario: '',
          metric: 'runs completed after the kill',
          bosun: `${all.statuses.completed ?? 0}/${n}`,
          target: 'all',
          result: allCompleted ? 'met' : 'missed',
        },
      );
      result.notes.push(
        `the next step includes the re-done model call (${latencyMs} ms of fake latency); the hand-over itself (lock expiry + stalled check + pick-up) is ≈ p50 ${fmt((p50 - latencyMs) / 1000, 2)} s, max ${fmt((max - latencyMs) / 1000, 2)} s.`,
        `${bySurvivor}/${victimRuns.size} of the killed process's tasks were finished by ${survivor.label}.`,
      );
      if (!allCompleted)
        result.notes.push(`run statuses after the kill: ${statusText(all.statuses)}; failed ${all.failed}; timed out ${all.timedOut}`);
      result.data = {
        n,
        latencyMs,
        workers: { ...workers, maxStalledCount: 2 },
        activeAtKill: active.length,
        heldByVictim: victimJobs.length,
        heldBySurvivor: held.get(survivor.pid)?.length ?? 0,
        resumedObserved: delays.length,
        delaysMs: delays.sort((a, x) => a - x),
        p50Ms: p50,
        maxMs: max,
        finishedBySurvivor: bySurvivor,
        statuses: all.statuses,
        wallMs: all.wallMs,
      };
    } finally {
      sub.unsubscribe();
      await kq.close();
      await client.close();
      await b.cluster.stop();
    }
  });
  return result;
}
