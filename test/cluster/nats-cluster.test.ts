import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue, QueueEvents } from 'bullmq';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { DeliverPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { INCIDENTS_QUEUE, RunResult, runIdFor } from '@bosun/contract';
import { NatsClusterServers, TestCluster, demoConfig, openContext, writeConfig, type TestContext } from '../helpers/index.js';

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
  const until = Date.now() + 30_000;
  for (;;) {
    try {
      await (await jetstreamManager(nc, { timeout: 2_000 })).getAccountInfo();
      break;
    } catch (err) {
      if (Date.now() > until) throw err;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
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
    const incidents = new Queue(INCIDENTS_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
    const queueEvents = new QueueEvents(INCIDENTS_QUEUE, { connection: ctx.redis.duplicate(), prefix: ctx.prefix });
    try {
      await queueEvents.waitUntilReady();
      const jsm = await jetstreamManager(nc);
      const info = await jsm.streams.info(`${ctx.prefix}-runs`);
      expect(info.config.num_replicas).toBe(3);
      const plan = [
        { tool: 'demo__get_pods', args: { service: 'checkout' } },
        { tool: 'demo__get_logs', args: { service: 'checkout', lines: 3 } },
        { tool: 'demo__get_deployments', args: { service: 'checkout' } },
        { tool: 'demo__get_metrics', args: { service: 'checkout' } },
      ];
      const job = await incidents.add('incident', { id: 'nc-1', source: 'cluster', reason: 'PodCrashLooping', summary: 'x', payload: { fake: { calls: { kubernetes: plan } } } }, { jobId: 'nc-1' });
      const runId = runIdFor('nc-1', job.timestamp);
      // Mid-run: kill the stream's leader node, the hardest case.
      await new Promise((r) => setTimeout(r, 700));
      const leader = (await jsm.streams.info(`${ctx.prefix}-runs`)).cluster?.leader ?? 'n0';
      await servers.kill(Number(leader.replace('n', '')));
      const result = RunResult.parse(await job.waitUntilFinished(queueEvents, 60_000));
      expect(result.status).toBe('completed');

      const js = jetstream(nc);
      let seqs: number[] = [];
      let types: string[] = [];
      const deadline = Date.now() + 30_000;
      while (Date.now() < deadline) {
        try {
          const consumer = await js.consumers.get(`${ctx.prefix}-runs`, { filter_subjects: `${ctx.prefix}.runs.${runId}.>`, deliver_policy: DeliverPolicy.All });
          const got: { seq: number; type: string }[] = [];
          for await (const m of await consumer.fetch({ max_messages: 500, expires: 1_000 })) got.push(m.json<{ seq: number; type: string }>());
          got.sort((a, b) => a.seq - b.seq);
          seqs = got.map((e) => e.seq);
          types = got.map((e) => e.type);
          if (types.includes('run.completed') && seqs.length === seqs[seqs.length - 1]) break;
        } catch {
          // A new stream leader may still be taking over.
        }
        await new Promise((r) => setTimeout(r, 300));
      }
      expect(types[0]).toBe('run.started');
      expect(types[types.length - 1]).toBe('run.completed');
      expect(types.filter((t) => t === 'tool.completed')).toHaveLength(4);
      expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    } finally {
      await queueEvents.close();
      await incidents.close();
      await cluster.stop();
    }
  }, 120_000);
});
