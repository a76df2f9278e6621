import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Actor, ApprovalRule } from '@bosun/contract';
import { ApprovalError, ApprovalStore, type Approval } from '@bosun/transport';
import { Redis } from 'ioredis';
import { FaultProxy, openContext, type TestContext } from '../helpers/index.js';

// The two-person rule in the approval store, against a real Redis (issue 23, item 4): votes in
// `approval:<id>:votes` (one per person), the decision written once when the rule is complete,
// any denial denies, the requester refused under `distinctFrom: requester`, unverified names
// refused as votes, and two completing votes at once: one decision.

let ctx: TestContext;
let store: ApprovalStore;

beforeAll(async () => {
  ctx = await openContext('two-person');
  store = new ApprovalStore({ redis: ctx.redis, prefix: ctx.prefix });
});
afterAll(async () => {
  await store?.close();
  await ctx?.close();
});

const person = (name: string): Actor => ({ name, verified: true, path: 'http' });
const approveAs = (name: string) => ({ approve: true as const, by: name, actor: person(name) });

function seed(id: string, rule: ApprovalRule, requester?: string): Promise<Approval> {
  const now = Date.now();
  return store.request({
    id,
    runId: 'rtwoperson00000000001',
    incidentId: 'inc-2p',
    agent: 'kubernetes',
    taskId: `task-${id}`,
    calls: [
      { index: 0, tool: 'demo__get_pods', args: {}, needsApproval: false, key: `${id}-c0` },
      { index: 1, tool: 'demo__rollback', args: { to: 'v41' }, needsApproval: true, key: `${id}-c1` },
    ],
    reason: 'roll back',
    createdAt: new Date(now).toISOString(),
    timeoutAt: new Date(now + 300_000).toISOString(),
    rule,
    ...(requester ? { requester } : {}),
  });
}

const refusal = (p: Promise<unknown>) => p.then(() => undefined).catch((e: unknown) => e as ApprovalError);

describe('a rule of two people', () => {
  it('stays pending at 1 of 2 (the same person twice counts once), and approves at the second person', async () => {
    await seed('ap-2p-1', { required: 2, distinctFrom: 'none' });
    const first = await store.decide('ap-2p-1', approveAs('alice'));
    expect(first.status).toBe('pending');
    expect(first.votes?.map((v) => v.actor.name)).toEqual(['alice']);
    const again = await store.decide('ap-2p-1', approveAs('Alice'));
    expect(again.status).toBe('pending');
    expect(again.votes).toHaveLength(1);
    expect((await store.pending()).find((a) => a.id === 'ap-2p-1')?.votes).toHaveLength(1);
    const second = await store.decide('ap-2p-1', approveAs('bob'));
    expect(second).toMatchObject({ status: 'approved', approved: [1], decidedBy: 'alice, bob' });
    expect(second.votes?.map((v) => v.actor.name)).toEqual(['alice', 'bob']);
    expect(await refusal(store.decide('ap-2p-1', approveAs('carol')))).toMatchObject({ code: 'already_decided' });
  });

  it('denies at any one denial, even after an approval', async () => {
    await seed('ap-2p-2', { required: 2, distinctFrom: 'none' });
    await store.decide('ap-2p-2', approveAs('alice'));
    const denied = await store.decide('ap-2p-2', { approve: false, reason: 'not now', by: 'bob', actor: person('bob') });
    expect(denied).toMatchObject({ status: 'denied', denyReason: 'not now', decidedBy: 'bob' });
  });

  it('refuses the requester under distinctFrom: requester, and an unverified name as a vote', async () => {
    await seed('ap-2p-3', { required: 2, distinctFrom: 'requester' }, 'alice');
    const own = await refusal(store.decide('ap-2p-3', approveAs('alice')));
    expect(own).toBeInstanceOf(ApprovalError);
    expect(own).toMatchObject({ code: 'forbidden', message: expect.stringMatching(/alice started this run/) });
    const shared = await refusal(
      store.decide('ap-2p-3', { approve: true, by: 'bob', actor: { name: 'bob', verified: false, path: 'http' } }),
    );
    expect(shared).toMatchObject({ code: 'forbidden', message: expect.stringMatching(/not a verified person/) });
    expect(await refusal(store.decide('ap-2p-3', { ...approveAs('bob'), only: [0] }))).toMatchObject({ code: 'bad_request' });
    expect((await store.get('ap-2p-3'))!).toMatchObject({ status: 'pending', votes: [] });
  });

  it('writes one decision when two completing votes race', async () => {
    await seed('ap-2p-4', { required: 2, distinctFrom: 'none' });
    await store.decide('ap-2p-4', approveAs('alice'));
    const results = await Promise.allSettled([store.decide('ap-2p-4', approveAs('bob')), store.decide('ap-2p-4', approveAs('carol'))]);
    const approved = results.filter((r) => r.status === 'fulfilled').map((r) => r.value);
    // Whichever vote wrote the decision, both counted or one was refused as already decided.
    expect(approved.length).toBeGreaterThanOrEqual(1);
    const final = (await store.get('ap-2p-4'))!;
    expect(final.status).toBe('approved');
    for (const a of approved) expect(a.decidedAt).toBe(final.decidedAt);
  });
});

describe('a crash at the completing vote', () => {
  it('cannot leave the rule complete and the approval pending: the vote that completes it writes the decision in the same step', async () => {
    await seed('ap-2p-crash', { required: 2, distinctFrom: 'none' });
    await store.decide('ap-2p-crash', approveAs('alice'));
    // Bob's process talks to Redis through a proxy that drops every answer from the one that
    // carries his vote on: his vote reaches Redis, and he never hears back — as if his process
    // died right after sending it, before anything it would do next.
    const proxy = await FaultProxy.start(ctx.redisUrl, 'voter-redis');
    const redis = new Redis(proxy.url('redis'), { maxRetriesPerRequest: 1 });
    const dying = new ApprovalStore({ redis, prefix: ctx.prefix });
    try {
      const cut = proxy.when('"name":"bob-crash"', () => proxy.blackhole(), { direction: 'down' });
      const lost = dying.decide('ap-2p-crash', approveAs('bob-crash')).then(
        () => 'answered',
        () => 'no answer',
      );
      await cut;
      const after = (await store.get('ap-2p-crash'))!;
      expect(after).toMatchObject({ status: 'approved', approved: [1], decidedBy: 'alice, bob-crash' });
      expect(after.votes?.map((v) => v.actor.name)).toEqual(['alice', 'bob-crash']);
      expect((await store.pending()).map((a) => a.id)).not.toContain('ap-2p-crash');
      redis.disconnect();
      expect(await lost).toBe('no answer');
    } finally {
      redis.disconnect();
      await dying.close();
      await proxy.close();
    }
  });
});
