import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultCluster, OwnServer, freePort, openContext, waitUntil, type TestContext } from '../helpers/index.js';

// Network faults, 4: NATS links. The cluster runs on a NATS server of the test's own (a hub with
// JetStream), except the gateway, which is on a leaf node of it, also the test's own: stopping
// that server with SIGSTOP cuts the live gateway off from NATS mid-call (issue 19, item 17). Its
// caller re-sends the call by the queue; the lease the gateway keeps renewing on the call's record
// makes the re-sent call wait for its outcome instead of declaring it in doubt. Then a
// specialist's NATS link blackholed mid-call (found dead by NATS pings within 15 s; its events
// all arrive), and the coordinator's NATS link reset again and again during a run.

let servers: TestContext;
let hub: OwnServer;
let leaf: OwnServer;
let c: FaultCluster;

beforeAll(async () => {
  servers = await openContext('net-nats-servers');
  const leafPort = await freePort();
  hub = await new OwnServer('nats', servers.dir, { config: `leafnodes { listen: "127.0.0.1:${leafPort}" }\n` }).start();
  const leafConf = join(servers.dir, 'leaf.conf');
  writeFileSync(leafConf, `leafnodes { remotes: [ { url: "nats://127.0.0.1:${leafPort}" } ] }\n`);
  // No JetStream on the leaf: events published there are stored by the hub's stream.
  leaf = await new OwnServer('nats', servers.dir, { args: (port) => ['-a', '127.0.0.1', '-p', String(port), '-c', leafConf] }).start();
  c = await FaultCluster.start('net-nats', {
    natsUrl: (name) => (name === 'gateway' ? leaf.url : hub.url),
    clientNatsUrl: hub.url,
  });
});
afterAll(async () => {
  leaf?.signal('SIGCONT');
  await c?.close();
  await leaf?.stop();
  await hub?.stop();
  await servers?.close();
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

async function endsClean(job: Parameters<FaultCluster['client']['result']>[0], runId: string, ids: string[], eventsMs = 20_000) {
  const result = await c.client.result(job, 60_000);
  const endedAt = Date.now();
  const events = await c.client.events.complete(runId, eventsMs);
  expect(result.status).toBe('completed');
  expect(result.inDoubt).toBeUndefined();
  for (const id of ids) expect(c.effects.perId().get(id), `effects of ${id}`).toBe(1);
  expect(await c.agreement(result, events)).toEqual({ inDoubt: [], seenDone: [] });
  return { result, events, endedAt };
}

describe('NATS links cut mid-call', () => {
  it("the gateway's own NATS server stopped (SIGSTOP) while it runs a call: the re-sent call waits on its lease; nothing in doubt", async () => {
    const id = 'nats-sigstop';
    const ids = [`${id}-a`, `${id}-b`];
    const { job, runId } = await c.client.publish(
      incident(id, [
        { tool: 'counter__slow_bump', args: { id: ids[0]!, ms: 9_000 } },
        { tool: 'counter__bump', args: { id: ids[1]! } },
      ]),
    );
    await waitUntil(() => c.effects.perId().has(ids[0]!), 30_000, 'the slow call reached the server');
    leaf.signal('SIGSTOP');
    const stopped = Date.now();
    try {
      // The first call ends (9 s) and is answered from its record to the call re-sent by the queue.
      await waitUntil(() => c.effects.perId().has(ids[1]!), 40_000, 'the task went on to its second call');
    } finally {
      leaf.signal('SIGCONT');
    }
    const { endedAt } = await endsClean(job, runId, ids, 40_000);
    console.log(`[net-nats] gateway's NATS server SIGSTOPped: run completed ${endedAt - stopped} ms after the stop, nothing in doubt`);
  }, 90_000);

  it("a specialist's NATS link blackholed mid-call: the call is answered by the queue, the link found dead within 15 s, and every event arrives", async () => {
    const id = 'nats-black';
    const ids = [`${id}-a`, `${id}-b`];
    const specialist = c.get('specialist-1');
    const reconnects = () => specialist.lines.filter((l) => l.includes('NATS reconnected')).length;
    const before = reconnects();
    const { job, runId } = await c.client.publish(
      incident(id, [
        { tool: 'counter__slow_bump', args: { id: ids[0]!, ms: 3_000 } },
        { tool: 'counter__bump', args: { id: ids[1]! } },
      ]),
    );
    await waitUntil(() => c.effects.perId().has(ids[0]!), 30_000, 'the slow call reached the server');
    const nats = c.link('specialist-1').nats;
    nats.blackhole();
    const cut = Date.now();
    await new Promise((r) => setTimeout(r, 2_000));
    // New connections work again: the open one stays dead until the client notices.
    nats.heal();
    await waitUntil(() => reconnects() > before, 20_000, 'the specialist reconnected to NATS', 100);
    const foundMs = Date.now() - cut;
    expect(foundMs).toBeLessThan(17_000);
    await endsClean(job, runId, ids, 45_000);
    console.log(`[net-nats] specialist NATS link blackholed: found dead and reconnected ${foundMs} ms after the cut`);
  }, 90_000);

  it("the coordinator's NATS link reset every second during a run: the run completes and its events have no gap", async () => {
    const id = 'nats-reset';
    const ids = [`${id}-a`, `${id}-b`];
    const { job, runId } = await c.client.publish(
      incident(id, [
        { tool: 'counter__slow_bump', args: { id: ids[0]!, ms: 4_000 } },
        { tool: 'counter__bump', args: { id: ids[1]! } },
      ]),
    );
    const nats = c.link('coordinator').nats;
    let resets = 0;
    const timer = setInterval(() => {
      nats.reset();
      resets++;
    }, 1_000);
    try {
      await c.client.result(job, 60_000);
    } finally {
      clearInterval(timer);
    }
    await endsClean(job, runId, ids, 30_000);
    expect(resets).toBeGreaterThan(1);
    console.log(`[net-nats] coordinator NATS link reset ${resets} times: completed, events without a gap`);
  }, 90_000);
});
