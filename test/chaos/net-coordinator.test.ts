import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultCluster, waitUntil } from '../helpers/index.js';

// Network faults, 1: the coordinator's Redis link held for longer than its lock (3 s) — while it
// routes (inside its classifier call), and at each of its run checkpoint writes (after routing,
// after dispatching, the result). The coordinator that lost the job gives it up to its next
// owner, which resumes from the checkpoint and collects the children; it never answers for the
// run (no run.failed, no failure dead letter). Effects are counted by an independent MCP server.

let c: FaultCluster;
const HOLD_MS = 4_500;

beforeAll(async () => {
  c = await FaultCluster.start('net-coord');
});
afterAll(async () => {
  await c?.close();
});

/** An incident for `kubernetes`: a quick and a slow mutating call of its own ids. */
function incident(id: string, slowMs = 0) {
  return {
    id,
    source: 'chaos',
    reason: 'PodCrashLooping',
    summary: 'x',
    payload: {
      fake: {
        route: ['kubernetes'],
        calls: {
          kubernetes: [
            { tool: 'counter__bump', args: { id: `${id}-a` } },
            { tool: 'counter__slow_bump', args: { id: `${id}-b`, ms: 1_000 } },
          ],
        },
        ...(slowMs ? { slowMs: { coordinator: slowMs } } : {}),
      },
    },
  };
}

/** Publishes `id`, holds the coordinator's Redis link when `start` says, heals it after HOLD_MS, and checks the run ended honestly. */
async function runThroughHold(id: string, start: (runId: string) => Promise<void>, slowMs = 0) {
  const { client } = c;
  const redis = c.link('coordinator').redis;
  const { job, runId } = await c.client.publish(incident(id, slowMs));
  await start(runId);
  redis.hold();
  await new Promise((r) => setTimeout(r, HOLD_MS));
  redis.heal();
  const healed = Date.now();
  const result = await client.result(job, 60_000);
  const recoveredMs = Date.now() - healed;
  const events = await client.events.complete(runId, 20_000);
  // An honest answer: the specialist's work, not a failure.
  expect(result.status).toBe('completed');
  expect(result.specialists.map((s) => s.status)).toEqual(['completed']);
  expect(events.filter((e) => e.type === 'run.failed')).toEqual([]);
  expect(events.filter((e) => e.type === 'run.completed')).toHaveLength(1);
  expect((await client.deadLetters(runId)).filter((d) => d.kind === 'failure')).toEqual([]);
  // No effect twice, none missing.
  expect(c.effects.perId().get(`${id}-a`)).toBe(1);
  expect(c.effects.perId().get(`${id}-b`)).toBe(1);
  expect(await c.agreement(result, events)).toEqual({ inDoubt: [], seenDone: [] });
  const delegated = events.filter((e) => e.type === 'agent.delegated').length;
  console.log(
    `[net-coordinator] ${id}: completed ${recoveredMs} ms after healing; run.started ×${events.filter((e) => e.type === 'run.started').length}, agent.delegated ×${delegated}`,
  );
  return { result, events };
}

describe("the coordinator's Redis link held beyond its lock", () => {
  it('while it routes: the run is given up to its next owner and completes; no run.failed, no failure dead letter', async () => {
    await runThroughHold(
      'coord-routing',
      (runId) => c.client.events.waitFor((e) => e.runId === runId && e.type === 'run.started', 20_000).then(() => undefined),
      2_500,
    );
  }, 60_000);

  it.each([
    ['after routing', '"phase":"routing"'],
    ['after dispatching', '"phase":"waiting"'],
    ['at the result', '"phase":"done"'],
  ])(
    'at its run checkpoint write %s: the write is refused, the next owner resumes, the run completes once',
    async (_what, pattern) => {
      const id = `coord-${pattern.replace(/\W/g, '')}`;
      await runThroughHold(id, async () => {
        // The fault starts at the write itself: held before it reaches Redis.
        const redis = c.link('coordinator').redis;
        const held = redis.when(pattern, () => redis.hold());
        await waitUntil(
          async () => Promise.race([held.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 50))]),
          30_000,
          `the write with ${pattern}`,
        );
      });
    },
    60_000,
  );
});
