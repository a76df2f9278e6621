import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isStalled } from '@bosun/contract';
import { startClusterTest, testLayout, type Client, type ClusterTest } from '../helpers/index.js';

// The coordinator's backstop, with no specialist process running at all: nobody will ever
// report, and the run still ends, at the task's deadline, by the coordinator's timer job in
// BullMQ. Which deadline the one timer of a run is armed for — a task's, or the run's own — is
// the run loop's, tested with a simulated clock in libs/agent/src/run.test.ts ("arms one timer
// at the run's deadline when that comes before every backstop", "ends a parked run at the run's
// deadline timer"); the run's deadline case that waited 12 s here was dropped for them.

let t: ClusterTest;
let client: Client;

beforeAll(async () => {
  t = await startClusterTest(
    'chaos-backstop',
    (config) => {
      config.specialists.database.deadlineMs = 2_000;
    },
    // No specialist process at all: nothing ever answers. Co-located, one bosun serve hosts the
    // coordinator and the gateway and no database specialist.
    testLayout() === 'split' ? { specialists: 0 } : { specialistArgs: [['--only', 'kubernetes']] },
  );
  client = t.client;
});

afterAll(async () => {
  await t?.close();
});

describe('no specialist ever answers', () => {
  it("ends the delegation at the task's deadline (coordinator timer) and the run partial", async () => {
    const t0 = Date.now();
    const { job, runId } = await client.publish({
      id: 'backstop-task',
      source: 'chaos',
      reason: 'HighLatency',
      summary: 'x',
      labels: { service: 'payments' },
    });
    const result = await client.result(job, 40_000);
    const elapsed = Date.now() - t0;
    expect(result.status).toBe('partial');
    expect(result.specialists).toEqual([expect.objectContaining({ name: 'database', status: 'stalled', attempts: 0 })]);
    expect(isStalled(result.specialists[0]!.output)).toBe(true);
    // Deadline 2 s + the coordinator's 5 s grace for the specialist to report it itself.
    expect(elapsed).toBeGreaterThanOrEqual(7_000);
    expect(elapsed).toBeLessThan(20_000);
    const entries = await client.deadLetters(runId);
    expect(entries).toEqual([expect.objectContaining({ kind: 'timeout', agent: 'database' })]);
  });
});
