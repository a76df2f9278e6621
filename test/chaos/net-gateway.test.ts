import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultCluster, runCli, waitUntil, type ServiceProcess } from '../helpers/index.js';

// Network faults, 3: the gateway's Redis link — reset at its claim (the claim made, its answer
// lost), held at the write of a call's outcome, held while it runs a call for longer than the call's lease with a second gateway to find
// it (declared in doubt, then seen done: the record, index, dead letter, `bosun runs show` and
// `bosun ack` agree), and blackholed mid-call (found dead within 15 s and handled like a reset).
// Effects are counted by an independent MCP server.

let c: FaultCluster;

beforeAll(async () => {
  c = await FaultCluster.start('net-gw');
});
afterAll(async () => {
  await c?.close();
});

function incident(id: string, calls: { tool: string; args: Record<string, unknown> }[]) {
  return {
    id,
    source: 'chaos',
    reason: 'PodCrashLooping',
    summary: 'x',
    payload: { fake: { route: ['kubernetes'], calls: { kubernetes: calls } } },
  };
}

describe("the gateway's Redis link", () => {
  it('reset as the answer to its claim comes back: the claim re-sent is its own, the call runs once and is not in doubt', async () => {
    const id = 'gw-claim';
    const redis = c.link('gateway').redis;
    // The claim went through; its answer is cut with the connection (ioredis sends the claim again).
    const reset = redis.when('claimed', () => redis.reset(), { direction: 'down' });
    const { job, runId } = await c.client.publish(incident(id, [{ tool: 'counter__bump', args: { id: `${id}-a` } }]));
    await reset;
    const result = await c.client.result(job, 60_000);
    // ioredis sends the commands it had no answer to again: a numbering among them leaves a number unused.
    const events = await c.client.events.complete(runId, 20_000, { unusedAfterMs: 5_000 });
    expect(result.status).toBe('completed');
    expect(result.inDoubt).toBeUndefined();
    expect(c.effects.perId().get(`${id}-a`)).toBe(1);
    expect(await c.agreement(result, events)).toEqual({ inDoubt: [], seenDone: [] });
  }, 60_000);

  it('held at the write of its outcome, beyond its lease: the caller keeps waiting on its heartbeats, and the outcome lands once', async () => {
    const id = 'gw-record';
    const redis = c.link('gateway').redis;
    // The record write carries the tool's answer, which names the call.
    const held = redis.when(`${id}-a: 1 effect`, () => redis.hold());
    const { job, runId } = await c.client.publish(incident(id, [{ tool: 'counter__bump', args: { id: `${id}-a` } }]));
    await held;
    await new Promise((r) => setTimeout(r, 7_000));
    redis.heal();
    const healed = Date.now();
    const result = await c.client.result(job, 60_000);
    const tookMs = Date.now() - healed;
    const events = await c.client.events.complete(runId, 20_000);
    expect(result.status).toBe('completed');
    expect(c.effects.perId().get(`${id}-a`)).toBe(1);
    expect(await c.agreement(result, events)).toEqual({ inDoubt: [], seenDone: [] });
    console.log(`[net-gateway] held at its record write for 7 s: completed ${tookMs} ms after healing`);
  }, 60_000);

  it('held beyond the lease while its call runs, a second gateway declares it in doubt; its outcome, seen later, is recorded beside it everywhere', async () => {
    const id = 'gw-seen';
    const key = (runId: string) => `${runId}-d0-kubernetes-s1-c0`;
    const { job, runId } = await c.client.publish(incident(id, [{ tool: 'counter__slow_bump', args: { id: `${id}-a`, ms: 12_000 } }]));
    await waitUntil(() => c.effects.perId().has(`${id}-a`), 30_000, 'the slow call reached the server');
    // The gateway running it is cut off from both servers (its caller hears nothing; its lease is not renewed).
    const links = c.link('gateway');
    links.redis.hold();
    links.nats.hold();
    let second: ServiceProcess | undefined;
    try {
      second = await c.startService('gateway', 'gateway-2');
      const result = await c.client.result(job, 60_000);
      // The caller re-sent it by the queue; the second gateway found it in flight, its lease run out.
      expect(result.status).toBe('partial');
      expect(result.inDoubt?.calls.map((x) => x.key)).toEqual([key(runId)]);
      links.redis.heal();
      links.nats.heal();
      const healed = Date.now();
      // The first gateway's call ends (12 s) and its outcome is recorded beside the declaration.
      await waitUntil(
        async () => (await c.ctx.redis.hget(`${c.ctx.prefix}:toolcall:${key(runId)}`, 'seenDoneAt')) !== null,
        30_000,
        'the outcome recorded after the in-doubt declaration',
        200,
      );
      const seenMs = Date.now() - healed;
      const events = await c.client.events.complete(runId, 20_000);
      expect(c.effects.perId().get(`${id}-a`)).toBe(1);
      expect(await c.agreement(result, events)).toEqual({ inDoubt: [key(runId)], seenDone: [key(runId)] });
      const record = await c.ctx.redis.hgetall(`${c.ctx.prefix}:toolcall:${key(runId)}`);
      expect(record).toMatchObject({ state: 'done', inDoubtAt: expect.any(String), seenDoneAt: expect.any(String) });
      expect(JSON.parse(record.result!)).toMatchObject({ status: 'ok', isError: false });
      const show = await runCli(c.env, ['runs', 'show', runId]);
      expect(show.stdout).toContain('(in doubt, later seen done)');
      expect(show.stdout).toContain('later seen done: ok at');
      // The operator acknowledges it; a retry is refused (it would run it twice).
      expect((await runCli(c.env, ['ack', key(runId), '--retry'])).code).toBe(1);
      const ack = await runCli(c.env, ['ack', key(runId), '--done', '--by', 'chaos']);
      expect(ack.code, ack.stderr).toBe(0);
      expect(c.effects.perId().get(`${id}-a`)).toBe(1);
      console.log(`[net-gateway] in doubt, later seen done: recorded ${seenMs} ms after healing`);
    } finally {
      links.redis.heal();
      links.nats.heal();
      await second?.stop();
    }
  }, 90_000);

  it('blackholed during a call: found dead and replaced within 15 s, and the call is recorded and answered once', async () => {
    const id = 'gw-black';
    const redis = c.link('gateway').redis;
    const { job, runId } = await c.client.publish(incident(id, [{ tool: 'counter__slow_bump', args: { id: `${id}-a`, ms: 1_000 } }]));
    await waitUntil(() => c.effects.perId().has(`${id}-a`), 30_000, 'the call reached the server');
    redis.blackhole();
    const cut = Date.now();
    await new Promise((r) => setTimeout(r, 2_000));
    // New connections work again; the gateway's open ones stay dead until it notices.
    redis.heal();
    const result = await c.client.result(job, 60_000);
    const tookMs = Date.now() - cut;
    // As at the reset: a numbering sent again after the reconnect leaves a number unused.
    const events = await c.client.events.complete(runId, 20_000, { unusedAfterMs: 5_000 });
    expect(result.status).toBe('completed');
    expect(c.effects.perId().get(`${id}-a`)).toBe(1);
    expect(await c.agreement(result, events)).toEqual({ inDoubt: [], seenDone: [] });
    expect(tookMs).toBeLessThan(20_000);
    console.log(`[net-gateway] blackholed Redis link: run completed ${tookMs} ms after the cut`);
  }, 60_000);
});
