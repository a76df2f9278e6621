import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { INCIDENTS_QUEUE } from '@bosun/contract';
import { BosunMetrics, inSpan } from '@bosun/transport';
import { Cluster, CpuMeter, buildConfig } from './cluster.js';
import { IncidentClient, cpuText, within, withPrefix, type CpuReport, type Ctx, type Row, type ScenarioResult } from './scenarios.js';
import { fmt, note } from './util.js';

// 6. What observability costs: the same bulk of standard incidents on a fresh cluster, three
// times: nothing served or exported (`off`), /metrics of every service scraped every second
// (`metrics`), and the same with the OTLP/HTTP trace exporter on, to a local receiver
// (`traces`). The measure is the CPU time of the three services per incident.

type Mode = 'off' | 'metrics' | 'traces';

const SERVICES = ['coordinator', 'specialist', 'tool-gateway'] as const;

/** How often the bench scrapes /metrics of each service. */
const SCRAPE_MS = 5_000;

/** Spans and metric records of one standard incident (route → kubernetes → 2 tools → finish), counted from the code. */
const PER_INCIDENT = { spans: 14, records: 40 };

interface ModeRun {
  mode: Mode;
  done: number;
  wallMs: number;
  cpuMsPerIncident: number;
  cpu: CpuReport;
  scrapes: number;
}

/** A local OTLP/HTTP receiver: reads what it gets, answers 200, counts requests and bytes. */
async function startReceiver(): Promise<{ url: string; stats: { requests: number; bytes: number }; close(): Promise<void> }> {
  const stats = { requests: 0, bytes: 0 };
  const server: Server = createServer((req, res) => {
    req.on('data', (c: Buffer) => (stats.bytes += c.length));
    req.on('end', () => {
      stats.requests++;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stats,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** A port nobody listens on now (loopback). */
async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as AddressInfo;
  await new Promise((resolve) => s.close(resolve));
  return port;
}

/** One mode: start the cluster with its environment, warm up, then measure `n` incidents in bulk. */
async function runMode(ctx: Ctx, mode: Mode, n: number, otlpUrl: string): Promise<ModeRun> {
  return withPrefix(ctx, async (prefix) => {
    const ports: Record<string, number> = {};
    for (const s of SERVICES) ports[s] = await freePort();
    const env = (label: string): Record<string, string> => ({
      ...(mode === 'off' ? {} : { BOSUN_HEALTH_PORT: String(ports[label] ?? 0) }),
      ...(mode === 'traces' ? { OTEL_EXPORTER_OTLP_ENDPOINT: otlpUrl } : {}),
    });
    const cluster = new Cluster({
      root: ctx.root,
      prefix,
      redisUrl: ctx.redisUrl,
      natsUrl: ctx.natsUrl,
      redis: ctx.redis,
      config: buildConfig(ctx.root, { toolTransport: ctx.toolTransport }),
      env,
    });
    let scrapes = 0;
    let scraper: NodeJS.Timeout | undefined;
    try {
      await cluster.start('tool-gateway');
      await Promise.all([cluster.start('coordinator'), cluster.start('specialist')]);
      const client = await IncidentClient.open(ctx, prefix, INCIDENTS_QUEUE);
      try {
        for (let i = 0; i < 3; i++) await client.one(`${mode}-warm-${i}`);
        if (mode !== 'off')
          // Prometheus scrapes every 15 s to 1 min; every 5 s is on the harsh side.
          scraper = setInterval(() => {
            for (const s of SERVICES)
              void fetch(`http://127.0.0.1:${ports[s]}/metrics`)
                .then((r) => r.text())
                .then(() => scrapes++)
                .catch((err: unknown) => note(`scrape of ${s} failed: ${String(err)}`));
          }, SCRAPE_MS);
        const meter = await CpuMeter.start(cluster.procs, ctx.redis);
        const ids = Array.from({ length: n }, (_, i) => `${mode}-${i}`);
        const res = await client.bulk(ids, within(ctx, 120_000, 0.3), { label: `6 ${mode}` });
        const cpu = await meter.stop();
        const done = res.done + res.failed;
        const serviceS = SERVICES.reduce((a, s) => a + (cpu.cpuSeconds[s] ?? 0), 0);
        return { mode, done, wallMs: res.wallMs, cpuMsPerIncident: (1000 * serviceS) / Math.max(1, done), cpu, scrapes };
      } finally {
        if (scraper) clearInterval(scraper);
        await client.close();
      }
    } finally {
      await cluster.stop();
    }
  });
}

/**
 * µs of one no-op span (no SDK in this process) and of one metric record (a labelled counter and
 * histogram, the costliest kind): the best of 5 rounds of 20,000 after a warm-up, so that other
 * processes on a shared machine do not inflate it.
 */
async function noopCosts(): Promise<{ spanUs: number; recordUs: number }> {
  const m = new BosunMetrics();
  const rounds = 20_000;
  const best = async (f: (i: number) => unknown): Promise<number> => {
    let min = Infinity;
    for (let r = 0; r < 6; r++) {
      const t0 = performance.now();
      for (let i = 0; i < rounds; i++) await f(i);
      // The first round is the warm-up.
      if (r > 0) min = Math.min(min, ((performance.now() - t0) * 1000) / rounds);
    }
    return min;
  };
  const spanUs = await best((i) => inSpan('bench', {}, () => Promise.resolve(i)));
  const recordUs = await best(() =>
    m.toolCall({ server: 'demo', tool: 'demo__get_pods', outcome: 'ok', decision: 'allow', seconds: 0.01 }),
  );
  return { spanUs, recordUs };
}

function ratioRow(scenario: string, metric: string, run: ModeRun, off: ModeRun, limit: number): Row {
  const ratio = run.cpuMsPerIncident / off.cpuMsPerIncident;
  return {
    scenario,
    metric,
    bosun: fmt(run.cpuMsPerIncident, 2),
    floor: fmt(off.cpuMsPerIncident, 2),
    ratio: `${fmt(ratio, 3)}×`,
    target: `≤ ${fmt(limit, 2)}× off`,
    result: ratio <= limit ? 'met' : 'missed',
  };
}

/** Scenario 6: the CPU cost of metrics and traces per incident. */
export async function scenarioObservability(ctx: Ctx): Promise<ScenarioResult> {
  const n = ctx.quick ? 300 : 1500;
  const result: ScenarioResult = { id: 6, name: 'observability cost', rows: [], notes: [], data: { n } };
  const receiver = await startReceiver();
  try {
    const runs: ModeRun[] = [];
    // `off` once more at the end: how far two runs of the same thing differ here (the noise).
    for (const mode of ['off', 'metrics', 'traces', 'off'] as const) {
      note(`6 observability: ${mode}, ${n} incidents in bulk`);
      runs.push(await runMode(ctx, mode, n, receiver.url));
    }
    const [off1, metrics, traces, off2] = runs as [ModeRun, ModeRun, ModeRun, ModeRun];
    // The metrics and exporter modes are compared with the mean of the two off runs.
    const off: ModeRun = { ...off1, cpuMsPerIncident: (off1.cpuMsPerIncident + off2.cpuMsPerIncident) / 2 };
    const label = `6 observability (${n} in bulk${ctx.quick ? ', quick' : ''})`;
    result.rows.push({
      scenario: label,
      metric: 'noise: services CPU ms/incident, the two off runs',
      bosun: `${fmt(off1.cpuMsPerIncident, 2)}, ${fmt(off2.cpuMsPerIncident, 2)}`,
      ratio: `${fmt(off2.cpuMsPerIncident / off1.cpuMsPerIncident, 3)}×`,
      result: 'n/a',
    });
    result.rows.push(ratioRow(label, `services CPU ms/incident, /metrics scraped every ${SCRAPE_MS / 1000} s`, metrics, off, 1.02));
    result.rows.push(ratioRow(label, 'services CPU ms/incident, + OTLP trace export', traces, off, 1.1));
    const noop = await noopCosts();
    const noopUs = PER_INCIDENT.spans * noop.spanUs + PER_INCIDENT.records * noop.recordUs;
    const share = noopUs / 1000 / off.cpuMsPerIncident;
    result.rows.push({
      scenario: label,
      metric: `always-on part: ${PER_INCIDENT.spans} no-op spans + ${PER_INCIDENT.records} metric records per incident`,
      bosun: `${fmt(noopUs, 1)} µs`,
      ratio: `${fmt(100 * share, 2)}% of off`,
      target: '≤ 2%',
      result: share <= 0.02 ? 'met' : 'missed',
    });
    for (const r of runs)
      result.notes.push(`${r.mode}: ${r.done} incidents in ${fmt(r.wallMs / 1000, 1)} s, ${r.scrapes} scrapes; ${cpuText(r.cpu, r.done)}`);
    result.notes.push(
      `"off" still runs the instrumentation (metric records in memory, spans that are no-ops without an SDK); their cost is the third row (${fmt(noop.spanUs, 2)} µs a span, ${fmt(noop.recordUs, 2)} µs a record, measured in the bench process). The receiver got ${receiver.stats.requests} OTLP requests, ${fmt(receiver.stats.bytes / 1024, 0)} KB. On a shared machine the ratios move by a few % between runs.`,
    );
    result.data = { n, runs, noop, noopUsPerIncident: noopUs, otlp: receiver.stats };
  } finally {
    await receiver.close();
  }
  return result;
}
