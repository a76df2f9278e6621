import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue, QueueEvents, Worker } from 'bullmq';
import { INCIDENTS_QUEUE } from '@bosun/contract';
import { createLogger } from '@bosun/config';
import { openContext, type TestContext } from '../../../test/helpers/context.js';

import { RunResultSweeper } from './sweep.js';

// The sweep of finished runs (`retention.runResults`) against a real Redis: completed incident
// jobs older than the retention go, younger ones and unfinished ones stay.

let ctx: TestContext;
beforeAll(async () => {
  ctx = await openContext('sweep');
});
afterAll(async () => {
  await ctx?.close();
});

describe('RunResultSweeper', () => {
  it('removes completed incident jobs past their retention, in batches, and nothing else', async () => {
    const queue = new Queue(INCIDENTS_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
    const events = new QueueEvents(INCIDENTS_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
    const worker = new Worker(INCIDENTS_QUEUE, async (job) => ({ status: 'completed', id: job.id }), {
      connection: ctx.redis,
      prefix: ctx.prefix,
      autorun: false,
    });
    const log = createLogger({ service: 't', level: 'silent' });
    try {
      await events.waitUntilReady();
      const done = await Promise.all(
        ['old-1', 'old-2', 'old-3'].map((id) => queue.add('incident', { id }, { jobId: id, removeOnComplete: false })),
      );
      worker.run().catch(() => undefined); // Closed below; a run that ends with the close is expected.
      await Promise.all(done.map((j) => j.waitUntilFinished(events, 10_000)));
      await worker.close();
      // Not processed: waiting jobs are never swept, however old.
      await queue.add('incident', { id: 'waiting' }, { jobId: 'waiting', removeOnComplete: false });

      // Within their retention: all kept.
      const keep = new RunResultSweeper({ redis: ctx.redis, prefix: ctx.prefix, keepMs: 3_600_000, log });
      expect(await keep.sweep()).toBe(0);
      await keep.close();
      expect(await queue.getJobCounts('completed', 'waiting')).toEqual({ completed: 3, waiting: 1 });

      // Past it (a retention of 0 here; the config's least is 1h), two at a time.
      await new Promise((r) => setTimeout(r, 20));
      const sweep = new RunResultSweeper({ redis: ctx.redis, prefix: ctx.prefix, keepMs: 1, log, batch: 2 });
      expect(await sweep.sweep()).toBe(3);
      await sweep.close();
      expect(await queue.getJobCounts('completed', 'waiting')).toEqual({ completed: 0, waiting: 1 });
      expect(await queue.getJob('old-1')).toBeUndefined();
      expect(await ctx.redis.exists(`${ctx.prefix}:${INCIDENTS_QUEUE}:old-1`)).toBe(0);
    } finally {
      await worker.close();
      await events.close();
      await queue.close();
    }
  });
});
