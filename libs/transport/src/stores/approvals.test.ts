import { describe, expect, it } from 'vitest';
import { createLogger } from '@bosun/config';

import { ApprovalError, ApprovalStore, type ApprovalRequest } from './approvals.js';
import type { RedisClient } from '../base/connections.js';

/** The few Redis commands the store uses, in memory (SET with NX, sorted-set adds and removals, a run's set). */
class FakeRedis {
  readonly strings = new Map<string, string>();
  readonly sorted = new Map<string, Map<string, number>>();

  get(key: string): Promise<string | null> {
    return Promise.resolve(this.strings.get(key) ?? null);
  }

  set(key: string, value: string, ...options: (string | number)[]): Promise<'OK' | null> {
    if (options.includes('NX') && this.strings.has(key)) return Promise.resolve(null);
    this.strings.set(key, value);
    return Promise.resolve('OK');
  }

  zadd(key: string, score: number, member: string): Promise<number> {
    const set = this.sorted.get(key) ?? new Map<string, number>();
    this.sorted.set(key, set.set(member, score));
    return Promise.resolve(1);
  }

  zrem(key: string, member: string): Promise<number> {
    return Promise.resolve(this.sorted.get(key)?.delete(member) ? 1 : 0);
  }

  readonly sets = new Map<string, Set<string>>();

  sadd(key: string, member: string): Promise<number> {
    const set = this.sets.get(key) ?? new Set<string>();
    const added = set.has(member) ? 0 : 1;
    this.sets.set(key, set.add(member));
    return Promise.resolve(added);
  }

  smembers(key: string): Promise<string[]> {
    return Promise.resolve([...(this.sets.get(key) ?? [])]);
  }

  expire(): Promise<number> {
    return Promise.resolve(1);
  }

  zrange(key: string): Promise<string[]> {
    return Promise.resolve([...(this.sorted.get(key) ?? new Map<string, number>()).entries()].sort((a, b) => a[1] - b[1]).map(([m]) => m));
  }
}

function request(id: string): ApprovalRequest {
  return {
    id,
    runId: 'r1',
    incidentId: 'inc-1',
    agent: 'k8s',
    taskId: 'r1-d0-k8s',
    calls: [
      { index: 0, tool: 'demo__get_pods', args: {}, needsApproval: false, key: 'r1-d0-k8s-s1-c0' },
      { index: 1, tool: 'demo__restart', args: { name: 'p', token: 's3cret-value' }, needsApproval: true, key: 'r1-d0-k8s-s1-c1' },
    ],
    reason: 'restart it',
    createdAt: new Date().toISOString(),
    timeoutAt: new Date(Date.now() + 60_000).toISOString(),
  };
}

function setup() {
  const redis = new FakeRedis();
  const lines: string[] = [];
  const log = createLogger({ service: 't', level: 'info', destination: { write: (l: string) => void lines.push(l) } });
  const store = new ApprovalStore({ redis: redis as unknown as RedisClient, prefix: 'p', log });
  return { redis, store, lines };
}

describe('ApprovalStore', () => {
  it('stores the request with secrets redacted and the decision apart, written once', async () => {
    const { redis, store } = setup();
    const a = await store.request(request('ap-1'));
    expect(a.calls[1]!.args).toEqual({ name: 'p', token: '[redacted]' });
    expect(await store.pending()).toHaveLength(1);
    const decided = await store.decide('ap-1', { approve: true, by: 'alice' });
    expect(decided).toMatchObject({ status: 'approved', approved: [1], decidedBy: 'alice' });
    expect(JSON.parse(redis.strings.get('p:approval:ap-1')!)).toMatchObject({ status: 'pending' });
    expect(JSON.parse(redis.strings.get('p:approval:ap-1:decision')!)).toMatchObject({ status: 'approved', approved: [1] });
    expect(await store.pending()).toEqual([]);
    const again = await store.decide('ap-1', { approve: false, reason: 'late', by: 'bob' }).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(ApprovalError);
    expect(again).toMatchObject({ code: 'already_decided', message: 'approval ap-1 was already decided: approved by alice' });
  });

  it('keeps the actor of a decision in the stored record and in the approval as read', async () => {
    const { redis, store } = setup();
    await store.request(request('ap-actor'));
    const actor = { name: 'alice', verified: true, path: 'http', address: '127.0.0.1' } as const;
    const decided = await store.decide('ap-actor', { approve: true, by: 'ignored', actor });
    expect(decided).toMatchObject({ status: 'approved', decidedBy: 'alice', actor: { ...actor, note: 'ignored' } });
    expect(JSON.parse(redis.strings.get('p:approval:ap-actor:decision')!)).toMatchObject({ decidedBy: 'alice', actor: { name: 'alice' } });
  });

  it('refuses a decision of the wrong form with the contract check, and "only" naming calls that need no approval', async () => {
    const { store } = setup();
    await store.request(request('ap-2'));
    const cases: [Parameters<ApprovalStore['decide']>[1], RegExp][] = [
      [{ approve: true, by: ' ' }, /^approval ap-2: by: must be a non-empty string$/],
      [{ approve: false, reason: ' ', by: 'bob' }, /^approval ap-2: reason: required to deny/],
      [{ approve: true, only: [], by: 'bob' }, /^approval ap-2: only: must be a non-empty array/],
      [{ approve: true, only: [0], by: 'bob' }, /do not need approval: 0 \(calls needing approval: 1\)$/],
    ];
    for (const [decision, message] of cases) {
      const err = await store.decide('ap-2', decision).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'bad_request' });
      expect((err as Error).message).toMatch(message);
    }
    expect((await store.get('ap-2'))?.status).toBe('pending');
    // A decision Bosun makes has no length limit (a cancelled run's reason is quoted in it).
    const long = `the run was cancelled: ${'x'.repeat(10_000)}`;
    expect(await store.decide('ap-2', { approve: false, reason: long, by: 'ops' })).toMatchObject({ status: 'denied', denyReason: long });
  });

  it('logs a failed wake-up (as err), and the decision stands: the parked task wakes at its timeout', async () => {
    const { store, lines } = setup();
    await store.request(request('ap-3'));
    await store.parkedAt('ap-3', 'specialist-k8s', 'r1-d0-k8s');
    store.wake = () => Promise.reject(new Error('Redis went away'));
    const decided = await store.decide('ap-3', { approve: false, reason: 'no', by: 'bob' });
    expect(decided).toMatchObject({ status: 'denied', denyReason: 'no', queue: 'specialist-k8s', jobId: 'r1-d0-k8s' });
    const logged = lines.map(
      (l) => JSON.parse(l) as { level: number; msg: string; err?: { message: string; stack?: string }; approvalId?: string },
    );
    const warn = logged.find((l) => l.msg.includes('could not be woken'));
    expect(warn).toMatchObject({ level: 40, approvalId: 'ap-3', err: { message: 'Redis went away' } });
    expect(warn!.err!.stack).toContain('Redis went away');
    expect(warn!.msg).toContain('wakes by itself at the approval timeout');
  });

  it('answers an unknown approval with not_found', async () => {
    const { store } = setup();
    await expect(store.decide('ap-none', { approve: true, by: 'a' })).rejects.toMatchObject({ code: 'not_found' });
    expect(new ApprovalError('not_found', 'x')).toBeInstanceOf(Error);
  });

  it('reports a stored request or decision that does not parse, naming the field', async () => {
    const { redis, store } = setup();
    await store.request(request('ap-bad'));
    const stored = JSON.parse(redis.strings.get('p:approval:ap-bad')!) as Record<string, unknown>;
    redis.strings.set('p:approval:ap-bad', JSON.stringify({ ...stored, calls: 'none' }));
    await expect(store.get('ap-bad')).rejects.toMatchObject({
      code: 'bad_stored_value',
      message: expect.stringMatching(/^approval ap-bad does not parse: calls: /),
    });
    await store.request(request('ap-bad2'));
    redis.strings.set('p:approval:ap-bad2:decision', '{"status":');
    await expect(store.get('ap-bad2')).rejects.toMatchObject({
      code: 'bad_stored_value',
      message: expect.stringMatching(/^the decision of approval ap-bad2 does not parse: \(root\): not valid JSON/),
    });
  });

  it("finds a run's approvals, decided or not, oldest first, and no other run's", async () => {
    const { store } = setup();
    const later = { ...request('ap-2'), createdAt: new Date(Date.now() + 1_000).toISOString() };
    await store.request(later);
    await store.request(request('ap-1'));
    await store.request({ ...request('ap-other'), runId: 'r2' });
    await store.decide('ap-1', { approve: true, by: 'alice' });
    expect((await store.ofRun('r1')).map((a) => [a.id, a.status])).toEqual([
      ['ap-1', 'approved'],
      ['ap-2', 'pending'],
    ]);
    expect((await store.ofRun('r3')).length).toBe(0);
  });
});
