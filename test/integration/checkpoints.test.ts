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

describe.each(stores())('a fenced save (%s)', (name, make) => {
  it("writes only while the writer holds its job's lock, and never over the next owner's state", async () => {
    const store = make();
    const id = `task:fenced-${name}`;
    const lock = `${ctx.prefix}:specialist-k:fenced-${name}:lock`;
    const setLock = async (token: string | null) => {
      if (store instanceof MemoryCheckpointStore) {
        if (token === null) store.locks.delete(lock);
        else store.locks.set(lock, token);
      } else if (token === null) await ctx.redis.del(lock);
      else await ctx.redis.set(lock, token);
    };
    await setLock('old-owner');
    await store.save(id, { step: 1, by: 'old' }, { fence: { key: lock, token: 'old-owner' } });
    expect(await store.load(id)).toEqual({ step: 1, by: 'old' });
    // The lock expired (the old owner was cut off): nothing it writes lands.
    await setLock(null);
    const lost = store.save(id, { step: 2, by: 'old' }, { fence: { key: lock, token: 'old-owner' } });
    await expect(lost).rejects.toMatchObject({ name: 'LockLostError', code: 'lock_lost' });
    // The next owner writes; the old owner's held write, arriving later, is refused.
    await setLock('new-owner');
    await store.save(id, { step: 2, by: 'new' }, { fence: { key: lock, token: 'new-owner' } });
    await expect(store.save(id, { step: 3, by: 'old' }, { fence: { key: lock, token: 'old-owner' } })).rejects.toMatchObject({
      code: 'lock_lost',
    });
    expect(await store.load(id)).toEqual({ step: 2, by: 'new' });
    // A save without a fence (the timers' writers use their own compare-and-set) writes as before.
    await store.save(id, { step: 4 });
    expect(await store.load(id)).toEqual({ step: 4 });
  });
});
