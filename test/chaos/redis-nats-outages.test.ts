import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { Queue } from 'bullmq';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { INCIDENTS_QUEUE, RunResult, runIdFor } from '@bosun/contract';
import {
  EventCollector,
  OwnServer,
  TestCluster,
  demoConfig,
  openClient,
  openContext,
  replayRun,
  waitUntil,
  writeConfig,
  type TestContext,
} from '../helpers/index.js';

// Chaos 5b: Redis restarts while runs are in flight (services reconnect, runs continue, none is
// lost); NATS is unreachable (runs go on, events are buffered and published when it is back).
// One cluster serves both cases, against a Redis and a NATS server the test owns, so it can stop
// them (the cases had a cluster each).

let ctx: TestContext;
let redisServer: OwnServer;
let natsServer: OwnServer;
let cluster: TestCluster;
/** The test's connections to its own servers. */
let redis: Redis;
let nc: NatsConnection | undefined;

beforeAll(async () => {
  ctx = await openContext('chaos-outage');
  [redisServer, natsServer] = await Promise.all([new OwnServer('redis', ctx.dir).start(), new OwnServer('nats', ctx.dir).start()]);
  const config = demoConfig();
  config.mcpServers.demo.env = { DEMO_MCP_SLOW_MS: '700' };
  config.workers = { lockDurationMs: 5_000, stalledIntervalMs: 2_000, maxStalledCount: 5 };
  const env = { ...ctx.env, REDIS_URL: redisServer.url, NATS_URL: natsServer.url, BOSUN_CONFIG: writeConfig(ctx, config) };
  cluster = await TestCluster.start(env, { specialists: 1 });
  redis = new Redis(redisServer.url, { maxRetriesPerRequest: null });
  // The test's own client sees the restart too; its commands wait for the reconnection.
  redis.on('error', () => undefined);
});

afterAll(async () => {
  await nc?.close();
  await cluster?.stop();
  redis?.disconnect();
  await natsServer?.stop();
  await redisServer?.stop();
  await ctx?.close();
});

const plan = (service: string) => ({
  fake: {
    calls: {
      kubernetes: [
        { tool: 'demo__get_pods', args: { service } },
        { tool: 'demo__get_logs', args: { service, lines: 3 } },
        { tool: 'demo__get_deployments', args: { service } },
      ],
    },
  },
});

describe('Redis restarts while runs are in flight', () => {
  it('reconnects every service and completes every run', async () => {
    nc = await connect({ servers: natsServer.url });
    const events = new EventCollector(nc, ctx.prefix);
    const incidents = new Queue(INCIDENTS_QUEUE, { connection: redis, prefix: ctx.prefix });
    // A queue's own error events while Redis is away: its commands wait for the reconnection.
    incidents.on('error', () => undefined);
    const ids = Array.from({ length: 5 }, (_, i) => `redis-${i}`);
    const runIds = new Map<string, string>();
    for (const id of ids) {
      const job = await incidents.add(
        'incident',
        { id, source: 'chaos', reason: 'PodCrashLooping', summary: 'x', payload: plan('checkout') },
        { jobId: id },
      );
      runIds.set(id, runIdFor(id, job.timestamp));
    }
    // Once every run is in flight (a specialist is calling its tools; no run has ended), take
    // Redis away for a second and bring it back.
    const inFlight = () => [...runIds.values()].filter((runId) => events.forRun(runId).some((e) => e.type === 'tool.started'));
    await waitUntil(
      () => inFlight().length === ids.length,
      30_000,
      () => `every run calling its tools (${inFlight().length}/5)`,
    );
    expect(events.events.filter((e) => e.type === 'run.completed' || e.type === 'run.failed')).toEqual([]);
    await redisServer.restart(1_000);
    const states = new Map<string, string>();
    const finished = async () => {
      for (const id of ids) states.set(id, (await (await incidents.getJob(id))?.getState()) ?? 'missing');
      return [...states.values()].every((s) => s === 'completed' || s === 'failed');
    };
    await waitUntil(finished, 90_000, () => `every run finished (${[...states.values()].join(', ')})`, 250);
    expect([...states.values()]).toEqual(ids.map(() => 'completed'));
    for (const id of ids) {
      const result = RunResult.parse((await incidents.getJob(id))!.returnvalue);
      expect(result.runId).toBe(runIds.get(id));
      expect(result.status).toBe('completed');
    }
    expect(cluster.processes.every((p) => p.running)).toBe(true);
    events.close();
    await incidents.close();
  }, 120_000);
});

describe('NATS is unreachable', () => {
  it('goes on with runs while NATS is down and publishes their events when it is back', async () => {
    await nc?.close();
    nc = undefined;
    await natsServer.stop();

    const client = await openClient({ ...ctx, redis });
    const { job, runId } = await client.publish({
      id: 'nats-down',
      source: 'chaos',
      reason: 'PodCrashLooping',
      summary: 'x',
      payload: plan('search'),
    });
    // The run does not wait for observers.
    const result = await client.result(job);
    expect(result.status).toBe('completed');

    await natsServer.start();
    nc = await connect({ servers: natsServer.url });
    // The services reconnect and flush what they buffered; the stream then holds the whole run.
    const { types, seqs } = await replayRun(nc, ctx.prefix, runId, { maxMessages: 200 });
    expect(types[0]).toBe('run.started');
    expect(types[types.length - 1]).toBe('run.completed');
    // Nothing lost: one sequence without gaps.
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    expect(types.filter((t) => t === 'tool.completed')).toHaveLength(3);
    expect(await redis.hget(`${ctx.prefix}:stats:events`, 'dropped')).toBeNull();
    await client.close();
  }, 120_000);
});
