import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startClusterTest, type Client, type ClusterTest } from '../helpers/index.js';

// Delegate mode: a chat-mode coordinator model delegates to specialists through one tool per
// specialist, waits for them without holding a worker slot, and answers.

let t: ClusterTest;
let client: Client;

beforeAll(async () => {
  t = await startClusterTest('delegate', (config) => {
    config.coordinator.mode = 'delegate';
    // One incident at a time per coordinator process: a run that held its slot while waiting
    // for specialists would block every other incident.
    config.coordinator.concurrency = 1;
    config.mcpServers.demo.env = { DEMO_MCP_SLOW_MS: '300', DEMO_MCP_HANG_TOOLS: 'restart_pod' };
    // restart_pod runs unasked here, never answers, and times out after 3 s: it comes out in doubt.
    config.mcpServers.demo.tools = {};
    config.mcpServers.demo.timeoutMs = 3_000;
  });
  client = t.client;
});

afterAll(async () => {
  await t?.close();
});

describe('delegate mode, end to end', () => {
  it('delegates to the routed specialists through delegate_* tools and answers from their reports', async () => {
    const { job, runId } = await client.publish({
      id: 'deleg-1',
      source: 'test',
      reason: 'ErrorRateHigh',
      summary: 'checkout errors',
      labels: { service: 'checkout' },
    });
    const result = await client.result(job);
    expect(result.status).toBe('completed');
    expect(result.specialists.map((s) => s.name).sort()).toEqual(['database', 'kubernetes']);
    expect(result.answer).toMatch(/^Summary for incident deleg-1/);
    expect(result.answer).toContain('- kubernetes:');
    expect(result.answer).toContain('- database:');
    const run = await client.events.complete(runId);
    expect(run.filter((e) => e.type === 'agent.delegated')).toHaveLength(2);
    // Two coordinator model turns: the delegation, then the answer.
    expect(run.filter((e) => e.type === 'model.called' && e.agent === 'coordinator')).toHaveLength(2);
  });

  it('parks a waiting run: with one coordinator slot, a second incident is routed while the first waits', async () => {
    const a = await client.publish({
      id: 'park-a',
      source: 'test',
      reason: 'PodCrashLooping',
      summary: 'a',
      labels: { service: 'checkout' },
    });
    const b = await client.publish({
      id: 'park-b',
      source: 'test',
      reason: 'PodCrashLooping',
      summary: 'b',
      labels: { service: 'checkout' },
    });
    await Promise.all([a.job.waitUntilFinished(client.queueEvents, 60_000), b.job.waitUntilFinished(client.queueEvents, 60_000)]);
    const runs = [...(await client.events.complete(a.runId)), ...(await client.events.complete(b.runId))];
    const done = runs.filter((e) => e.type === 'run.completed').map((e) => Date.parse(e.at));
    expect(done).toHaveLength(2);
    const firstDone = Math.min(...done);
    const routed = runs.filter((e) => e.type === 'agent.delegated').map((e) => Date.parse(e.at));
    expect(routed).toHaveLength(2);
    expect(Math.max(...routed)).toBeLessThanOrEqual(firstDone);
  });

  it('makes a run with a call in doubt partial, names the call in the answer, whatever the model wrote', async () => {
    const restart = { tool: 'demo__restart_pod', args: { service: 'checkout', pod: 'checkout-7c9d6f8b4-9mz4q' } };
    const { job, runId } = await client.publish({
      id: 'deleg-doubt',
      source: 'test',
      reason: 'PodCrashLooping',
      summary: 'checkout restarts',
      labels: { service: 'checkout' },
      payload: { fake: { calls: { kubernetes: [restart] } } },
    });
    const result = await client.result(job);
    const key = `${runId}-d0-kubernetes-s1-c0`;
    expect(result.specialists.map((s) => [s.name, s.status])).toEqual([['kubernetes', 'completed']]);
    expect(result.stalled).toBe(0);
    expect(result.status).toBe('partial');
    expect(result.inDoubt).toEqual({ count: 1, calls: [{ key, tool: 'demo__restart_pod', agent: 'kubernetes' }] });
    // The model's answer comes first, as it wrote it; the coordinator's line follows.
    expect(result.answer).toMatch(/^Summary for incident deleg-doubt/);
    expect(result.answer.split('\n').at(-1)).toBe(
      'IN DOUBT: 1 mutating tool call was sent, but whether it took effect is unknown; it was not retried and an operator must resolve it ' +
        `with bosun ack <key> --done|--retry|--skip: demo__restart_pod by kubernetes (key ${key}).`,
    );
    const run = await client.events.complete(runId);
    expect(run.find((e) => e.type === 'tool.in_doubt')?.data.key).toBe(key);
    expect(run.at(-1)?.data).toMatchObject({ status: 'partial', stalled: 0, inDoubt: result.inDoubt });
  });
});
