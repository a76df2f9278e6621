/**
 * The soak (`--soak 10m`, scenario 9): the standard incident published at a steady rate below
 * capacity on one Bosun cluster for a long time, watching whether any process's memory keeps
 * growing and whether latency drifts. See bench/README.md.
 */
import { cpus } from 'node:os';
import { INCIDENTS_QUEUE } from '@bosun/contract';
import { CpuMeter, RssSampler, childrenOf, type StatusField } from './cluster.js';
import { IncidentClient, cpuText, startBosun, withPrefix, type CpuReport, type Ctx, type Row, type ScenarioResult } from './scenarios.js';
import {
  bucketMs,
  latencyBuckets,
  parseDuration,
  rssBuckets,
  slopeMbPerMin,
  warmupMs,
  type LatencyBucket,
  type SoakRun,
} from './series.js';
import { checkAbort, fmt, mb, note, percentile, sleep } from './util.js';

export const SOAK_ID = 9;

/**
 * Incidents per second when `--soak-rate` is not given. About 13 ms of CPU per standard
 * incident (all processes, Redis and NATS; docs/scaling.md) makes 20/s about a quarter of a
 * core: a 2-core machine stays far from saturation (measured: bench/README.md, "Soak").
 */
export const DEFAULT_SOAK_RATE = 20;

/** Slope target per process after the warm-up, MB/min. */
export const SLOPE_TARGET = 1;

export interface SoakOptions {
  durationMs: number;
  /** Incidents published per second. */
  rate: number;
  /** RSS sampling interval. */
  sampleMs: number;
}

/** `--soak <duration>` and `--soak-rate <n>` as options; the duration defaults to 2 min (quick 1 min). */
export function soakOptions(duration: string | undefined, rate: string | undefined, quick: boolean): SoakOptions {
  const durationMs = duration === undefined ? (quick ? 60_000 : 120_000) : parseDuration(duration);
  if (durationMs < 10_000 || durationMs > 24 * 3_600_000) throw new Error(`--soak: ${duration} must be between 10s and 24h`);
  const r = rate === undefined ? DEFAULT_SOAK_RATE : Number(rate);
  if (!(Number.isFinite(r) && r > 0 && r <= 1_000))
    throw new Error(`--soak-rate: "${rate}" must be a number of incidents/s, above 0 and at most 1000`);
  return { durationMs, rate: r, sampleMs: 2_000 };
}

/** Publishes the standard incident every 1/rate s for `durationMs` (open loop) and collects each outcome. */
async function steadyLoad(client: IncidentClient, opts: SoakOptions): Promise<SoakRun[]> {
  const runs: SoakRun[] = [];
  const pending = new Set<Promise<void>>();
  const t0 = Date.now();
  let lastNote = t0;
  for (let i = 0; ; i++) {
    checkAbort();
    const due = t0 + (i * 1000) / opts.rate;
    if (due >= t0 + opts.durationMs) break;
    if (due > Date.now()) await sleep(due - Date.now());
    const at = Date.now() - t0;
    const p = client.one(`soak-${i}`, 30_000).then(
      (r) => void runs.push({ at, ms: r.ms, status: r.status }),
      (err: unknown) => void runs.push({ at, ms: Number.NaN, status: `error: ${err instanceof Error ? err.message : String(err)}` }),
    );
    pending.add(p);
    void p.finally(() => pending.delete(p));
    if (Date.now() - lastNote > 30_000) {
      lastNote = Date.now();
      note(`9 soak: ${i + 1} published, ${pending.size} in flight after ${fmt((Date.now() - t0) / 1000, 0)} s`);
    }
  }
  await Promise.all(pending);
  return runs;
}

/** The machine's busy share of all cores since the previous call (os.cpus() times). */
function machineBusy(): () => number {
  const totals = () =>
    cpus().reduce((a, c) => ({ busy: a.busy + c.times.user + c.times.nice + c.times.sys + c.times.irq, idle: a.idle + c.times.idle }), {
      busy: 0,
      idle: 0,
    });
  let prev = totals();
  return () => {
    const now = totals();
    const busy = now.busy - prev.busy;
    const all = busy + now.idle - prev.idle;
    prev = now;
    return all > 0 ? (100 * busy) / all : Number.NaN;
  };
}

/** What the soak measured of one process. */
interface SoakProcess {
  name: string;
  pid: number;
  /** Mean RSS per bucket, MB. */
  rssMb: number[];
  startMb: number;
  endMb: number;
  slopeMbPerMin: number;
  slopeSamples: number;
  /** The slope over the second half only: lower than the other when the warm-up outlasted its allowance. */
  secondHalfMbPerMin: number;
  samples: { t: number; kb: number }[];
}

export async function scenarioSoak(ctx: Ctx, opts: SoakOptions): Promise<ScenarioResult> {
  const result: ScenarioResult = { id: SOAK_ID, name: 'soak', rows: [], notes: [], data: {} };
  await withPrefix(ctx, async (prefix) => {
    note(`9 soak: the standard incident at ${opts.rate}/s for ${fmt(opts.durationMs / 1000, 0)} s on one cluster`);
    const b = await startBosun(ctx, prefix, SOAK_ID, {});
    try {
      const client = await IncidentClient.open(ctx, prefix, INCIDENTS_QUEUE);
      try {
        for (let i = 0; i < 3; i++) await client.one(`warm-${i}`);
        const sources: { name: string; pid: number; source: { statusKb(field: StatusField): number } }[] = [
          ...b.cluster.procs.map((p) => ({ name: p.label, pid: p.pid, source: p })),
          { name: 'tool-gateway MCP child', pid: b.gateway.pid, source: childrenOf(b.gateway.pid) },
        ];
        const width = bucketMs(opts.durationMs);
        const count = Math.ceil(opts.durationMs / width);
        const busy = machineBusy();
        const busyPct: number[] = [];
        const busyTimer = setInterval(() => busyPct.push(busy()), width);
        const t0 = Date.now();
        const samplers = sources.map((s) => new RssSampler(s.source, opts.sampleMs));
        const meter = await CpuMeter.start(b.cluster.procs, ctx.redis);
        let runs: SoakRun[];
        try {
          runs = await steadyLoad(client, opts);
        } finally {
          clearInterval(busyTimer);
          for (const s of samplers) s.stop();
        }
        const cpu = await meter.stop();
        if (busyPct.length < count) busyPct.push(busy());
        const warm = warmupMs(opts.durationMs);
        const procs = sources.map((s, i) =>
          summarizeProcess(s.name, samplers[i]!.samples, {
            pid: s.pid,
            t0,
            warmEnd: t0 + warm,
            half: t0 + opts.durationMs / 2,
            width,
            count,
          }),
        );
        const latency = latencyBuckets(runs, width, count);
        report(result, opts, { procs, latency, runs, busyPct, warm, width, clusterPct: clusterShare(cpu) });
        result.notes.push(cpuText(cpu, runs.length));
        result.data = {
          durationMs: opts.durationMs,
          rate: opts.rate,
          sampleMs: opts.sampleMs,
          warmupMs: warm,
          bucketMs: width,
          published: runs.length,
          statuses: countStatuses(runs),
          buckets: latency.map((l, k) => ({
            fromS: (k * width) / 1000,
            machineBusyPct: busyPct[k] ?? Number.NaN,
            ...l,
            rssMb: Object.fromEntries(procs.map((p) => [p.name, p.rssMb[k]])),
          })),
          processes: procs.map(({ samples, ...rest }) => ({ ...rest, samples: samples.map((s) => [s.t - t0, s.kb]) })),
          cpu,
        };
      } finally {
        await client.close();
      }
    } finally {
      await b.cluster.stop();
    }
  });
  return result;
}

function summarizeProcess(
  name: string,
  samples: { t: number; kb: number }[],
  at: { pid: number; t0: number; warmEnd: number; half: number; width: number; count: number },
): SoakProcess {
  const slope = slopeMbPerMin(samples, at.warmEnd);
  const after = samples.filter((s) => s.t >= at.warmEnd);
  return {
    name,
    pid: at.pid,
    rssMb: rssBuckets(samples, at.t0, at.width, at.count),
    startMb: after.length ? mb(after[0]!.kb) : Number.NaN,
    endMb: samples.length ? mb(samples.at(-1)!.kb) : Number.NaN,
    slopeMbPerMin: slope.mbPerMin,
    slopeSamples: slope.samples,
    secondHalfMbPerMin: slopeMbPerMin(samples, at.half).mbPerMin,
    samples,
  };
}

/**
 * The share of the machine's cores (%) that the cluster used: its processes, the MCP server, Redis
 * and NATS (Redis's CPU is server-wide: other clients of the same Redis count too).
 */
function clusterShare(cpu: CpuReport): number {
  const s = Object.entries(cpu.cpuSeconds)
    .filter(([k, v]) => k !== 'bench (this process)' && Number.isFinite(v))
    .reduce((a, [, v]) => a + v, 0);
  return (100 * s) / (cpu.wallS * cpus().length);
}

function countStatuses(runs: SoakRun[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of runs) {
    const s = r.status.startsWith('error') ? 'error' : r.status;
    out[s] = (out[s] ?? 0) + 1;
  }
  return out;
}

/** The soak's rows (one slope per process, against the target) and its series as notes. */
function report(
  result: ScenarioResult,
  opts: SoakOptions,
  m: {
    procs: SoakProcess[];
    latency: LatencyBucket[];
    runs: SoakRun[];
    busyPct: number[];
    warm: number;
    width: number;
    clusterPct: number;
  },
): void {
  const after = m.runs.filter((r) => r.at >= m.warm && Number.isFinite(r.ms)).map((r) => r.ms);
  const completed = m.runs.filter((r) => r.status === 'completed').length;
  const label = `9 soak (${fmt(opts.durationMs / 60_000, 1)} min at ${opts.rate}/s, warm-up ${fmt(m.warm / 1000, 0)} s)`;
  const rows: Row[] = [
    {
      scenario: label,
      metric: 'completed runs',
      bosun: `${completed}/${m.runs.length}`,
      target: 'all',
      result: completed === m.runs.length ? 'met' : 'missed',
      key: '9:completed runs',
      value: m.runs.length ? completed / m.runs.length : Number.NaN,
    },
    { scenario: '', metric: 'p50 publish→result after warm-up (ms)', bosun: fmt(percentile(after, 50)), result: 'n/a', key: '9:p50' },
    { scenario: '', metric: 'p99 publish→result after warm-up (ms)', bosun: fmt(percentile(after, 99)), result: 'n/a', key: '9:p99' },
    {
      scenario: '',
      metric: `CPU of the cluster, services + Redis + NATS (% of ${cpus().length} cores)`,
      bosun: fmt(m.clusterPct, 1),
      result: 'n/a',
      key: '9:cluster cpu',
      value: m.clusterPct,
    },
  ];
  for (const p of m.procs) {
    rows.push({
      scenario: '',
      metric: `${p.name}: RSS slope after warm-up (MB/min; ${fmt(p.startMb)} → ${fmt(p.endMb)} MB)`,
      bosun: fmt(p.slopeMbPerMin, 2),
      target: `< ${SLOPE_TARGET} MB/min`,
      result: p.slopeMbPerMin < SLOPE_TARGET ? 'met' : 'missed',
      key: `9:rss slope:${p.name}`,
      value: p.slopeMbPerMin,
      better: 'lower',
    });
  }
  result.rows.push(...rows);
  result.notes.push(...seriesText(m.procs, m.latency, m.busyPct, m.width));
  result.notes.push(
    `RSS slope over the second half only (MB/min): ${m.procs.map((p) => `${p.name} ${fmt(p.secondHalfMbPerMin, 2)}`).join(', ')}`,
  );
}

/** The series as a compact table: one line per bucket. */
function seriesText(procs: SoakProcess[], latency: LatencyBucket[], busyPct: number[], width: number): string[] {
  const names = procs.map((p) => p.name.replace('tool-gateway MCP child', 'MCP child'));
  const head = ['from', ...names.map((n) => `${n} MB`), 'runs', 'p50 ms', 'p99 ms', 'busy %'];
  const lines = latency.map((l, k) => [
    `${fmt((k * width) / 1000, 0)} s`,
    ...procs.map((p) => fmt(p.rssMb[k])),
    String(l.runs - l.failed) + (l.failed ? ` (+${l.failed} failed)` : ''),
    fmt(l.p50),
    fmt(l.p99),
    fmt(busyPct[k], 0),
  ]);
  const w = head.map((h, i) => Math.max(h.length, ...lines.map((c) => c[i]!.length)));
  const line = (c: string[]) => c.map((x, i) => x.padStart(w[i]!)).join('  ');
  return [
    `series per ${fmt(width / 1000, 0)} s (RSS: mean of the samples; busy: the whole machine, all cores):`,
    `    ${line(head)}`,
    ...lines.map((c) => `    ${line(c)}`),
  ];
}
