import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import {
  EventCollector,
  NatsClusterServers,
  TestCluster,
  demoConfig,
  openClient,
  openContext,
  replayRun,
  waitUntil,
  writeConfig,
  type Client,
  type TestContext,
} from '../helpers/index.js';

// Bosun on a 3-node NATS cluster with JetStream and an R3 runs stream: killing one NATS node
// during a run loses no event in the stream.

let ctx: TestContext;
let servers: NatsClusterServers;
let nc: NatsConnection;

beforeAll(async () => {
  ctx = await openContext('ncluster');
  servers = await new NatsClusterServers(ctx.dir).start();
  nc = await connect({ servers: servers.url.split(',') });
  // Wait for JetStream's meta leader before the services try to create their stream.
  let last = '';
  await waitUntil(
    async () => {
      try {
        await (await jetstreamManager(nc, { timeout: 2_000 })).getAccountInfo();
        return true;
      } catch (err) {
        last = (err as Error).message;
        return false;
      }
    },
    30_000,
    () => `JetStream answers on the NATS cluster (last error: ${last})`,
    250,
  );
}, 60_000);

afterAll(async () => {
  await nc?.close().catch(() => undefined);
  await servers?.stop();
  await ctx?.close();
});

describe('NATS cluster', () => {
  it('keeps every event of a run in the R3 stream when a NATS node dies mid-run', async () => {
    const config = demoConfig();
    config.mcpServers.demo.env = { DEMO_MCP_SLOW_MS: '400' };
    const env = { ...ctx.env, NATS_URL: servers.url, BOSUN_STREAM_REPLICAS: '3', BOSUN_CONFIG: writeConfig(ctx, config) };
    const cluster = await TestCluster.start(env, { specialists: 1 });
    let client: Client | undefined;
    // The run's events, from the NATS cluster the services publish to.
    const events = new EventCollector(nc, ctx.prefix);
    try {
      client = await openClient(ctx);
      const jsm = await jetstreamManager(nc);
      const info = await jsm.streams.info(`${ctx.prefix}-runs`);
      expect(info.config.num_replicas).toBe(3);
      const plan = [
        { tool: 'demo__get_pods', args: { service: 'checkout' } },
        { tool: 'demo__get_logs', args: { service: 'checkout', lines: 3 } },
        { tool: 'demo__get_deployments', args: { service: 'checkout' } },
        { tool: 'demo__get_metrics', args: { service: 'checkout' } },
      ];
      const { job, runId } = await client.publish({
        id: 'nc-1',
        source: 'cluster',
        reason: 'PodCrashLooping',
        summary: 'x',
        // Each of the specialist's model turns takes 500 ms: after the first tool call the run
        // has at least 1.5 s to go, whatever the machine's speed, so the kill lands mid-run.
        payload: { fake: { calls: { kubernetes: plan }, slowMs: { kubernetes: 500 } } },
      });
      // Mid-run (its first tool call done, three to go, the run not finished): kill the stream's
      // leader node, the hardest case.
      await events.waitFor((e) => e.runId === runId && e.type === 'tool.completed', 30_000, 'the first tool.completed');
      expect(events.forRun(runId).map((e) => e.type)).not.toContain('run.completed');
      expect(await job.isCompleted()).toBe(false);
      const leader = (await jsm.streams.info(`${ctx.prefix}-runs`)).cluster?.leader ?? 'n0';
      await servers.kill(Number(leader.replace('n', '')));
      const result = await client.result(job);
      expect(result.status).toBe('completed');

      // A new stream leader may still be taking over: replayRun polls until the run is whole.
      const { types, seqs } = await replayRun(nc, ctx.prefix, runId, { maxMessages: 500 });
      expect(types[0]).toBe('run.started');
      expect(types[types.length - 1]).toBe('run.completed');
      expect(types.filter((t) => t === 'tool.completed')).toHaveLength(4);
      expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    } finally {
      events.close();
      await client?.close();
      await cluster.stop();
    }
  }, 120_000);
});
