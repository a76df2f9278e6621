/**
 * Scenarios 10-12: the standard incident on the durable peers a team would otherwise choose —
 * LangGraph.js with its PostgreSQL checkpointer (durability "sync", 10, and the default "async",
 * 11) and Restate (12) — with the fake model's plan and the demo MCP server over one stdio
 * session, beside Bosun's figures of scenarios 1 and 2 of the same run (`--only 1,2,10`).
 *
 * Each: sequential runs after warm-ups (p50/p99), then incidents at most 50 at a time
 * (incidents/s), CPU per incident of every process involved (the peer's server and database
 * included), peak RSS; then a few sequential runs with commits that do not wait for the disk.
 */
import { bosunFigures, ratio } from '../beside-bosun.js';
import { within, type Ctx, type Row, type ScenarioResult } from '../scenarios.js';
import { checkAbort, fmt, note, percentile } from '../util.js';
import { langGraphDriver, restateDriver, type PeerDriver } from './drivers.js';
import { ensurePeers } from './load.js';
import { checkOutcome, peerIncident } from './plan.js';

/** The peer scenarios by number. */
export const PEER_SCENARIOS = {
  10: { name: 'langgraph-sync', title: 'LangGraph + PostgreSQL, durability "sync"', target: true },
  11: { name: 'langgraph-async', title: 'LangGraph + PostgreSQL, durability "async" (the default)', target: false },
  12: { name: 'restate', title: 'Restate, every model and tool call in ctx.run', target: true },
} as const;
export type PeerScenarioId = keyof typeof PEER_SCENARIOS;

function start(ctx: Ctx, id: PeerScenarioId, fsync: boolean): Promise<PeerDriver> {
  if (id === 12) return restateDriver({ root: ctx.root, fsync });
  return langGraphDriver({
    root: ctx.root,
    durability: id === 10 ? 'sync' : 'async',
    ...(fsync ? {} : { pgOptions: '-c synchronous_commit=off' }),
  });
}

interface Measured {
  done: number;
  wallMs: number;
  ms: number[];
  counted: Record<string, number>;
  apart: Record<string, number>;
  peakRssKb: Record<string, number>;
}

const sumOf = (r: Record<string, number>) => Object.values(r).reduce((a, b) => a + b, 0);

/** `n` runs, at most `concurrency` at a time, until done or `budgetMs`; every outcome checked. */
async function measure(d: PeerDriver, tag: string, n: number, concurrency: number, budgetMs: number): Promise<Measured> {
  const peakRssKb: Record<string, number> = {};
  const sample = () => {
    for (const [k, v] of Object.entries(d.rssKb())) if (Number.isFinite(v)) peakRssKb[k] = Math.max(peakRssKb[k] ?? 0, v);
  };
  const timer = setInterval(sample, 200);
  timer.unref();
  const meter = await d.meter();
  const t0 = performance.now();
  const ms: number[] = [];
  let next = 0;
  const lane = async () => {
    while (next < n && performance.now() - t0 < budgetMs) {
      checkAbort();
      const i = next++;
      const incident = peerIncident(`${tag}-${i}`);
      const s = performance.now();
      checkOutcome(incident.id, incident, await d.run(incident));
      ms.push(performance.now() - s);
    }
  };
  try {
    await Promise.all(Array.from({ length: concurrency }, lane));
  } finally {
    clearInterval(timer);
  }
  const wallMs = performance.now() - t0;
  sample();
  const cpu = await meter.stop();
  return { done: ms.length, wallMs, ms, counted: cpu.counted, apart: cpu.apart, peakRssKb };
}

const perIncident = (r: Record<string, number>, done: number) =>
  Object.entries(r)
    .map(([k, s]) => `${k} ${fmt((1000 * s) / Math.max(1, done), 2)}`)
    .join(', ');

/** Scenario 10, 11 or 12. The rows put Bosun in the `bosun` column and the peer in the floor column; the ratio is Bosun / peer. */
export async function scenarioPeer(ctx: Ctx, id: PeerScenarioId, earlier: readonly ScenarioResult[]): Promise<ScenarioResult> {
  const spec = PEER_SCENARIOS[id];
  ensurePeers(ctx.root);
  const quick = ctx.quick;
  const warm = quick ? 5 : 20;
  const seqN = quick ? 30 : 300;
  const tputN = quick ? 500 : 5000;
  const unsyncedN = quick ? 10 : 100;
  const concurrency = 50;

  note(`${id} ${spec.name}: ${warm} warm-ups, ${seqN} sequential runs, then ${tputN} at most ${concurrency} at a time`);
  const d = await start(ctx, id, true);
  let seq: Measured;
  let tput: Measured;
  try {
    await measure(d, 'warm', warm, 1, 60_000);
    seq = await measure(d, 'seq', seqN, 1, within(ctx, quick ? 30_000 : 75_000, 0.25));
    tput = await measure(d, 'tput', tputN, concurrency, within(ctx, quick ? 60_000 : 150_000, 0.6));
  } finally {
    await d.close();
  }
  note(`${id} ${spec.name}: ${unsyncedN} sequential runs with commits that do not wait for the disk`);
  const u = await start(ctx, id, false);
  let unsynced: Measured;
  try {
    await measure(u, 'warm', warm, 1, 60_000);
    unsynced = await measure(u, 'nosync', unsyncedN, 1, within(ctx, 30_000, 0.5));
  } finally {
    await u.close();
  }

  const b = bosunFigures(earlier);
  const peerCpuMs = (1000 * sumOf(tput.counted)) / Math.max(1, tput.done);
  const peerRate = tput.done / (tput.wallMs / 1000);
  const p50 = percentile(seq.ms, 50);
  const p99 = percentile(seq.ms, 99);
  const missing = b.p50 === undefined || b.cpuMs === undefined ? ' (Bosun: run with --only 1,2,' + String(id) + ')' : '';
  const judge = (ok: boolean | undefined) => (!spec.target || ok === undefined ? 'n/a' : ok ? 'met' : 'missed');
  const rateRatio = b.perSecond !== undefined ? b.perSecond / peerRate : undefined;
  const cpuRatio = b.cpuMs !== undefined ? b.cpuMs / peerCpuMs : undefined;
  const rows: Row[] = [
    {
      scenario: `${id} ${spec.title}${missing}`,
      metric: `p50 latency (ms), Bosun s1 vs peer (${seq.done} sequential)`,
      bosun: fmt(b.p50),
      floor: fmt(p50),
      ratio: ratio(b.p50, p50),
      result: 'n/a',
    },
    { scenario: '', metric: 'p99 latency (ms), same', bosun: fmt(b.p99), floor: fmt(p99), ratio: ratio(b.p99, p99), result: 'n/a' },
    {
      scenario: '',
      metric: `incidents/s, Bosun s2 vs peer (${tput.done} at most ${concurrency} at a time)`,
      bosun: fmt(b.perSecond),
      floor: fmt(peerRate),
      ratio: ratio(b.perSecond, peerRate),
      ...(spec.target ? { target: '≥ 1.00× the peer' } : {}),
      result: judge(rateRatio === undefined ? undefined : rateRatio >= 1),
    },
    {
      scenario: '',
      metric: 'CPU ms per incident, all processes (Bosun s2 with Redis and NATS; the peer with its server or database)',
      bosun: fmt(b.cpuMs, 2),
      floor: fmt(peerCpuMs, 2),
      ratio: ratio(b.cpuMs, peerCpuMs),
      ...(spec.target ? { target: '≤ 1.00× the peer' } : {}),
      result: judge(cpuRatio === undefined ? undefined : cpuRatio <= 1),
    },
    {
      scenario: '',
      metric: `peer p50 latency (ms), commits not waiting for the disk (${unsynced.done} sequential)`,
      bosun: '—',
      floor: fmt(percentile(unsynced.ms, 50)),
      result: 'n/a',
    },
    {
      scenario: '',
      metric: `peer peak RSS (MB): ${Object.keys(tput.peakRssKb).join(' + ')}`,
      bosun: '—',
      floor: Object.values(tput.peakRssKb)
        .map((kb) => fmt(kb / 1024, 0))
        .join(' + '),
      result: 'n/a',
    },
  ];
  const versions = Object.entries(d.versions)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
  const notes = [
    `${id} ${spec.name}: ${versions}; the ratio column is Bosun / the peer`,
    `${id} CPU ms per incident at ${concurrency} in flight: ${perIncident(tput.counted, tput.done)}${
      Object.keys(tput.apart).length
        ? `; not counted (as scenario 2 does not count its publisher): ${perIncident(tput.apart, tput.done)}`
        : ''
    }; sequential: ${fmt((1000 * sumOf(seq.counted)) / Math.max(1, seq.done), 2)} (${perIncident(seq.counted, seq.done)})`,
    `${id} commits not waiting for the disk (${id === 12 ? 'rocksdb-disable-wal-fsync in the log server and the local loglet' : "synchronous_commit=off on the checkpointer's connections"}): p50 ${fmt(percentile(unsynced.ms, 50))} ms, p99 ${fmt(percentile(unsynced.ms, 99))} ms, CPU ${fmt((1000 * sumOf(unsynced.counted)) / Math.max(1, unsynced.done), 2)} ms per incident — Bosun's Redis on this machine keeps nothing on disk`,
  ];
  if (tput.done < tputN) notes.push(`${id}: only ${tput.done}/${tputN} finished within the time budget; the rate is over those`);
  return {
    id,
    name: spec.name,
    rows,
    notes,
    data: {
      versions: d.versions,
      concurrency,
      sequential: { p50, p90: percentile(seq.ms, 90), p99, samples: seq.done, cpuSeconds: seq.counted },
      throughput: {
        n: tputN,
        done: tput.done,
        wallMs: tput.wallMs,
        perSecond: peerRate,
        cpuMsPerIncident: peerCpuMs,
        cpuSeconds: tput.counted,
        apart: tput.apart,
        peakRssKb: tput.peakRssKb,
      },
      unsynced: {
        p50: percentile(unsynced.ms, 50),
        p99: percentile(unsynced.ms, 99),
        samples: unsynced.done,
        cpuSeconds: unsynced.counted,
      },
      bosun: b,
      cpuRatio: cpuRatio ?? null,
      rateRatio: rateRatio ?? null,
    },
  };
}
