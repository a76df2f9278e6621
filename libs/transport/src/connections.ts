import { Redis } from 'ioredis';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { redactUrl } from '@bosun/config';
import { BosunError } from '@bosun/contract';

/**
 * Opens a Redis connection for BullMQ and Bosun's own keys. `maxRetriesPerRequest: null`
 * is what BullMQ workers require; commands wait across a Redis restart instead of failing.
 */
export function createRedis(url: string, options: { name?: string } = {}): Redis {
  return new Redis(url, {
    maxRetriesPerRequest: null,
    enableReadyCheck: true,
    connectionName: options.name,
    // Back off up to 2 s between reconnect attempts, forever: a service outlives a Redis restart.
    retryStrategy: (times) => Math.min(50 * times, 2_000),
  });
}

/** Resolves when `redis` is ready, or rejects with a message naming the URL after `timeoutMs`. */
export async function waitForRedis(redis: Redis, url: string, timeoutMs = 10_000): Promise<void> {
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
    });
  } catch (err) {
    throw new BosunError(
      'nats_unreachable',
      `NATS at ${redactUrl(url)} is unreachable (${(err as Error).message}). Start it or set NATS_URL.`,
      { cause: err },
    );
  }
}
