import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Job, Queue } from 'bullmq';
import { jetstreamManager } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import { runsStreamName, specialistQueue, taskIdFor } from '@bosun/contract';
import { startClusterTest, type ClusterTest } from '../helpers/index.js';

// `retention:` as the services apply it (docs/configuration.md#retention): one standard run on a
// cluster whose config shortens every kind, then the expiry of each key the run left, the task
// job's removal age and the runs stream's limits. The sweep of finished runs itself is
// services/coordinator/src/sweep.test.ts.

const H = 3600;
let t: ClusterTest;

beforeAll(async () => {
  t = await startClusterTest('retention', (config, ctx) => {
    ctx.env.LOG_LEVEL = 'info';
    config.retention = {
      checkpoints: '2h',
      taskResults: '3h',
      toolRecords: '4h',
      runResults: '5h',
      events: { maxAge: '6h', maxBytes: '64MiB', maxMessages: 5000 },
      audit: { maxEntries: 2000 },
    };
    // The run's usage ledger is written only with a run budget.
    config.budgets = { run: { toolCalls: 50 } };
  });
});
afterAll(async () => {
  await t?.close();
});

/** The key's time to live in seconds (-1: none, -2: no key). */
const ttl = (key: string) => t.ctx.redis.ttl(`${t.ctx.prefix}:${key}`);

describe('retention', () => {
  it('gives every kind of data a run leaves the lifetime its section sets', async () => {
    const { client } = t;
    const { job, runId } = await client.publish({
      id: 'ret-1',
      source: 'test',
      reason: 'PodCrashLooping',
      summary: 'checkout restarts',
      labels: { service: 'checkout' },
      payload: { fake: { calls: { kubernetes: [{ tool: 'demo__get_pods', args: { service: 'checkout' } }] } } },
    });
    const result = await client.result(job);
    expect(result.status).toBe('completed');
    const taskId = taskIdFor(runId, 0, 'kubernetes');
    const within = (seconds: number, of: number) => {
      expect(seconds).toBeGreaterThan(of - 120);
      expect(seconds).toBeLessThanOrEqual(of);
    };
    // Checkpoints, the run's ledger and event counter (a day past the checkpoints).
    within(await ttl(`ckpt:run:${runId}`), 2 * H);
    within(await ttl(`ckpt:task:${taskId}`), 2 * H);
    within(await ttl(`usage:${runId}`), 2 * H);
    within(await ttl(`run:${runId}:seq`), 2 * H + 24 * H);
    // The record of the call.
    within(await ttl(`toolcall:${taskId}-s1-c0`), 4 * H);
    // The task job is removed 3 h after it finished.
    const tasks = new Queue(specialistQueue('kubernetes'), { connection: t.ctx.redis, prefix: t.ctx.prefix });
    try {
      const task = await Job.fromId(tasks, taskId);
      expect(task?.opts.removeOnComplete).toEqual({ age: 3 * H });
    } finally {
      await tasks.close();
    }
    // The incident job stays until the coordinator's sweep finds it older than 5 h.
    expect(await job.getState()).toBe('completed');
    // The runs stream, as the services configured it.
    const jsm = await jetstreamManager(t.ctx.nats);
    const info = await jsm.streams.info(runsStreamName(t.ctx.prefix));
    expect([info.config.max_age, info.config.max_bytes, info.config.max_msgs]).toEqual([nanos(6 * H * 1000), 64 * 1024 ** 2, 5000]);
  });
});
