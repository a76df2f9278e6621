import { describe, expect, it } from 'vitest';
import type { RedisClient } from '../base/connections.js';
import { CorruptCheckpointError, MemoryCheckpointStore, RedisCheckpointStore, type CheckpointStore } from './checkpoints.js';
import { keys } from '../keys.js';

/** GET, SET (with EX) and DEL over a Map, recording each SET's TTL. */
class FakeRedis {
  readonly data = new Map<string, string>();
  readonly ttls = new Map<string, number>();

  get(key: string): Promise<string | null> {
    return Promise.resolve(this.data.get(key) ?? null);
  }

  set(key: string, value: string, ex: 'EX', seconds: number): Promise<'OK'> {
    expect(ex).toBe('EX');
    this.data.set(key, value);
    this.ttls.set(key, seconds);
    return Promise.resolve('OK');
  }

  del(key: string): Promise<number> {
    return Promise.resolve(this.data.delete(key) ? 1 : 0);
  }

  asClient(): RedisClient {
    return this as unknown as RedisClient;
  }
}

const stores: [string, () => CheckpointStore][] = [
  ['RedisCheckpointStore', () => new RedisCheckpointStore({ redis: new FakeRedis().asClient(), prefix: 'p' })],
  ['MemoryCheckpointStore', () => new MemoryCheckpointStore()],
];

describe.each(stores)('%s', (_name, make) => {
  it('returns null for a checkpoint never saved, the saved document after a save, and null again after a delete', async () => {
    const store = make();
    expect(await store.load('run:r1')).toBeNull();
    await store.save('run:r1', { phase: 'delegated', round: 2, parts: ['a', 'b'] });
    expect(await store.load('run:r1')).toEqual({ phase: 'delegated', round: 2, parts: ['a', 'b'] });
    await store.delete('run:r1');
    expect(await store.load('run:r1')).toBeNull();
  });

  it('returns a copy, as JSON went through it: a later change to the saved object is not seen', async () => {
    const store = make();
    const doc = { steps: [1], at: new Date(0) };
    await store.save('task:t1', doc);
    doc.steps.push(2);
    expect(await store.load('task:t1')).toEqual({ steps: [1], at: '1970-01-01T00:00:00.000Z' });
  });
});

describe('RedisCheckpointStore', () => {
  it('writes <prefix>:ckpt:<id> with a week-long TTL by default, or the one given', async () => {
    const redis = new FakeRedis();
    await new RedisCheckpointStore({ redis: redis.asClient(), prefix: 'p' }).save('run:r1', { a: 1 });
    await new RedisCheckpointStore({ redis: redis.asClient(), prefix: 'p', ttlSeconds: 60 }).save('run:r2', { a: 2 });
    expect(redis.data.get(keys.checkpoint('p', 'run:r1'))).toBe('{"a":1}');
    expect(redis.ttls.get(keys.checkpoint('p', 'run:r1'))).toBe(7 * 24 * 3600);
    expect(redis.ttls.get(keys.checkpoint('p', 'run:r2'))).toBe(60);
  });

  it('refuses a checkpoint that is not JSON with a CorruptCheckpointError naming it, never an empty one', async () => {
    const redis = new FakeRedis();
    redis.data.set(keys.checkpoint('p', 'run:r1'), '{"phase": "deleg');
    const err = await new RedisCheckpointStore({ redis: redis.asClient(), prefix: 'p' }).load('run:r1').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CorruptCheckpointError);
    expect(err).toMatchObject({ code: 'corrupt_checkpoint', data: { id: 'run:r1' }, message: 'checkpoint run:r1 is not valid JSON' });
    expect((err as Error).cause).toBeInstanceOf(SyntaxError);
  });
});
