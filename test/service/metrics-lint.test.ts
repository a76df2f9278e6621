import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BosunMetrics } from '@bosun/transport';
import {
  demoConfig,
  freePort,
  openClient,
  openContext,
  startService,
  writeConfig,
  type Client,
  type ServiceProcess,
  type TestContext,
} from '../helpers/index.js';
import { promtool } from '../helpers/promtool.js';

// `/metrics` of every kind of service process, linted by Prometheus' own `promtool check metrics`
// (Debian's `prometheus` package): one process of each kind with its BOSUN_HEALTH_PORT, after one
// run so that the counters and histograms of the run's path have samples. The cluster's figures
// (queue, approval and in-doubt gauges, runs started) come from the coordinator alone
// (docs/observability.md, "Where to scrape").

const KINDS = ['gateway', 'coordinator', 'specialist', 'intake', 'a2a', 'console'] as const;
type Kind = (typeof KINDS)[number];

/** Exported by the coordinator only: no other process shows them, not even as 0. */
const CLUSTER_FIGURES = [
  'bosun_approvals_pending',
  'bosun_approval_oldest_pending_seconds',
  'bosun_tool_calls_in_doubt',
  'bosun_queue_jobs',
  'bosun_queue_workers',
  'bosun_metrics_probe_errors_total',
  'bosun_runs_started_total',
];

let ctx: TestContext;
let client: Client;
const ports = {} as Record<Kind, number>;
const processes: ServiceProcess[] = [];

async function scrape(kind: Kind): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${ports[kind]}/metrics`);
  expect(res.status, kind).toBe(200);
  return res.text();
}

/** Fails with promtool's own findings, in full, unless `promtool check metrics` finds nothing in `text`. */
function lintClean(text: string, what: string): void {
  const run = promtool(['check', 'metrics'], { input: text });
  if (run.code !== 0 || run.output !== '') expect.fail(`promtool check metrics on ${what} (exit ${run.code}):\n${run.output}`);
}

/** The metric families a scrape declares (`# TYPE <name> <type>`). */
const families = (text: string) => [...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!);

beforeAll(async () => {
  ctx = await openContext('metrics-lint');
  const config = demoConfig();
  config.a2a.port = await freePort();
  const env = { ...ctx.env, BOSUN_CONFIG: writeConfig(ctx, config), LOG_LEVEL: 'info', BOSUN_INTAKE_PORT: String(await freePort()) };
  for (const kind of KINDS) ports[kind] = await freePort();
  const start = (kind: Kind, args: string[] = [], extra: Record<string, string> = {}) => {
    const p = startService(kind, { ...env, ...extra, BOSUN_HEALTH_PORT: String(ports[kind]) }, { args });
    processes.push(p);
    return p.ready();
  };
  await start('gateway');
  const consolePort = String(await freePort());
  await Promise.all([
    start('coordinator'),
    start('specialist'),
    start('intake'),
    start('a2a'),
    start('console', ['--port', consolePort], { BOSUN_CONSOLE_TOKEN: 'metrics-lint-token-4d1c' }),
  ]);
  client = await openClient(ctx);
  // One run: model calls, a tool call, a task and a run finished, with their histograms.
  const { job } = await client.publish({
    id: 'metrics-lint-1',
    source: 'test',
    reason: 'PodCrashLooping',
    summary: 'checkout pods restart',
  });
  expect((await client.result(job, 60_000)).status).toBe('completed');
}, 120_000);

afterAll(async () => {
  await client?.close();
  await Promise.all(processes.map((p) => p.stop()));
  await ctx?.close();
});

describe('/metrics of every service under promtool check metrics', () => {
  it.each(KINDS)('%s: passes promtool check metrics', async (kind) => {
    const text = await scrape(kind);
    expect(families(text).length).toBeGreaterThan(20);
    lintClean(text, `the ${kind}'s /metrics`);
  });

  it("exports the cluster's figures from the coordinator only, not even as 0 elsewhere", async () => {
    const scrapes = Object.fromEntries(await Promise.all(KINDS.map(async (k) => [k, families(await scrape(k))] as const))) as Record<
      Kind,
      string[]
    >;
    expect(CLUSTER_FIGURES.filter((name) => !scrapes.coordinator.includes(name))).toEqual([]);
    for (const kind of KINDS.filter((k) => k !== 'coordinator'))
      expect(
        scrapes[kind].filter((name) => CLUSTER_FIGURES.includes(name)),
        kind,
      ).toEqual([]);
    const coordinator = await scrape('coordinator');
    expect(coordinator).toMatch(/^bosun_runs_started_total 1$/m);
    expect(coordinator).toMatch(/^bosun_tool_calls_in_doubt 0$/m);
    expect(coordinator).toMatch(/^bosun_queue_workers\{queue="tools"\} [1-9]/m);
  });

  it('every metric Bosun defines, each with a sample, passes promtool check metrics', async () => {
    // What a scrape of a fresh process cannot show: every labelled series at once.
    const m = new BosunMetrics();
    m.setClusterProbe(async () => ({
      queues: [{ queue: 'tools', waiting: 1, active: 1, delayed: 0, failed: 0, workers: 1 }],
      approvalsPending: 1,
      oldestApprovalSeconds: 12,
      inDoubt: 1,
    }));
    m.collectProcessMetrics();
    m.event('run.started');
    m.event('approval.requested');
    m.runFinished('completed', 3);
    m.taskFinished('kubernetes', 'completed', 2);
    m.modelCall({ agent: 'kubernetes', provider: 'fake', outcome: 'ok', seconds: 0.1, inputTokens: 10, outputTokens: 5 });
    m.toolCall({ server: 'demo', tool: 'demo__get_pods', outcome: 'tool_error', decision: 'allow', seconds: 0.02 });
    m.approvalDecided('approved', 40);
    m.deadLetters.inc({ kind: 'stall' });
    m.eventsDropped.inc();
    lintClean(await m.text(), 'every metric with a sample');
  });
});
