import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isStalled } from '@bosun/contract';
import { startClusterTest, type Client, type ClusterTest } from '../helpers/index.js';

// The coordinator's backstops, with no specialist process running at all: nobody will ever
// report, and runs still end — at the task's deadline, or at the run's.

let t: ClusterTest;
let client: Client;

beforeAll(async () => {
  t = await startClusterTest(
    'chaos-backstop',
    (config) => {
      config.coordinator.runDeadlineMs = 12_000;
      config.specialists.database.deadlineMs = 2_000;
      config.specialists.kubernetes.deadlineMs = 120_000;
    },
    // No specialist process at all: nothing ever answers.
    { specialists: 0 },
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

  it("ends the run at the run's deadline with what it has", async () => {
    const t0 = Date.now();
    const { job, runId } = await client.publish({
      id: 'backstop-run',
      source: 'chaos',
      reason: 'PodCrashLooping',
      summary: 'x',
      labels: { service: 'checkout' },
    });
    const result = await client.result(job, 40_000);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(11_000);
    expect(result.status).toBe('partial');
    expect(result.specialists).toEqual([expect.objectContaining({ name: 'kubernetes', status: 'stalled' })]);
    expect(result.answer).toMatch(/The run reached its deadline/);
    const stalled = await client.events.waitFor((e) => e.runId === runId && e.type === 'agent.stalled', 5_000);
    expect(stalled.data).toMatchObject({ kind: 'timeout', reason: 'the run reached its deadline' });
  });
});
