import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  callLog,
  startClusterTest,
  type CallLog,
  type Client,
  type ClusterTest,
  type TestCluster,
  type TestContext,
} from '../helpers/index.js';

// SIGTERM drains: a service stops taking work, finishes or hands back what it holds, exits 0,
// and the next process resumes without an in-doubt call.

let t: ClusterTest;
let ctx: TestContext;
let cluster: TestCluster;
let toolLog: CallLog;
let client: Client;

/** The tools called so far, in order. */
const logged = (): string[] => toolLog.calls().map((c) => c.tool);

const plan = {
  fake: {
    calls: {
      kubernetes: [
        { tool: 'demo__get_pods', args: { service: 'checkout' } },
        { tool: 'demo__restart_pod', args: { service: 'checkout', pod: 'checkout-7c9d6f8b4-9mz4q', reason: 'drain' } },
        { tool: 'demo__get_deployments', args: { service: 'checkout' } },
      ],
    },
  },
};

beforeAll(async () => {
  t = await startClusterTest('chaos-drain', (config, c) => {
    toolLog = callLog(join(c.dir, 'calls.jsonl'));
    // This test is about crashes, not approvals: let the mutating tools run unasked.
    config.mcpServers.demo.tools = {};
    config.mcpServers.demo.env = { DEMO_MCP_CALL_LOG: toolLog.path, DEMO_MCP_SLOW_MS: '1500' };
    // Long locks: a resumption here must come from the hand-over, not from lock expiry.
    config.workers = { lockDurationMs: 60_000, stalledIntervalMs: 30_000, maxStalledCount: 2 };
  });
  ({ ctx, cluster, client } = t);
});

afterAll(async () => {
  await t?.close();
});

describe('SIGTERM drains', () => {
  it('a specialist hands its task back at the next step and exits 0; another resumes it at once', async () => {
    const { job, runId } = await client.publish({
      id: 'drain-spec',
      source: 'chaos',
      reason: 'PodCrashLooping',
      summary: 'x',
      payload: plan,
    });
    await client.events.waitFor((e) => e.runId === runId && e.type === 'tool.started', 20_000);
    const old = cluster.host('specialist');
    const t0 = Date.now();
    const status = await old.stop(30_000);
    expect(status.code).toBe(0);
    expect(Date.now() - t0).toBeLessThan(10_000);
    // Split, the task's job is handed back; co-located, the task ran in the run's pass and is
    // handed to its queue as a job.
    const handedBack = cluster.layout === 'split' ? 'handing the task back to the queue' : 'local task handed to its queue';
    expect(old.lines.some((l) => l.includes(handedBack))).toBe(true);
    cluster.replace('specialist');
    const result = await client.result(job);
    expect(result.status).toBe('completed');
    expect(logged().filter((t) => t === 'restart_pod')).toHaveLength(1);
    expect((await client.events.complete(runId)).some((e) => e.type === 'tool.in_doubt')).toBe(false);
  });

  it('a gateway finishes its call in flight before exiting 0; nothing is in doubt', async () => {
    const before = logged().length;
    const { job, runId } = await client.publish({
      id: 'drain-gw',
      source: 'chaos',
      reason: 'PodCrashLooping',
      summary: 'x',
      payload: plan,
    });
    const started = await client.events.waitFor((e) => e.runId === runId && e.type === 'tool.started', 20_000);
    const status = await cluster.host('gateway').stop(30_000);
    expect(status.code).toBe(0);
    // The call in flight was finished and recorded before the gateway left.
    expect(await ctx.redis.hget(`${ctx.prefix}:toolcall:${String(started.data.key)}`, 'state')).toBe('done');
    await cluster.replace('gateway').ready();
    const result = await client.result(job);
    expect(result.status).toBe('completed');
    expect(logged().slice(before)).toEqual(['get_pods', 'restart_pod', 'get_deployments']);
    expect((await client.events.complete(runId)).some((e) => e.type === 'tool.in_doubt')).toBe(false);
  });
});
