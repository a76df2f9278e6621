import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openClient, startClusterTest, type ClusterTest, type TestContext } from '../helpers/index.js';

// In-band tool routing with the services as separate processes: the specialist is offered
// groups and load_tools, loads what it needs, and the run's events carry the statistics.

let t: ClusterTest;
let ctx: TestContext;

beforeAll(async () => {
  t = await startClusterTest('routing', (config) => {
    config.specialists.kubernetes.routing = {
      enabled: true,
      groups: {
        pods: ['demo__get_pods', 'demo__get_logs'],
        history: ['demo__get_deployments'],
        changes: ['demo__restart_pod', 'demo__rollback_deployment'],
      },
      alwaysOn: ['pods'],
    };
  });
  ctx = t.ctx;
});

afterAll(async () => {
  await t?.close();
});

describe('tool routing, end to end', () => {
  it('loads a group on demand and reports groups offered, loaded and skipped', async () => {
    const client = await openClient(ctx);
    const { events } = client;
    try {
      const { job, runId } = await client.publish({
        id: 'route-1',
        source: 'test',
        reason: 'PodCrashLooping',
        summary: 'x',
        labels: { service: 'checkout' },
      });
      const result = await client.result(job, 30_000);
      expect(result.status).toBe('completed');
      const done = await events.waitFor((e) => e.runId === runId && e.type === 'agent.completed', 10_000);
      // The default plan: get_pods and get_logs (always on), then get_deployments (loaded on demand).
      expect(done.data.routing).toEqual({
        groupsOffered: ['pods', 'history', 'changes'],
        groupsLoaded: ['pods'],
        reloads: 0,
        skipped: ['changes'],
        nudged: false,
      });
      const run = await events.complete(runId);
      const loads = run.filter((e) => e.type === 'tool.routing' && e.data.action === 'load');
      expect(loads.map((e) => e.data.loaded)).toEqual([['demo__get_deployments']]);
      const tools = run.filter((e) => e.type === 'tool.completed').map((e) => e.data.tool);
      expect(tools).toEqual(['demo__get_pods', 'demo__get_logs', 'demo__get_deployments']);
    } finally {
      await client.close();
    }
  });
});
