import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovalStore } from '@bosun/transport';
import {
  demoConfig,
  freePort,
  openClient,
  openContext,
  startService,
  waitUntil,
  writeConfig,
  type Client,
  type ServiceProcess,
  type TestContext,
} from '../helpers/index.js';

// `/metrics` of the three services, scraped before and after one run with two tool calls and
// one approval (and one poison incident): the counters moved by exactly that much, the gauges
// read the queues, and no label carries an id (docs/observability.md).

type Service = 'gateway' | 'coordinator' | 'specialist';
const SERVICES: Service[] = ['gateway', 'coordinator', 'specialist'];

let ctx: TestContext;
let client: Client;
let approvals: ApprovalStore;
const ports = {} as Record<Service, number>;
const processes: ServiceProcess[] = [];

/** A scrape as `name{labels}` → value (labels as the exposition writes them). */
type Scrape = Map<string, number>;

async function scrape(service: Service): Promise<{ text: string; values: Scrape }> {
  const res = await fetch(`http://127.0.0.1:${ports[service]}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  const values: Scrape = new Map();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const cut = line.lastIndexOf(' ');
    values.set(line.slice(0, cut), Number(line.slice(cut + 1)));
  }
  return { text, values };
}

/** How much a series moved between two scrapes (absent counts as 0). */
const moved = (before: Scrape, after: Scrape, series: string) => (after.get(series) ?? 0) - (before.get(series) ?? 0);

beforeAll(async () => {
  ctx = await openContext('metrics');
  const config = demoConfig();
  config.mcpServers.demo.tools = { restart_pod: 'ask' };
  const env = { ...ctx.env, BOSUN_CONFIG: writeConfig(ctx, config), LOG_LEVEL: 'warn' };
  for (const s of SERVICES) ports[s] = await freePort();
  const gateway = startService('gateway', { ...env, BOSUN_HEALTH_PORT: String(ports.gateway) });
  processes.push(gateway);
  await gateway.ready();
  const rest = (['coordinator', 'specialist'] as const).map((s) => startService(s, { ...env, BOSUN_HEALTH_PORT: String(ports[s]) }));
  processes.push(...rest);
  await Promise.all(rest.map((p) => p.ready()));
  client = await openClient(ctx);
  approvals = new ApprovalStore({ redis: ctx.redis, prefix: ctx.prefix });
}, 120_000);

afterAll(async () => {
  await approvals?.close();
  await client?.close();
  await Promise.all(processes.map((p) => p.stop()));
  await ctx?.close();
});

describe('/metrics', () => {
  it('counts a run with two tool calls and one approval, and a poison incident, in each service', async () => {
    const before = Object.fromEntries(await Promise.all(SERVICES.map(async (s) => [s, (await scrape(s)).values]))) as Record<
      Service,
      Scrape
    >;
    const id = 'metrics-run-7f3a';
    const { job, runId } = await client.publish({
      id,
      source: 'test',
      reason: 'PodCrashLooping',
      summary: 'checkout crash-looping',
      payload: {
        fake: {
          calls: {
            kubernetes: [
              { tool: 'demo__get_pods', args: { service: 'checkout' } },
              { tool: 'demo__restart_pod', args: { service: 'checkout', pod: 'checkout-7c9d6f8b4-9mz4q', reason: 'metrics' } },
            ],
          },
        },
      },
    });
    const asked = await client.events.waitFor((e) => e.runId === runId && e.type === 'approval.requested', 30_000, 'approval.requested');
    await approvals.decide(String(asked.data.approvalId), { approve: true, by: 'alice' });
    const result = await client.result(job, 60_000);
    expect(result.status).toBe('completed');
    // A job that is not an incident: a poison dead letter, no run.
    await client.incidents.add('incident', { not: 'an incident' }, { jobId: 'metrics-poison-1' });
    await waitUntil(async () => (await client.deadLetters()).some((d) => d.kind === 'poison'), 30_000, 'poison dead letter');

    const after = Object.fromEntries(await Promise.all(SERVICES.map(async (s) => [s, await scrape(s)]))) as Record<
      Service,
      { text: string; values: Scrape }
    >;
    const c = (series: string) => moved(before.coordinator, after.coordinator.values, series);
    const s = (series: string) => moved(before.specialist, after.specialist.values, series);
    const g = (series: string) => moved(before.gateway, after.gateway.values, series);

    // Coordinator: one run started and completed, one routing model call, one poison dead letter.
    expect(c('bosun_runs_started_total')).toBe(1);
    expect(c('bosun_runs_finished_total{status="completed"}')).toBe(1);
    expect(c('bosun_run_duration_seconds_count{status="completed"}')).toBe(1);
    expect(c('bosun_model_calls_total{agent="coordinator",provider="fake",outcome="ok"}')).toBe(1);
    expect(c('bosun_dead_letters_total{kind="poison"}')).toBe(1);
    expect(c('bosun_events_total{type="run.completed"}')).toBe(1);

    // Specialist: one task, three model turns (two tool calls, then finish_task), one approval.
    expect(s('bosun_tasks_finished_total{specialist="kubernetes",status="completed"}')).toBe(1);
    expect(s('bosun_task_duration_seconds_count{specialist="kubernetes",status="completed"}')).toBe(1);
    expect(s('bosun_model_calls_total{agent="kubernetes",provider="fake",outcome="ok"}')).toBe(3);
    expect(s('bosun_model_call_duration_seconds_count{agent="kubernetes",provider="fake",outcome="ok"}')).toBe(3);
    expect(s('bosun_model_tokens_total{agent="kubernetes",provider="fake",direction="input"}')).toBeGreaterThan(0);
    expect(s('bosun_approvals_requested_total')).toBe(1);
    expect(s('bosun_approval_wait_seconds_count{status="approved"}')).toBe(1);

    // Gateway: the two tool calls, by server, tool, outcome and decision.
    expect(g('bosun_tool_calls_total{server="demo",tool="demo__get_pods",outcome="ok",decision="allow"}')).toBe(1);
    expect(g('bosun_tool_calls_total{server="demo",tool="demo__restart_pod",outcome="ok",decision="ask"}')).toBe(1);
    expect(g('bosun_tool_call_duration_seconds_count{server="demo",tool="demo__restart_pod",outcome="ok"}')).toBe(1);
    expect(g('bosun_events_total{type="tool.completed"}')).toBe(2);

    // Gauges of the cluster, read on scrape by the coordinator: queues, workers, approvals, in doubt.
    const cv = after.coordinator.values;
    expect(cv.get('bosun_queue_jobs{queue="dead-letter",state="waiting"}')).toBe(1);
    expect(cv.get('bosun_queue_jobs{queue="incidents",state="active"}')).toBe(0);
    expect(cv.get('bosun_queue_workers{queue="specialist-kubernetes"}')).toBeGreaterThanOrEqual(1);
    expect(cv.get('bosun_queue_workers{queue="tools"}')).toBeGreaterThanOrEqual(1);
    expect(cv.get('bosun_approvals_pending')).toBe(0);
    expect(cv.get('bosun_approval_oldest_pending_seconds')).toBe(0);
    expect(cv.get('bosun_tool_calls_in_doubt')).toBe(0);
    expect(after.specialist.values.has('bosun_queue_jobs{queue="incidents",state="waiting"}')).toBe(false);

    for (const service of SERVICES) {
      const { text, values } = after[service];
      // Node's process metrics, and no id of the run in any label.
      expect(values.get('bosun_process_cpu_user_seconds_total')).toBeGreaterThan(0);
      expect(text).not.toContain(runId);
      expect(text).not.toContain(id);
    }
  }, 120_000);
});
