import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue } from 'bullmq';
import { STALL_MARKER, isStalled, specialistQueue } from '@bosun/contract';
import {
  callLog,
  startClusterTest,
  type ClusterTest,
  type TestCluster,
  type CallLog,
  type Client,
  type TestContext,
} from '../helpers/index.js';

// The v0 cluster end to end: gateway, coordinator and two specialist processes, real Redis,
// NATS and the demo MCP server over stdio, the fake model, route mode.

let t: ClusterTest;
let ctx: TestContext;
let cluster: TestCluster;
let client: Client;
let toolLog: CallLog;

beforeAll(async () => {
  t = await startClusterTest(
    'route',
    (config, c) => {
      toolLog = callLog(join(c.dir, 'calls.jsonl'));
      config.mcpServers.demo.env = { DEMO_MCP_CALL_LOG: toolLog.path, DEMO_MCP_SLOW_MS: '50' };
      // Few tasks per process, so that two processes both take work.
      config.specialists.kubernetes.concurrency = 2;
      config.specialists.database.concurrency = 2;
    },
    { specialists: 2 },
  );
  ({ ctx, cluster, client } = t);
});

afterAll(async () => {
  // Stopped one by one first, for their exit codes; close() then finds them stopped.
  const statuses = await Promise.all(cluster?.processes.map((p) => p.stop()) ?? []);
  await t?.close();
  // SIGTERM drains: every service exits 0.
  expect(statuses.map((s) => s.code)).toEqual(cluster.processes.map(() => 0));
});

describe('route mode, end to end', () => {
  it('runs an incident through coordinator, specialist and gateway and returns the run result', async () => {
    const { job, runId } = await client.publish({
      id: 'crash-1',
      source: 'test',
      reason: 'PodCrashLooping',
      summary: 'checkout crashlooping',
      labels: { service: 'checkout' },
    });
    const result = await client.result(job);
    expect(result).toMatchObject({ v: 1, runId, incidentId: 'crash-1', status: 'completed', stalled: 0 });
    expect(result.specialists).toHaveLength(1);
    expect(result.specialists[0]).toMatchObject({ name: 'kubernetes', status: 'completed', attempts: 1 });
    const output = result.specialists[0]!.output as { summary: string; findings: { title: string }[] };
    expect(output.findings.map((f) => f.title)).toEqual(['demo__get_pods', 'demo__get_logs', 'demo__get_deployments']);
    expect(result.answer).toContain('kubernetes — completed');
    expect(result.answer).toContain('checkout-7c9d6f8b4');
    expect(Date.parse(result.finishedAt)).toBeGreaterThanOrEqual(Date.parse(result.startedAt));

    const run = await client.events.complete(runId);
    const types = run.map((e) => e.type);
    expect(types[0]).toBe('run.started');
    expect(types[types.length - 1]).toBe('run.completed');
    for (const t of [
      'run.routed',
      'agent.delegated',
      'agent.started',
      'model.called',
      'tool.started',
      'tool.completed',
      'agent.completed',
    ] as const) {
      expect(types).toContain(t);
    }
    expect(types.filter((t) => t === 'tool.completed')).toHaveLength(3);
    // seq numbers one sequence across the three processes: 1..n without gaps.
    expect(run.map((e) => e.seq)).toEqual(run.map((_, i) => i + 1));
    const modelCalled = run.find((e) => e.type === 'model.called' && e.agent === 'kubernetes');
    expect(modelCalled?.data.usage).toMatchObject({ inputTokens: expect.any(Number), outputTokens: expect.any(Number) });
  });

  it('turns a specialist that ends its turn without finish_task into an explicit INCOMPLETE result', async () => {
    const { job, runId } = await client.publish({
      id: 'stall-1',
      source: 'test',
      reason: 'ErrorRateHigh',
      summary: 'errors',
      labels: { service: 'checkout' },
      payload: { fake: { stall: ['database'] } },
    });
    const result = await client.result(job);
    expect(result.status).toBe('partial');
    expect(result.stalled).toBe(1);
    const db = result.specialists.find((s) => s.name === 'database')!;
    const k8s = result.specialists.find((s) => s.name === 'kubernetes')!;
    expect(k8s.status).toBe('completed');
    expect(db.status).toBe('stalled');
    const out = db.output as { summary: string; findings: unknown[]; evidence: unknown[] };
    expect(out.summary.startsWith(STALL_MARKER)).toBe(true);
    expect(out.summary).toContain('Could someone on call tell me');
    // Nothing invented: the stall payload's lists are empty.
    expect(out.findings).toEqual([]);
    expect(out.evidence).toEqual([]);
    expect(isStalled(db.output)).toBe(true);
    expect(isStalled(k8s.output)).toBe(false);
    expect(result.answer).toContain('Not checked: database');

    const stalled = await client.events.waitFor((e) => e.runId === runId && e.type === 'agent.stalled', 10_000);
    expect(stalled.agent).toBe('database');
    const dlq = (await client.deadLetters()).filter((d) => d.runId === runId);
    expect(dlq).toHaveLength(1);
    expect(dlq[0]).toMatchObject({ v: 1, kind: 'stall', agent: 'database', incidentId: 'stall-1', marker: STALL_MARKER, attempts: 1 });
    expect(dlq[0]!.lastWords).toContain('Could someone on call tell me');
  });

  it('rejects a malformed incident with an error naming the fields, keeps its data in the dead-letter queue, and goes on', async () => {
    const bad = { id: 'bad id with spaces', source: 'test', summary: 42 };
    const job = await client.incidents.add('incident', bad, { jobId: 'poison-1' });
    await expect(job.waitUntilFinished(client.queueEvents, 30_000)).rejects.toThrow(/invalid incident: id: .*reason: .*summary: /);
    const entry = (await client.deadLetters()).find((d) => d.kind === 'poison' && d.incidentId === 'poison-1');
    expect(entry?.input).toEqual(bad);
    expect(entry?.reason).toMatch(/id: must be 1 to 128 characters/);
    // The coordinator is still up and takes the next incident.
    const { job: next } = await client.publish({
      id: 'after-poison',
      source: 'test',
      reason: 'HighLatency',
      summary: 'slow',
      labels: { service: 'payments' },
    });
    expect((await client.result(next)).status).toBe('completed');
  });

  it('makes an unknown specialist named by the classifier an error result for that delegation, not a crash', async () => {
    const { job, runId } = await client.publish({
      id: 'unknown-spec',
      source: 'test',
      reason: 'Whatever',
      summary: 'x',
      labels: { service: 'search' },
      payload: { fake: { route: ['kubernetes', 'nonexistent'] } },
    });
    const result = await client.result(job);
    expect(result.status).toBe('partial');
    const ghost = result.specialists.find((s) => s.name === 'nonexistent')!;
    expect(ghost.status).toBe('failed');
    expect(String(ghost.output)).toContain('unknown specialist "nonexistent"');
    expect(result.specialists.find((s) => s.name === 'kubernetes')?.status).toBe('completed');
    const routed = await client.events.waitFor((e) => e.runId === runId && e.type === 'run.routed', 5_000);
    expect(routed.data.unknown).toEqual(['nonexistent']);
    expect((await client.deadLetters()).filter((d) => d.runId === runId)).toEqual([
      expect.objectContaining({ kind: 'failure', agent: 'nonexistent' }),
    ]);
    expect(cluster.processes.every((p) => p.running)).toBe(true);
  });

  it("feeds a tool's own error back to the model and refuses a tool outside the specialist's list", async () => {
    const before = toolLog.count('restart_pod');
    const { job } = await client.publish({
      id: 'policy-1',
      source: 'test',
      reason: 'HighLatency',
      summary: 'x',
      payload: {
        fake: {
          calls: {
            database: [
              { tool: 'demo__get_metrics', args: { service: 'no-such-service' } },
              { tool: 'demo__restart_pod', args: { service: 'payments', pod: 'p' } },
            ],
          },
        },
      },
    });
    const result = await client.result(job);
    expect(result.status).toBe('completed');
    const out = result.specialists[0]!.output as { findings: { title: string; detail: string }[] };
    expect(out.findings[0]?.detail).toMatch(/\(error\).*no-such-service/);
    expect(out.findings[1]?.detail).toMatch(/not available to this agent/);
    expect(toolLog.count('restart_pod')).toBe(before);
  });

  it('runs an incident id published twice once', async () => {
    const incident = { id: 'dup-1', source: 'test', reason: 'HighLatency', summary: 'x', labels: { service: 'payments' } };
    const first = await client.publish(incident);
    await client.incidents.add('incident', incident, { jobId: incident.id });
    await client.result(first.job);
    await client.events.waitFor((e) => e.runId === first.runId && e.type === 'run.completed', 10_000);
    expect(client.events.events.filter((e) => e.incidentId === 'dup-1' && e.type === 'run.started')).toHaveLength(1);
  });

  it('spreads work over both specialist processes', async () => {
    const published = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        client.publish({ id: `load-${i}`, source: 'test', reason: 'ErrorRateHigh', summary: 'x', labels: { service: 'checkout' } }),
      ),
    );
    const results = await Promise.all(published.map((p) => client.result(p.job, 90_000)));
    expect(results.every((r) => r.status === 'completed')).toBe(true);
    const q = new Queue(specialistQueue('kubernetes'), { connection: ctx.redis, prefix: ctx.prefix });
    const done = await q.getCompleted(0, 1000);
    await q.close();
    const workers = new Set(done.map((j) => j.processedBy?.replace(/^specialist-.*-(\d+)$/, '$1')));
    expect(workers.size).toBe(2);
    const pids = new Set(cluster.processes.filter((p) => p.name.startsWith('specialist')).map((p) => String(p.pid)));
    expect([...workers].every((w) => pids.has(String(w)))).toBe(true);
  });
});
