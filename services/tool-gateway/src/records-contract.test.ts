import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toolCallDigest, type ToolCallResult } from '@bosun/contract';
import { ToolCallRecords, keys, type ToolCallClaim } from '@bosun/transport';
import { openContext, type TestContext } from '../../../test/helpers/context.js';

import type { ToolRecords } from './ports.js';
import { ManualClock, MemoryToolRecords } from './testing/memory.js';

// The in-memory records the call-flow tests run on, held to the real ones: the same steps against
// `ToolCallRecords` (its Lua scripts, on a real Redis) and `MemoryToolRecords` give the same
// answers and leave the same records. Leases are either long (60 s: live throughout) or zero
// (run out at once), so neither side depends on how much time passes.

let ctx: TestContext;

beforeAll(async () => {
  ctx = await openContext('records-contract');
});

afterAll(async () => {
  await ctx?.close();
});

const ARGS = { pod: 'p1', password: 'hunter2' };

function claimOf(key: string, owner: string, extra: Partial<ToolCallClaim> = {}): ToolCallClaim {
  return {
    key,
    tool: 'demo__restart_pod',
    shownArgs: { pod: 'p1', password: '[redacted]' },
    argsRedacted: true,
    runId: 'r-c',
    incidentId: 'inc-c',
    agent: 'ops',
    readOnly: false,
    approvalId: 'ap-1',
    digest: toolCallDigest(key, 'demo__restart_pod', ARGS),
    owner,
    ...extra,
  };
}

function okResult(key: string): ToolCallResult {
  return { v: 1, key, tool: 'demo__restart_pod', status: 'ok', isError: false, text: 'restarted', durationMs: 5 };
}

/** The records as both sides leave them, without the fields that carry a time. */
async function shown(records: ToolRecords, key: string): Promise<Record<string, unknown> | null> {
  const r = await records.read(key);
  if (!r) return null;
  const { startedAt, leaseUntil, inDoubtAt, seenDoneAt, ...rest } = r;
  return {
    ...rest,
    startedAt: typeof startedAt,
    leaseUntil: typeof leaseUntil,
    inDoubtAt: typeof inDoubtAt,
    seenDoneAt: typeof seenDoneAt,
  };
}

/** Any `leaseMs` left becomes `n`: its value is the clock's. */
const leased = (v: unknown) => (typeof v === 'object' && v !== null && 'leaseMs' in v ? { ...v, leaseMs: 'n' } : v);

/** Runs the steps on one side: `live` with 60 s leases, `lapsed` with leases that have run out; `lock` sets a task lock. */
async function steps(
  side: { live: ToolRecords; lapsed: ToolRecords; lock(key: string, token: string): Promise<void>; inDoubt(): Promise<string[]> },
  p: string,
) {
  const { live, lapsed } = side;
  const out: unknown[] = [];
  const a = `${p}-a`;
  out.push(await live.claim(claimOf(a, 'g1')), await live.claim(claimOf(a, 'g1')), leased(await live.claim(claimOf(a, 'g2'))));
  out.push(await live.claim(claimOf(a, 'g2', { digest: 'other', tool: 'demo__scale' })));
  out.push(await live.claim(claimOf(a, 'g3', { readOnly: true })));
  out.push(await live.renewLease(a, 'g1'), await live.renewLease(a, 'g3'), leased(await live.markInDoubt(a, { lapsed: true })));
  out.push(await live.recordDone(okResult(a), 'g1'), await live.recordDone(okResult(a), 'g3'), await shown(live, a));
  out.push(
    await live.recorded(a),
    await live.recorded(a, 'other'),
    await live.claim(claimOf(a, 'g4')),
    await live.recordDone(okResult(a), 'g4'),
  );
  out.push(await live.markInDoubt(a, { owner: 'g4' }));
  const b = `${p}-b`;
  out.push(await lapsed.claim(claimOf(b, 'g1')), await lapsed.claim(claimOf(b, 'g2')), await lapsed.markInDoubt(b, { owner: 'g2' }));
  out.push(
    await lapsed.markInDoubt(b, { lapsed: true }),
    await lapsed.markInDoubt(b, { lapsed: true }),
    await lapsed.claim(claimOf(b, 'g3')),
  );
  out.push(await side.inDoubt(), await shown(lapsed, b));
  out.push(await lapsed.recordDone(okResult(b), 'g1'), await side.inDoubt(), await shown(lapsed, b));
  const c = `${p}-c`;
  out.push(await live.claim(claimOf(c, 'g1')), await live.abandonClaim(c, 'g2'), await live.abandonClaim(c, 'g1'), await shown(live, c));
  const d = `${p}-d`;
  await side.lock(`${p}:lock`, 'tok');
  out.push(await live.claim(claimOf(d, 'g1', { lock: { key: `${p}:lock`, token: 'bad' } })), await shown(live, d));
  out.push(await live.claim(claimOf(d, 'g1', { lock: { key: `${p}:lock`, token: 'tok' } })));
  return out;
}

describe('MemoryToolRecords', () => {
  it('answers every step as ToolCallRecords does on Redis, and leaves the same records', async () => {
    const real = await steps(
      {
        live: new ToolCallRecords({ redis: ctx.redis, prefix: ctx.prefix, leaseMs: 60_000 }),
        lapsed: new ToolCallRecords({ redis: ctx.redis, prefix: ctx.prefix, leaseMs: 0 }),
        lock: async (key, token) => {
          await ctx.redis.set(key, token);
        },
        inDoubt: () => ctx.redis.zrange(keys.inDoubt(ctx.prefix), 0, -1),
      },
      ctx.prefix,
    );
    const world = { clock: new ManualClock(), journal: [], faults: new Set<string>() };
    const live = new MemoryToolRecords({ ...world, leaseMs: 60_000 });
    // One store, two lease lengths: the lapsed view claims with leases that run out at once.
    const lapsed = live.withLease(0);
    const memory = await steps(
      {
        live,
        lapsed,
        lock: async (key, token) => {
          live.locks.set(key, token);
        },
        inDoubt: async () => [...live.inDoubtIndex],
      },
      ctx.prefix,
    );
    expect(memory).toEqual(real);
    // Not a comparison of two empty lists: the steps reached every outcome.
    expect(JSON.stringify(real)).toContain('"mismatch"');
    expect(real).toContain('seen-done');
    expect(real).toContain('not-owner');
  });
});
