import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeadLetter } from '@bosun/contract';
import { openClient, runCli, startClusterTest, waitUntil, type ClusterTest, type TestContext } from '../helpers/index.js';

// `bosun dlq retry` of one specialist's part of a run that is still open: the coordinator
// delegates it again inside the run, and the retry supersedes the INCOMPLETE part.

let t: ClusterTest;
let ctx: TestContext;
let env: Record<string, string>;

const bosun = (args: string[]) => runCli(env, args);

beforeAll(async () => {
  t = await startClusterTest('dlq-retry', (config) => {
    // kubernetes' tools take 4 s each, so the run stays open while database's part is retried.
    config.mcpServers.demo.env = { DEMO_MCP_SLOW_MS: '4000' };
  });
  ({ ctx, env } = t);
});

afterAll(async () => {
  await t?.close();
});

describe('bosun dlq retry inside an open run', () => {
  it('delegates the failed part again within the run and links the entry to the new task', async () => {
    const client = await openClient(ctx);
    const { events, deadLetterQueue: dlq } = client;
    try {
      const incident = {
        id: 'retry-open',
        source: 'test',
        reason: 'ErrorRateHigh',
        summary: 'x',
        payload: {
          fake: {
            stall: ['database'],
            calls: {
              kubernetes: [
                { tool: 'demo__get_pods', args: { service: 'checkout' } },
                { tool: 'demo__get_deployments', args: { service: 'checkout' } },
              ],
            },
          },
        },
      };
      const { job, runId } = await client.publish(incident);
      await events.waitFor((e) => e.runId === runId && e.type === 'agent.stalled' && e.agent === 'database', 20_000);
      const entry = (await dlq.getWaiting(0, 100)).find((j) => (j.data as DeadLetter).runId === runId)!;
      expect(entry).toBeDefined();
      // A part is retried inside a run the coordinator has parked (kubernetes is still at work).
      await waitUntil(async () => (await job.getState()) === 'waiting-children', 10_000, 'the run parked in waiting-children');

      const r = await bosun(['dlq', 'retry', String(entry.id)]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout.trim()).toBe(runId);
      expect(r.stderr).toMatch(new RegExp(`retrying ${runId}-d2-database inside the open run ${runId}`));
      const redelegated = await events.waitFor(
        (e) => e.runId === runId && e.type === 'agent.delegated' && e.data.retryOf !== undefined,
        10_000,
      );
      expect(redelegated.data).toMatchObject({ taskId: `${runId}-d2-database`, retryOf: `${runId}-d1-database` });
      const linked = (await dlq.getJob(String(entry.id)))!.data as DeadLetter;
      expect(linked.retriedAs).toMatchObject({ runId, taskId: `${runId}-d2-database` });

      const result = await client.result(job);
      // The retry supersedes the first attempt: one entry per specialist. (The fake model is told
      // to stall database on this incident, so the retry stalls too — honestly.)
      expect(result.specialists.map((s) => s.name).sort()).toEqual(['database', 'kubernetes']);
      expect(result.stalled).toBe(1);
      const stalls = (await client.deadLetters(runId)).filter((d) => d.kind === 'stall');
      expect(stalls).toHaveLength(2);
    } finally {
      await client.close();
    }
  }, 90_000);
});
