import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultCluster, waitUntil } from '../helpers/index.js';

// Network faults in the co-located layout (the net-* files' form for `bosun serve`, whose three
// services share one Redis link and one NATS link): a serve process cut from Redis for longer
// than its lock (3 s) while a local task of a run it holds (libs/agent run-local.ts) is in a slow
// mutating call. The other serve process takes the run over and hands the task to its queue,
// where it goes on from its checkpoint. The call in flight was applied once by the cut process's
// MCP server; its successor finds it under a lease that lapsed with the link (the cut gateway
// could renew nothing) and declares it in doubt, or finds it recorded: it is never applied twice,
// counted by an independent MCP server. Once healed, the cut process writes and sends nothing
// more for the run (its lock is gone), and every view of the run agrees.

let c: FaultCluster;

beforeAll(async () => {
  c = await FaultCluster.start('net-colo', { layout: 'colocated', specialists: 2 });
});
afterAll(async () => {
  await c?.close();
});

const bump = (id: string) => ({ tool: 'counter__bump', args: { id } });
const slowBump = (id: string, ms: number) => ({ tool: 'counter__slow_bump', args: { id, ms } });

describe("a bosun serve process's Redis link held beyond its lock", () => {
  it('during a local task’s slow mutating call: the other process takes the run over; no effect twice, every view agrees', async () => {
    const id = 'colo-tool';
    const ids = [`${id}-a`, `${id}-b`, `${id}-c`];
    const { job, runId } = await c.client.publish({
      id,
      source: 'chaos',
      reason: 'PodCrashLooping',
      summary: 'x',
      payload: { fake: { route: ['kubernetes'], calls: { kubernetes: [slowBump(ids[0]!, 2_500), bump(ids[1]!), bump(ids[2]!)] } } },
    });
    await waitUntil(() => c.effects.perId().has(ids[0]!), 30_000, 'the slow call reached the server');
    const taskId = `${runId}-d0-kubernetes`;
    // A local task: no job of its own; the process that holds its run runs it.
    const holder = await c.holderOf(taskId);
    expect(holder).toMatch(/^serve-[12]$/);
    const other = holder === 'serve-1' ? 'serve-2' : 'serve-1';
    const link = c.link(holder!).redis;
    link.hold();
    // The other process picks the stalled run up and hands the task to its queue; its specialist takes it.
    await waitUntil(async () => (await c.holderOf(taskId)) === other, 20_000, `the task moved to ${other}`, 100);
    await waitUntil(() => c.effects.perId().has(ids[2]!), 30_000, 'the successor made the last call');
    link.heal();

    const result = await c.client.result(job, 60_000);
    const events = await c.client.events.complete(runId, 20_000, { unusedAfterMs: 5_000 });
    expect(c.effects.twice()).toEqual([]);
    for (const e of ids) expect(c.effects.perId().get(e), `effects of ${e}`).toBe(1);
    // The call in flight at the cut: in doubt (its lease lapsed with the link), or answered from
    // its record if the cut process wrote it in time; the run says which.
    const slowKey = String(events.find((e) => e.type === 'tool.started' && e.data.tool === 'counter__slow_bump')!.data.key);
    if (result.status === 'completed') expect(result.inDoubt).toBeUndefined();
    else {
      expect(result.status).toBe('partial');
      expect(result.inDoubt?.calls.map((x) => x.key)).toEqual([slowKey]);
    }
    const { inDoubt } = await c.agreement(result, events);
    expect(inDoubt.every((k) => k === slowKey)).toBe(true);
    // The task went to its queue as a job marked `resumed`, and was started once.
    const delegated = events.filter((e) => e.type === 'agent.delegated');
    expect(delegated.map((e) => e.data.local)).toEqual([true]);
    expect(events.filter((e) => e.type === 'agent.started')).toHaveLength(1);
    const lines = c.get(holder!).lines;
    expect(lines.some((l) => l.includes('lost the lock of a job'))).toBe(true);
    expect(c.get(other).lines.some((l) => l.includes('a local task whose run was picked up again: handed to its queue'))).toBe(true);
    console.log(`[net-colocated] cut during a local task's call: ${result.status}, calls in doubt ${inDoubt.length}, effects once each`);
  }, 90_000);
});
