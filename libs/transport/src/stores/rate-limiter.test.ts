import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openContext, type TestContext } from '../../../../test/helpers/context.js';

import { RedisRateLimiter } from './rate-limiter.js';

// The cluster-wide limiter against a real Redis (its check-and-take is one Lua script).

let ctx: TestContext;
beforeAll(async () => {
  ctx = await openContext('rate-limiter');
});
afterAll(async () => {
  await ctx?.close();
});

const limiter = (name: string, limits: ConstructorParameters<typeof RedisRateLimiter>[0]['limits']) =>
  new RedisRateLimiter({ redis: ctx.redis, prefix: ctx.prefix, name, limits });

describe('RedisRateLimiter', () => {
  it('lets N requests through per window; a request counts from its start until a window after its answer', async () => {
    const a = limiter('req', { requests: 3, windowMs: 2_000 });
    const b = limiter('req', { requests: 3, windowMs: 2_000 }); // another process, same limit
    expect([await a.acquire('1', 0), await b.acquire('2', 0), await a.acquire('3', 0)]).toEqual([0, 0, 0]);
    // All three still under way: ask again soon.
    expect(await b.acquire('4', 0)).toBe(100);
    // One answered: it leaves the window 2 s after its answer, not after its start.
    await a.release('1', 0);
    const wait = await b.acquire('4', 0);
    expect(wait).toBeGreaterThan(1_900);
    expect(wait).toBeLessThanOrEqual(2_001);
  });

  it('holds calls under way to the concurrency limit until one is released', async () => {
    const l = limiter('conc', { concurrency: 1 });
    expect(await l.acquire('a', 0)).toBe(0);
    expect(await l.acquire('b', 0)).toBeGreaterThan(0);
    await l.release('a', 0);
    expect(await l.acquire('b', 0)).toBe(0);
  });

  it('limits estimated tokens per window, letting one large call through an empty window', async () => {
    const l = limiter('tok', { tokens: 100, windowMs: 5_000 });
    expect(await l.acquire('big', 500)).toBe(0);
    expect(await l.acquire('next', 10)).toBeGreaterThan(3_000);
    // What the provider reported replaces the estimate: a call that used less leaves room.
    const s = limiter('tok3', { tokens: 100, windowMs: 5_000 });
    expect(await s.acquire('est', 90)).toBe(0);
    expect(await s.acquire('more', 20)).toBeGreaterThan(0);
    await s.release('est', 90, 30);
    expect(await s.acquire('more', 20)).toBe(0);
    const m = limiter('tok2', { tokens: 100, windowMs: 5_000 });
    expect(await m.acquire('x', 60)).toBe(0);
    expect(await m.acquire('y', 30)).toBe(0);
    expect(await m.acquire('z', 30)).toBeGreaterThan(0);
  });
});
