import { Cluster, Redis } from 'ioredis';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { redactUrl } from '@bosun/config';
import { BosunError } from '@bosun/contract';

/** A Redis connection: one server, or a Redis Cluster. */
export type RedisClient = Redis | Cluster;

/** Options of {@link createRedis}. */
export interface CreateRedisOptions {
  name?: string;
  /** Connect as a Redis Cluster client (also implied by several comma-separated URLs). */
  cluster?: boolean;
}

/**
 * Opens a Redis connection for BullMQ and Bosun's own keys. `maxRetriesPerRequest: null`
 * is what BullMQ workers require; commands wait across a Redis restart instead of failing.
 * `url` may list several nodes, comma-separated, for a Redis Cluster.
 */
export function createRedis(url: string, options: CreateRedisOptions = {}): RedisClient {
  const urls = url.split(',').map((u) => u.trim()).filter(Boolean);
  // Back off up to 2 s between reconnect attempts, forever: a service outlives a Redis restart.
  const retryStrategy = (times: number) => Math.min(50 * times, 2_000);
  if (urls.length > 1 || options.cluster) {
    const first = new URL(urls[0] ?? url);
    return new Cluster(
      urls.map((u) => {
        const parsed = new URL(u);
        return { host: parsed.hostname, port: Number(parsed.port || 6379) };
      }),
      {
        clusterRetryStrategy: retryStrategy,
        enableReadyCheck: true,
        redisOptions: {
          maxRetriesPerRequest: null,
          connectionName: options.name,
          ...(first.password ? { password: decodeURIComponent(first.password) } : {}),
          ...(first.username ? { username: decodeURIComponent(first.username) } : {}),
          ...(first.protocol === 'rediss:' ? { tls: {} } : {}),
        },
      },
    );
  }
  return new Redis(url, {
    maxRetriesPerRequest: null,
    enableReadyCheck: true,
    connectionName: options.name,
    retryStrategy,
  });
}

/** Whether a prefix is a Redis Cluster hash tag, `{name}`: every key under it hashes to one slot. */
export function isHashTagged(prefix: string): boolean {
  return /^\{[^{}]+\}$/.test(prefix);
}

/**
 * Refuses a topology Bosun cannot run on safely: a Cluster client with a prefix that is not a
 * hash tag (BullMQ flows and runs span keys that must share one slot), or a plain client
 * pointed at a Cluster node (it would fail on the first key in another slot).
 */
export async function checkRedisTopology(redis: RedisClient, prefix: string): Promise<void> {
  if (redis instanceof Cluster) {
    if (!isHashTagged(prefix)) {
      throw new BosunError(
        'unsafe_prefix',
        `BOSUN_PREFIX "${prefix}" is not safe on Redis Cluster: use a hash tag such as {${prefix.replace(/[{}]/g, '')}} so that every key of a queue and of a run hashes to one slot (see docs/scaling.md)`,
      );
    }
    return;
  }
  const info = await redis.info('cluster');
  if (/cluster_enabled:1/.test(info)) {
    throw new BosunError(
      'cluster_not_configured',
      'REDIS_URL points at a Redis Cluster node: set REDIS_CLUSTER=1 (or list the nodes, comma-separated) and a hash-tagged BOSUN_PREFIX such as {bosun} (see docs/scaling.md)',
    );
  }
}

/** Resolves when `redis` is ready, or rejects with a message naming the URL after `timeoutMs`. */
export async function waitForRedis(redis: RedisClient, url: string, timeoutMs = 10_000): Promise<void> {
  const started = Date.now();
  for (;;) {
    try {
      await withTimeout(redis.ping(), 2_000);
      return;
    } catch (err) {
      if (Date.now() - started > timeoutMs) {
        throw new BosunError(
          'redis_unreachable',
          `Redis at ${redactUrl(url)} did not answer within ${timeoutMs} ms (${(err as Error).message}). Start it or set REDIS_URL.`,
          { cause: err },
        );
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(t);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}

/**
 * Connects to NATS, reconnecting forever after a disconnect. Rejects with a message naming the
 * URL when the first connection fails.
 */
export async function connectNats(url: string, options: { name?: string } = {}): Promise<NatsConnection> {
  try {
    return await connect({
      servers: url.split(',').map((s) => s.trim()),
      name: options.name,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 500,
      timeout: 5_000,
      // Every JetStream publish is a request; async traces would build two Error objects
      // (stack capture included) per event for context we never show.
      noAsyncTraces: true,
    });
  } catch (err) {
    throw new BosunError(
      'nats_unreachable',
      `NATS at ${redactUrl(url)} is unreachable (${(err as Error).message}). Start it or set NATS_URL.`,
      { cause: err },
    );
  }
}
