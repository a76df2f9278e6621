import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { readRedisSettings } from '@bosun/config';
import { COALESCE_MAX_BYTES, createRedis } from '@bosun/transport';
import { openContext, type TestContext } from '../helpers/index.js';
import { waitUntil } from '../helpers/wait.js';

// The Redis clients Bosun opens send the commands of one pass of the event loop in one write
// (libs/transport/src/base/redis-writes.ts), against the real server: replies still in order,
// across a reconnect, and for BullMQ's duplicates of the client.

let ctx: TestContext;
const opened: Redis[] = [];
beforeAll(async () => {
  ctx = await openContext('rwrites');
});
afterAll(async () => {
  await Promise.all(opened.map((r) => r.quit().catch(() => r.disconnect())));
  await ctx.close();
});

function client(): Redis {
  const r = createRedis(readRedisSettings({ REDIS_URL: ctx.redisUrl })) as Redis;
  opened.push(r);
  return r;
}

/** Counts the writes that reach the socket's handle: one per `_write` or `_writev`. */
function countWrites(socket: Socket): { writes: number } {
  const count = { writes: 0 };
  const s = socket as unknown as Record<'_write' | '_writev', (...a: unknown[]) => unknown>;
  for (const m of ['_write', '_writev'] as const) {
    const f = s[m].bind(socket);
    s[m] = (...a: unknown[]) => {
      count.writes++;
      return f(...a);
    };
  }
  return count;
}

describe('Redis writes coalesced per pass of the event loop', () => {
  it('sends 50 commands issued together in one write, and each gets its own reply in order', async () => {
    const redis = client();
    await redis.ping();
    const count = countWrites(redis.stream);
    const key = `${ctx.prefix}:rw:list`;
    const replies = await Promise.all(Array.from({ length: 50 }, (_, i) => redis.rpush(key, String(i))));
    expect(replies).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    expect(count.writes).toBe(1);
    expect(await redis.lrange(key, 0, -1)).toEqual(Array.from({ length: 50 }, (_, i) => String(i)));
    // Commands issued after awaiting are a later pass: a write of their own.
    await redis.get(key).catch(() => undefined);
    expect(count.writes).toBe(3);
    await redis.del(key);
  });

  it('sends a pass larger than COALESCE_MAX_BYTES in writes of about that size, never held whole', async () => {
    const redis = client();
    await redis.ping();
    const count = countWrites(redis.stream);
    const value = 'v'.repeat(4096);
    // 64 commands of a little over 4 KiB: about 4 × 64 KiB.
    const keys = Array.from({ length: 64 }, (_, i) => `${ctx.prefix}:rw:big:${i}`);
    expect(await Promise.all(keys.map((k) => redis.set(k, value)))).toEqual(keys.map(() => 'OK'));
    expect(count.writes).toBeGreaterThanOrEqual(Math.floor((64 * 4096) / COALESCE_MAX_BYTES));
    expect(count.writes).toBeLessThanOrEqual(Math.ceil((64 * 4200) / COALESCE_MAX_BYTES) + 1);
    expect(await redis.get(keys[63]!)).toBe(value);
    await redis.del(...keys);
  });

  it('keeps coalescing on the socket of a reconnect, and on a duplicate()', async () => {
    const redis = client();
    await redis.ping();
    const first = redis.stream;
    redis.disconnect(true);
    await waitUntil(() => redis.status === 'ready' && redis.stream !== first, 10_000, 'the client reconnected');
    const again = countWrites(redis.stream);
    await Promise.all([redis.ping(), redis.ping(), redis.ping()]);
    expect(again.writes).toBe(1);
    const dup = redis.duplicate();
    opened.push(dup);
    await dup.ping();
    const d = countWrites(dup.stream);
    await Promise.all([dup.ping(), dup.ping()]);
    expect(d.writes).toBe(1);
  });

  it('carries BullMQ jobs end to end on a client of ours (its workers block on a duplicate)', async () => {
    const connection = client();
    const name = `${ctx.prefix}-rwq`;
    const queue = new Queue(name, { connection, prefix: ctx.prefix });
    const done: number[] = [];
    const worker = new Worker(name, async (job) => (job.data as { n: number }).n * 2, { connection, prefix: ctx.prefix, concurrency: 10 });
    worker.on('completed', (_job, value: number) => void done.push(value));
    try {
      await queue.addBulk(Array.from({ length: 100 }, (_, n) => ({ name: 'double', data: { n } })));
      await waitUntil(
        () => done.length === 100,
        20_000,
        () => `${done.length} of 100 jobs completed`,
      );
      expect([...done].sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, n) => n * 2));
    } finally {
      await worker.close();
      await queue.obliterate({ force: true });
      await queue.close();
    }
  });
});
