import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryCheckpointStore, RedisCheckpointStore, type RevisedCheckpointStore } from '@bosun/transport';
import { openContext, type TestContext } from '../helpers/index.js';

// Compare-and-set saves of checkpoints, as the coordinator's timers write run checkpoints:
// in Redis (a Lua script comparing the stored text's SHA-1) and in memory (the unit tests' store).

let ctx: TestContext;
beforeAll(async () => {
  ctx = await openContext('ckpt');
});
afterAll(async () => {
  await ctx.close();
});

function stores(): [string, () => RevisedCheckpointStore][] {
  return [
    ['redis', () => new RedisCheckpointStore({ redis: ctx.redis, prefix: ctx.prefix, ttlSeconds: 60 })],
    ['memory', () => new MemoryCheckpointStore()],
  ];
}

describe.each(stores())('saveIfRevision (%s)', (name, make) => {
  it('writes only over the revision it read, and never over a write made since', async () => {
    const store = make();
    const id = `run:cas-${name}`;
    const absent = await store.loadRevision(id);
    expect(absent).toEqual({ value: null, revision: null });
    // Created only while there is none.
    const r1 = await store.saveIfRevision(id, { phase: 'waiting', n: 1 }, null);
    expect(r1).toMatch(/^[0-9a-f]{40}$/);
    expect(await store.saveIfRevision(id, { phase: 'waiting', n: 99 }, null)).toBeUndefined();
    const read = await store.loadRevision(id);
    expect(read).toEqual({ value: { phase: 'waiting', n: 1 }, revision: r1 });
    // Someone else writes (the run resumed elsewhere saves its result): the stale writer is refused.
    await store.save(id, { phase: 'done', result: { status: 'completed' } });
    expect(await store.saveIfRevision(id, { phase: 'waiting', n: 2 }, read.revision)).toBeUndefined();
    expect(await store.load(id)).toEqual({ phase: 'done', result: { status: 'completed' } });
    // Read again, it writes; the revision it gets back is the next one to write from.
    const again = await store.loadRevision(id);
    const r2 = await store.saveIfRevision(id, { phase: 'done', n: 3 }, again.revision);
    expect(r2).toBeDefined();
    expect((await store.loadRevision(id)).revision).toBe(r2);
    expect(await store.saveIfRevision(id, { phase: 'done', n: 4 }, r2!)).toBeDefined();
    expect(await store.load(id)).toEqual({ phase: 'done', n: 4 });
  });
});

describe('RedisCheckpointStore.saveIfRevision', () => {
  it('keeps the expiry of a checkpoint, and compares non-ASCII text as the stored bytes', async () => {
    const store = new RedisCheckpointStore({ redis: ctx.redis, prefix: ctx.prefix, ttlSeconds: 60 });
    const id = 'run:cas-utf8';
    const r1 = await store.saveIfRevision(id, { text: 'ü — 日本 🚒' }, null);
    expect(r1).toBe((await store.loadRevision(id)).revision);
    expect(await store.saveIfRevision(id, { text: 'next' }, r1!)).toBeDefined();
    const ttl = await ctx.redis.ttl(`${ctx.prefix}:ckpt:${id}`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60);
  });
});
