import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  InvalidInputError,
  TOOL_CALL_LEASE_MS,
  TOOL_CALL_RECORD_TTL_SECONDS,
  TOOL_CALL_TRANSITIONS,
  toolCallDigest,
  type ToolCallResult,
} from '@bosun/contract';
import { openContext, type TestContext } from '../../../../test/helpers/context.js';

import { keys } from '../keys.js';
import { ToolCallRecords, type ToolCallClaim } from './tool-records.js';

// The record's transitions against a real Redis (the scripts are Lua): each change happens from
// the state it starts from, and from no other.

let ctx: TestContext;
let records: ToolCallRecords;

const AT = new Date('2026-01-01T00:00:00.000Z');
const BY = { by: 'alice', at: AT.toISOString() };

/** A claim of `key` by attempt `owner` (default `g1`), of the call `restart_pod {pod: p1}` unless `args` says otherwise. */
function claimOf(
  key: string,
  readOnly = false,
  owner = 'g1',
  args: Record<string, unknown> = { pod: 'p1', password: 'hunter2' },
): ToolCallClaim {
  return {
    key,
    digest: toolCallDigest(key, 'demo__restart_pod', args),
    owner,
    tool: 'demo__restart_pod',
    shownArgs: { pod: 'p1', password: '[redacted]' },
    argsRedacted: true,
    runId: 'r-rec',
    incidentId: 'inc-rec',
    agent: 'kubernetes',
    readOnly,
    approvalId: 'ap-1',
  };
}

function okResult(key: string): ToolCallResult {
  return { v: 1, key, tool: 'demo__restart_pod', status: 'ok', isError: false, text: 'restarted', durationMs: 12 };
}

const stateOf = (key: string) => ctx.redis.hget(records.key(key), 'state');
const setState = (key: string, state: string) => ctx.redis.hset(records.key(key), { state, tool: 'demo__restart_pod' });

beforeAll(async () => {
  ctx = await openContext('tool-records');
  records = new ToolCallRecords({ redis: ctx.redis, prefix: ctx.prefix });
});

afterAll(async () => {
  await ctx?.close();
});

describe('ToolCallRecords.claim', () => {
  it('claims a new call: inflight, with its fields and a 7-day expiry', async () => {
    expect(await records.claim(claimOf('c-new'), AT)).toEqual({ claimed: true });
    const { leaseUntil, ...hash } = await ctx.redis.hgetall(records.key('c-new'));
    // The lease runs on Redis's clock, from the claim.
    const [seconds] = await ctx.redis.time();
    expect(Number(leaseUntil) - Number(seconds) * 1000).toBeGreaterThan(TOOL_CALL_LEASE_MS - 2_000);
    expect(Number(leaseUntil) - Number(seconds) * 1000).toBeLessThanOrEqual(TOOL_CALL_LEASE_MS + 1_000);
    expect(hash).toEqual({
      state: 'inflight',
      tool: 'demo__restart_pod',
      args: JSON.stringify({ pod: 'p1', password: '[redacted]' }),
      runId: 'r-rec',
      incidentId: 'inc-rec',
      agent: 'kubernetes',
      startedAt: AT.toISOString(),
      readOnly: 'false',
      approvalId: 'ap-1',
      argsRedacted: 'true',
      digest: toolCallDigest('c-new', 'demo__restart_pod', { pod: 'p1', password: 'hunter2' }),
      owner: 'g1',
    });
    const ttl = await ctx.redis.ttl(records.key('c-new'));
    expect(ttl).toBeGreaterThan(TOOL_CALL_RECORD_TTL_SECONDS - 60);
    expect(await records.read('c-new')).toMatchObject({ state: 'inflight', readOnly: false, argsRedacted: true, args: { pod: 'p1' } });
  });

  it('does not claim a mutating call in flight or in doubt, and claims a read-only one in flight and one to retry', async () => {
    await records.claim(claimOf('c-rw'));
    // Another attempt finds it under a live lease (it waits); once the lease has run out, in flight.
    expect(await records.claim(claimOf('c-rw', false, 'g2'))).toMatchObject({ claimed: false, state: 'leased' });
    await ctx.redis.hset(records.key('c-rw'), 'leaseUntil', '1');
    expect(await records.claim(claimOf('c-rw', false, 'g2'))).toEqual({ claimed: false, state: 'inflight' });
    await setState('c-doubt', 'in-doubt');
    expect(await records.claim(claimOf('c-doubt'))).toEqual({ claimed: false, state: 'in-doubt' });
    expect(await stateOf('c-doubt')).toBe('in-doubt');

    await records.claim(claimOf('c-ro', true));
    expect(await records.claim(claimOf('c-ro', true, 'g2'))).toEqual({ claimed: true });
    expect(await ctx.redis.hget(records.key('c-ro'), 'owner')).toBe('g2');
    await setState('c-retry', 'retry');
    expect(await records.claim(claimOf('c-retry'))).toEqual({ claimed: true });
    expect(await stateOf('c-retry')).toBe('inflight');
  });

  it("is this attempt's own claim again when the same command comes twice (a reply lost to a reset, the command re-sent)", async () => {
    expect(await records.claim(claimOf('c-twice'))).toEqual({ claimed: true });
    expect(await records.claim(claimOf('c-twice'))).toEqual({ claimed: true });
    expect(await records.claim(claimOf('c-twice', false, 'g2'))).toMatchObject({ claimed: false, state: 'leased' });
  });

  it('refuses a call of another tool or with other arguments under a recorded key, in every state', async () => {
    await records.claim(claimOf('c-mm'));
    const other = { ...claimOf('c-mm', false, 'g2'), digest: toolCallDigest('c-mm', 'demo__rollback_deployment', { pod: 'p1' }) };
    expect(await records.claim(other)).toEqual({ claimed: false, state: 'mismatch', recordedTool: 'demo__restart_pod' });
    await records.recordDone(okResult('c-mm'), 'g1');
    // Another call's result is never handed out under its key.
    expect(await records.claim(claimOf('c-mm', false, 'g3', { pod: 'p2' }))).toEqual({
      claimed: false,
      state: 'mismatch',
      recordedTool: 'demo__restart_pod',
    });
    expect(await records.claim(claimOf('c-mm', true, 'g3', { pod: 'p2' }))).toMatchObject({ state: 'mismatch' });
    // A record of an earlier version (no digest) is answered as before.
    await ctx.redis.hdel(records.key('c-mm'), 'digest');
    expect(await records.claim(claimOf('c-mm', false, 'g3', { pod: 'p2' }))).toMatchObject({ state: 'done' });
  });

  it('refuses a caller whose task lock is not its own (a stale owner), whatever the record says, and writes nothing', async () => {
    const lockKey = `${ctx.prefix}:specialist-k:t1:lock`;
    await ctx.redis.set(lockKey, 'new-owner');
    expect(await records.claim({ ...claimOf('c-stale'), lock: { key: lockKey, token: 'old-owner' } })).toEqual({
      claimed: false,
      state: 'stale',
    });
    expect(await ctx.redis.exists(records.key('c-stale'))).toBe(0);
    await ctx.redis.del(lockKey);
    expect(await records.claim({ ...claimOf('c-stale'), lock: { key: lockKey, token: 'old-owner' } })).toMatchObject({ state: 'stale' });
    await ctx.redis.set(lockKey, 'new-owner');
    expect(await records.claim({ ...claimOf('c-stale'), lock: { key: lockKey, token: 'new-owner' } })).toEqual({ claimed: true });
  });

  it('answers a done call with its recorded result, read-only or not', async () => {
    await records.claim(claimOf('c-done'));
    await records.recordDone(okResult('c-done'));
    expect(await records.claim(claimOf('c-done'))).toEqual({ claimed: false, state: 'done', result: okResult('c-done') });
    expect(await records.claim(claimOf('c-done', true))).toEqual({ claimed: false, state: 'done', result: okResult('c-done') });
    expect(await records.recorded('c-done')).toEqual(okResult('c-done'));
    expect(await records.recorded('c-rw')).toBeUndefined();
    expect(await records.recorded('c-none')).toBeUndefined();
  });

  it('refuses a corrupt recorded result with an error naming the call, not a made-up result', async () => {
    await ctx.redis.hset(records.key('c-corrupt'), { state: 'done', result: '{"v":1,' });
    await expect(records.claim(claimOf('c-corrupt'))).rejects.toThrow('the recorded result of tool call c-corrupt is not valid JSON');
    await ctx.redis.hset(records.key('c-bad-result'), { state: 'done', result: '{"v":1,"key":"x"}' });
    await expect(records.recorded('c-bad-result')).rejects.toThrow(InvalidInputError);
  });
});

describe("the gateway's outcome writes", () => {
  it('recordDone: inflight → done with the result; markInDoubt: inflight → in-doubt', async () => {
    await records.claim(claimOf('o-done'));
    expect(await records.recordDone(okResult('o-done'), 'g1')).toBe('done');
    expect(await records.read('o-done')).toMatchObject({ state: 'done', result: okResult('o-done') });
    await records.claim(claimOf('o-doubt'));
    expect(await records.markInDoubt('o-doubt', { owner: 'g1' })).toEqual({ kind: 'marked' });
    expect(await records.markInDoubt('o-doubt', { owner: 'g1' })).toEqual({ kind: 'already' });
    expect(await records.read('o-doubt')).toMatchObject({ state: 'in-doubt', inDoubtAt: expect.any(String) });
  });

  it('renews the lease only for its owner while the call is in flight; another may declare it in doubt only once it ran out', async () => {
    await records.claim(claimOf('o-lease'));
    await ctx.redis.hset(records.key('o-lease'), 'leaseUntil', '1');
    expect(await records.renewLease('o-lease', 'g2')).toBe(false);
    expect(await records.renewLease('o-lease', 'g1')).toBe(true);
    expect(await records.markInDoubt('o-lease', { lapsed: true })).toMatchObject({ kind: 'leased' });
    expect(await records.markInDoubt('o-lease', { owner: 'g2' })).toEqual({ kind: 'other', state: 'not-owner' });
    await ctx.redis.hset(records.key('o-lease'), 'leaseUntil', '1');
    expect(await records.markInDoubt('o-lease', { lapsed: true })).toEqual({ kind: 'marked' });
    expect(await records.renewLease('o-lease', 'g1')).toBe(false);
  });

  it('in doubt, later seen done: the real outcome is recorded beside the declaration, and the index lets go of it in the same write', async () => {
    const indexed = async () => (await ctx.redis.zrange(keys.inDoubt(ctx.prefix), 0, -1)).includes('o-seen');
    await records.claim(claimOf('o-seen'));
    await ctx.redis.hset(records.key('o-seen'), 'leaseUntil', '1');
    await records.markInDoubt('o-seen', { lapsed: true });
    expect(await indexed()).toBe(true);
    expect(await records.recordDone(okResult('o-seen'), 'g1')).toBe('seen-done');
    expect(await records.read('o-seen')).toMatchObject({
      state: 'done',
      result: okResult('o-seen'),
      inDoubtAt: expect.any(String),
      seenDoneAt: expect.any(String),
    });
    expect(await indexed()).toBe(false);
    // Another attempt now gets the real result.
    expect(await records.claim(claimOf('o-seen', false, 'g2'))).toMatchObject({ state: 'done', result: okResult('o-seen') });
    // An operator acknowledges it once; the result stays.
    expect(await records.acknowledgeSeenDone('o-seen', { action: 'done', ...BY })).toEqual({ changed: true, was: 'done' });
    expect(await records.acknowledgeSeenDone('o-seen', { action: 'done', ...BY })).toEqual({ changed: false, was: 'done' });
    expect((await records.read('o-seen'))?.result).toEqual(okResult('o-seen'));
  });

  it('keeps a late outcome beside an operator resolution, and drops the write of an attempt that no longer owns the call', async () => {
    await records.claim(claimOf('o-late'));
    await records.markInDoubt('o-late', { owner: 'g1' });
    const resolved = await records.resolve('o-late', { action: 'skip', ...BY }, 'demo__restart_pod');
    expect(await records.recordDone(okResult('o-late'), 'g1')).toBe('late');
    expect(await records.read('o-late')).toMatchObject({ result: resolved.result, lateResult: okResult('o-late') });

    await records.claim(claimOf('o-owner', true, 'g1'));
    await records.claim(claimOf('o-owner', true, 'g2'));
    expect(await records.recordDone({ ...okResult('o-owner'), text: 'from g1' }, 'g1')).toBe('not-owner');
    expect(await records.recordDone({ ...okResult('o-owner'), text: 'from g2' }, 'g2')).toBe('done');
    expect((await records.read('o-owner'))?.result?.text).toBe('from g2');
  });

  it('frees a key its owner claimed and never sent, and no other', async () => {
    await records.claim(claimOf('o-free'));
    expect(await records.abandonClaim('o-free', 'g2')).toBe(false);
    expect(await records.abandonClaim('o-free', 'g1')).toBe(true);
    expect(await ctx.redis.exists(records.key('o-free'))).toBe(0);
  });
});

describe("the operator's changes", () => {
  it('resolve (done, skip): in-doubt → done with the resolved result and the resolution, once', async () => {
    await setState('r-done', 'in-doubt');
    const done = await records.resolve('r-done', { action: 'done', ...BY }, 'demo__restart_pod');
    expect(done).toMatchObject({ changed: true, was: 'in-doubt' });
    expect(done.result).toEqual({
      v: 1,
      key: 'r-done',
      tool: 'demo__restart_pod',
      status: 'ok',
      isError: false,
      text: 'Resolved by an operator: the call took effect.',
      durationMs: 0,
    });
    expect(await records.read('r-done')).toMatchObject({ state: 'done', result: done.result, resolution: { action: 'done', ...BY } });
    // A second resolution finds it done and changes nothing.
    const again = await records.resolve('r-done', { action: 'skip', ...BY }, 'demo__restart_pod');
    expect(again).toMatchObject({ changed: false, was: 'done' });
    expect((await records.read('r-done'))?.result).toEqual(done.result);

    await setState('r-skip', 'in-doubt');
    const skip = await records.resolve('r-skip', { action: 'skip', ...BY }, 'demo__restart_pod');
    expect(skip.result).toMatchObject({ status: 'error', isError: true, error: 'Resolved by an operator: treated as not executed.' });
    expect(await stateOf('r-skip')).toBe('done');
  });

  it('changes nothing from any other state, and says what it found', async () => {
    for (const state of ['inflight', 'done', 'retry']) {
      await setState(`r-from-${state}`, state);
      expect(await records.resolve(`r-from-${state}`, { action: 'done', ...BY }, 't')).toMatchObject({ changed: false, was: state });
      expect(await records.markRetry(`r-from-${state}`, { action: 'retry', ...BY })).toEqual({ changed: false, was: state });
      expect(await stateOf(`r-from-${state}`)).toBe(state);
      expect(await ctx.redis.hexists(records.key(`r-from-${state}`), 'resolution')).toBe(0);
    }
    expect(await records.resolve('r-missing', { action: 'done', ...BY }, 't')).toMatchObject({ changed: false, was: null });
    expect(await ctx.redis.exists(records.key('r-missing'))).toBe(0);
  });

  it('markRetry: in-doubt → retry; undoRetry: retry → in-doubt without the resolution, and from nothing else', async () => {
    await setState('r-retry', 'in-doubt');
    expect(await records.markRetry('r-retry', { action: 'retry', ...BY })).toEqual({ changed: true, was: 'in-doubt' });
    expect(await records.read('r-retry')).toMatchObject({ state: 'retry', resolution: { action: 'retry', ...BY } });
    expect(await records.undoRetry('r-retry')).toEqual({ changed: true, was: 'retry' });
    const back = await records.read('r-retry');
    expect(back?.state).toBe('in-doubt');
    expect(back?.resolution).toBeUndefined();
    // Claimed meanwhile by a gateway: the undo must not put it back in doubt.
    await setState('r-claimed', 'inflight');
    expect(await records.undoRetry('r-claimed')).toEqual({ changed: false, was: 'inflight' });
    expect(await stateOf('r-claimed')).toBe('inflight');
  });

  it('makes only the operator transitions of the contract', () => {
    const operator = TOOL_CALL_TRANSITIONS.filter((t) => t.by === 'operator').map((t) => `${t.from} → ${t.to}`);
    expect(operator).toEqual(['in-doubt → done', 'in-doubt → retry', 'retry → in-doubt']);
  });
});

describe('ToolCallRecords.read', () => {
  it('is null for no record, and names the bad field of a corrupt one', async () => {
    expect(await records.read('x-none')).toBeNull();
    await ctx.redis.hset(records.key('x-state'), { state: 'sideways' });
    await expect(records.read('x-state')).rejects.toThrow(/^invalid tool call record x-state: state: /);
    await ctx.redis.hset(records.key('x-args'), { state: 'in-doubt', args: 'not json' });
    await expect(records.read('x-args')).rejects.toThrow('invalid tool call record x-args: args: is not valid JSON');
  });
});

describe('the index of calls in doubt (the in-doubt gauge)', () => {
  it('holds a call from markInDoubt until done, skip or retry, and again after undoRetry', async () => {
    // Only this test's calls (earlier tests of the file put others in doubt).
    const indexed = async () => (await ctx.redis.zrange(keys.inDoubt(ctx.prefix), 0, -1)).filter((k) => k.startsWith('ix-'));
    await records.claim(claimOf('ix-1'), AT);
    await records.claim(claimOf('ix-2'), AT);
    await records.markInDoubt('ix-1', { owner: 'g1' });
    await records.markInDoubt('ix-2', { owner: 'g1' });
    expect((await indexed()).sort()).toEqual(['ix-1', 'ix-2']);
    await records.resolve('ix-1', { action: 'done', ...BY }, 'demo__restart_pod');
    expect(await indexed()).toEqual(['ix-2']);
    await records.markRetry('ix-2', { action: 'retry', ...BY });
    expect(await indexed()).toEqual([]);
    await records.undoRetry('ix-2');
    expect(await indexed()).toEqual(['ix-2']);
    // A change that does not happen (ix-1 is no longer in doubt) leaves the index alone.
    await records.undoRetry('ix-1');
    expect(await indexed()).toEqual(['ix-2']);
  });
});
