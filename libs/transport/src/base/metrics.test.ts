import { describe, expect, it } from 'vitest';
import { BosunMetrics, type ClusterSnapshot } from './metrics.js';

// The metric definitions: Prometheus names and types, one read of the cluster per scrape, a
// failed read counted without failing the scrape. (The counters moving in real services:
// test/e2e/metrics.test.ts.)

const SNAPSHOT: ClusterSnapshot = {
  queues: [{ queue: 'tools', waiting: 3, active: 1, delayed: 0, failed: 2, workers: 1 }],
  approvalsPending: 4,
  oldestApprovalSeconds: 75,
  inDoubt: 1,
};

describe('BosunMetrics', () => {
  it('names every metric bosun_…, counters …_total, durations …_seconds', async () => {
    const m = new BosunMetrics();
    m.setClusterProbe(async () => SNAPSHOT);
    const metrics = await m.registry.getMetricsAsJSON();
    expect(metrics.length).toBeGreaterThan(15);
    for (const metric of metrics) {
      expect(metric.name).toMatch(/^bosun_[a-z_]+$/);
      // prom-client declares `type` as a numeric enum; it holds the Prometheus type's name ('counter', …).
      if (String(metric.type) === 'counter') expect(metric.name).toMatch(/_total$/);
      if (String(metric.type) === 'histogram') expect(metric.name).toMatch(/_seconds$/);
    }
  });

  it("keeps Prometheus' suffixes to their types, Node's process metrics included (what promtool checks)", async () => {
    const m = new BosunMetrics();
    m.setClusterProbe(async () => SNAPSHOT);
    m.collectProcessMetrics();
    const metrics = await m.registry.getMetricsAsJSON();
    const names = metrics.map((x) => x.name);
    expect(names).toContain('bosun_nodejs_active_handles');
    expect(names).toContain('bosun_process_cpu_seconds_total');
    expect(new Set(names).size).toBe(names.length);
    const misnamed = metrics.filter(
      (x) =>
        (String(x.type) !== 'counter' && /_total$/.test(x.name)) || (String(x.type) !== 'histogram' && /_(count|sum|bucket)$/.test(x.name)),
    );
    expect(misnamed.map((x) => `${x.name} (${x.type})`)).toEqual([]);
    // The health server calls it once per process; a second call must not throw "already registered".
    m.collectProcessMetrics();
  });

  it("exports the cluster's figures and the runs started only in the process that reads the cluster", async () => {
    const CLUSTER = [
      'bosun_approvals_pending',
      'bosun_approval_oldest_pending_seconds',
      'bosun_tool_calls_in_doubt',
      'bosun_queue_jobs',
      'bosun_queue_workers',
      'bosun_metrics_probe_errors_total',
      'bosun_runs_started_total',
    ];
    const names = async (x: BosunMetrics) => (await x.registry.getMetricsAsJSON()).map((metric) => metric.name);
    // A gateway, a specialist or the console: none of them, not even as 0.
    const other = new BosunMetrics();
    other.event('tool.completed');
    expect((await names(other)).filter((n) => CLUSTER.includes(n))).toEqual([]);
    expect(await other.text()).not.toMatch(/bosun_(approvals_pending|tool_calls_in_doubt|runs_started_total)/);
    // The coordinator: all of them from its first scrape, the counters at 0.
    const coordinator = new BosunMetrics();
    coordinator.setClusterProbe(async () => SNAPSHOT);
    expect((await names(coordinator)).filter((n) => CLUSTER.includes(n)).sort()).toEqual([...CLUSTER].sort());
    const text = await coordinator.text();
    expect(text).toContain('bosun_runs_started_total 0');
    expect(text).toContain('bosun_metrics_probe_errors_total 0');
    coordinator.event('run.started');
    coordinator.setClusterProbe(async () => SNAPSHOT);
    expect(await coordinator.text()).toContain('bosun_runs_started_total 1');
  });

  it('records runs, tasks, model and tool calls, approvals and events with their labels', async () => {
    const m = new BosunMetrics();
    m.event('run.started');
    m.event('approval.requested');
    m.runFinished('partial', 12);
    m.taskFinished('kubernetes', 'timeout', 30);
    m.modelCall({ agent: 'kubernetes', provider: 'gemini', outcome: 'ok', seconds: 0.4, inputTokens: 100, outputTokens: 20 });
    m.toolCall({ server: 'demo', tool: 'demo__get_pods', outcome: 'ok', decision: 'allow', seconds: 0.02 });
    m.approvalDecided('denied', 90);
    const text = await m.text();
    expect(text).toContain('bosun_runs_started_total 1');
    expect(text).toContain('bosun_approvals_requested_total 1');
    expect(text).toContain('bosun_events_total{type="run.started"} 1');
    expect(text).toContain('bosun_runs_finished_total{status="partial"} 1');
    expect(text).toContain('bosun_run_duration_seconds_bucket{le="15",status="partial"} 1');
    expect(text).toContain('bosun_tasks_finished_total{specialist="kubernetes",status="timeout"} 1');
    expect(text).toContain('bosun_model_tokens_total{agent="kubernetes",provider="gemini",direction="input"} 100');
    expect(text).toContain('bosun_model_tokens_total{agent="kubernetes",provider="gemini",direction="output"} 20');
    expect(text).toContain('bosun_tool_calls_total{server="demo",tool="demo__get_pods",outcome="ok",decision="allow"} 1');
    expect(text).toContain('bosun_approval_wait_seconds_count{status="denied"} 1');
  });

  it('reads the cluster once per scrape for all its gauges', async () => {
    const m = new BosunMetrics();
    let reads = 0;
    m.setClusterProbe(async () => {
      reads++;
      return SNAPSHOT;
    });
    const text = await m.text();
    expect(reads).toBe(1);
    expect(text).toContain('bosun_queue_jobs{queue="tools",state="waiting"} 3');
    expect(text).toContain('bosun_queue_jobs{queue="tools",state="failed"} 2');
    expect(text).toContain('bosun_queue_workers{queue="tools"} 1');
    expect(text).toContain('bosun_approvals_pending 4');
    expect(text).toContain('bosun_approval_oldest_pending_seconds 75');
    expect(text).toContain('bosun_tool_calls_in_doubt 1');
    await m.text();
    expect(reads).toBe(2);
  });

  it('serves the scrape when the cluster cannot be read, and counts the failure', async () => {
    const m = new BosunMetrics();
    m.setClusterProbe(() => Promise.reject(new Error('redis away')));
    const text = await m.text();
    expect(text).toContain('bosun_metrics_probe_errors_total 1');
    expect(text).not.toContain('bosun_queue_jobs{');
  });
});
