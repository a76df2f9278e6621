import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster } from 'ioredis';
import {
  RedisClusterServers,
  TestCluster,
  demoConfig,
  openClient,
  openContext,
  startService,
  writeConfig,
  type Client,
  type TestContext,
} from '../helpers/index.js';

// Bosun on a real 3-master Redis Cluster, unchanged: the end-to-end run with a hash-tagged
// prefix, and clear refusals of the two unsafe set-ups.

let ctx: TestContext;
let servers: RedisClusterServers;
let redis: Cluster;
let prefix: string;
let baseEnv: Record<string, string>;

beforeAll(async () => {
  ctx = await openContext('rcluster');
  servers = await new RedisClusterServers(ctx.dir).start();
  prefix = `{${ctx.prefix}}`;
  redis = new Cluster(
    servers.ports.map((port) => ({ host: '127.0.0.1', port })),
    { redisOptions: { maxRetriesPerRequest: null } },
  );
  baseEnv = { ...ctx.env, REDIS_URL: servers.url, BOSUN_CONFIG: writeConfig(ctx, demoConfig()) };
}, 60_000);

afterAll(async () => {
  const { jetstreamManager } = await import('@nats-io/jetstream');
  await (await jetstreamManager(ctx.nats)).streams.delete(`${prefix}-runs`).catch(() => undefined);
  redis?.disconnect();
  await servers?.stop();
  await ctx?.close();
});

describe('Redis Cluster', () => {
  it('runs an incident end to end with a hash-tagged prefix', async () => {
    const env = { ...baseEnv, BOSUN_PREFIX: prefix };
    const cluster = await TestCluster.start(env, { specialists: 2 });
    let client: Client | undefined;
    try {
      client = await openClient(ctx, { connection: redis, prefix });
      const { job, runId } = await client.publish({
        id: 'rc-1',
        source: 'cluster',
        reason: 'ErrorRateHigh',
        summary: 'x',
        labels: { service: 'checkout' },
        payload: { fake: { stall: ['database'] } },
      });
      const result = await client.result(job);
      expect(result.status).toBe('partial');
      expect(result.specialists.find((s) => s.name === 'kubernetes')?.status).toBe('completed');
      expect(result.specialists.find((s) => s.name === 'database')?.status).toBe('stalled');
      await client.events.waitFor((e) => e.runId === runId && e.type === 'run.completed', 10_000);
      // Every key Bosun wrote sits in the prefix's one slot.
      const slot = await redis.cluster('KEYSLOT', `${prefix}:x`);
      let keys: string[] = [];
      for (const n of redis.nodes('master')) keys = keys.concat(await n.keys(`${prefix}:*`));
      expect(keys.length).toBeGreaterThan(10);
      for (const k of keys.slice(0, 50)) expect(await redis.cluster('KEYSLOT', k)).toBe(slot);
    } finally {
      await client?.close();
      await cluster.stop();
    }
  }, 90_000);

  it('refuses a prefix that is not a hash tag, with a message that says what to use', async () => {
    const p = startService('coordinator', { ...baseEnv, BOSUN_PREFIX: ctx.prefix });
    const { code } = await p.exited;
    expect(code).toBe(1);
    expect(p.lines.join('\n')).toContain(
      `BOSUN_PREFIX "${ctx.prefix}" is not safe on Redis Cluster: use a hash tag such as {${ctx.prefix}}`,
    );
  });

  it('refuses a plain connection to a Cluster node, saying how to configure it', async () => {
    const p = startService('specialist', { ...baseEnv, BOSUN_PREFIX: prefix, REDIS_URL: `redis://127.0.0.1:${servers.ports[0]}` });
    const { code } = await p.exited;
    expect(code).toBe(1);
    expect(p.lines.join('\n')).toContain('REDIS_URL points at a Redis Cluster node: set REDIS_CLUSTER=1');
  });
});
