import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue, QueueEvents, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { openQueueEvents } from '@bosun/transport';
import { openContext, type TestContext } from '../helpers/index.js';
import { waitUntil } from '../helpers/wait.js';

// A QueueEvents listener that starts late (its first XREAD after a job has already finished)
// still hears that job, when opened with openQueueEvents; BullMQ's own default reads from `$`
// and misses it. This was a CI flake: a tool call's completion lost, the call timing out at 10 s.

let ctx: TestContext;
const opened: Redis[] = [];
beforeAll(async () => {
  ctx = await openContext('qevents');
});
afterAll(async () => {
  await Promise.all(opened.map((r) => r.quit()));
  await ctx.close();
});

/**
 * A client to hand to a listener. BullMQ reads events on a duplicate of it that it makes itself;
 * that duplicate's `CLIENT SETNAME` (which QueueEvents sends before its first XREAD) is answered
 * only once `release` is called, so the listener's first read is held back as long as the test
 * likes. `id`: the duplicate's client id on the server.
 */
function heldClient(): { redis: Redis; release: () => void; id: Promise<number> } {
  const redis = ctx.redis.duplicate();
  opened.push(redis);
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let gotId!: (id: number) => void;
  const id = new Promise<number>((resolve) => (gotId = resolve));
  const duplicate = redis.duplicate.bind(redis);
  redis.duplicate = (...args: Parameters<Redis['duplicate']>) => {
    const copy = duplicate(...args);
    const client = copy.client.bind(copy) as (...a: string[]) => Promise<unknown>;
    // Asked before anything of BullMQ's goes out on it, so answered before the held name.
    void (client('ID') as Promise<number>).then(gotId);
    (copy as unknown as { client: (...a: string[]) => Promise<unknown> }).client = async (...a) => {
      if (a[0]?.toUpperCase() === 'SETNAME') await released;
      return client(...a);
    };
    return copy;
  };
  return { redis, release, id };
}

/** Whether the client with this id is blocked in an XREAD now (from the server's client list). */
async function blockedInXread(id: number): Promise<boolean> {
  const line = (await ctx.redis.client('LIST', 'ID', String(id))) as string;
  return / cmd=xread /.test(line) && / flags=\S*b/.test(line);
}

/** Adds a job and has a worker finish it; resolves once the job is completed in Redis. */
async function finishOne(queue: Queue, id: string): Promise<void> {
  const worker = new Worker(queue.name, () => Promise.resolve({ done: id }), { connection: ctx.redis, prefix: ctx.prefix });
  try {
    const job = await queue.add('j', {}, { jobId: id });
    await waitUntil(() => job.isCompleted(), 5_000, `job ${id} completed`);
  } finally {
    await worker.close();
  }
}

/** The ids of the `completed` events the listener emits, in the stream's order. */
function heardBy(events: QueueEvents): string[] {
  const ids: string[] = [];
  events.on('completed', ({ jobId }) => ids.push(jobId));
  return ids;
}

describe('openQueueEvents', () => {
  it('hears a job that finished before its first read, where the default start at `$` does not', async () => {
    const queue = new Queue('qe-late', { connection: ctx.redis, prefix: ctx.prefix });
    const ours = heldClient();
    const plain = heldClient();
    // Both listeners are connected and "ready" before the job is added...
    const events = await openQueueEvents(queue, ours.redis);
    const defaults = new QueueEvents(queue.name, { connection: plain.redis, prefix: ctx.prefix });
    await defaults.waitUntilReady();
    const ourIds = heardBy(events);
    const defaultIds = heardBy(defaults);
    try {
      // ...but neither has read yet when it finishes.
      await finishOne(queue, 'late-1');
      ours.release();
      plain.release();
      // A second job, once both are reading: each hears it, and anything it heard before it.
      const [ourId, plainId] = await Promise.all([ours.id, plain.id]);
      await waitUntil(async () => (await blockedInXread(ourId)) && (await blockedInXread(plainId)), 5_000, 'both listeners reading');
      await finishOne(queue, 'late-2');
      await waitUntil(
        () => ourIds.includes('late-2') && defaultIds.includes('late-2'),
        5_000,
        () => `late-2 heard: ${ourIds.join()} / ${defaultIds.join()}`,
      );
      expect(ourIds).toEqual(['late-1', 'late-2']);
      expect(defaultIds).toEqual(['late-2']);
    } finally {
      await events.close();
      await defaults.close();
      await queue.obliterate({ force: true });
      await queue.close();
    }
  });

  it('does not replay what was in the stream before it opened', async () => {
    const queue = new Queue('qe-old', { connection: ctx.redis, prefix: ctx.prefix });
    await finishOne(queue, 'old-1');
    expect(await heardAfter(queue, openQueueEvents(queue, ctx.redis), 'new-1')).toEqual(['new-1']);
  });

  it('starts from the first event on a queue whose stream does not exist yet', async () => {
    const queue = new Queue('qe-new', { connection: ctx.redis, prefix: ctx.prefix });
    const held = heldClient();
    expect(await heardAfter(queue, openQueueEvents(queue, held.redis), 'first-1', held.release)).toEqual(['first-1']);
  });
});

/**
 * Finishes job `id` on `queue`, then (after `release`, if given) waits until the listener has heard
 * it and returns every id it heard; closes the listener and the queue.
 */
async function heardAfter(queue: Queue, opening: Promise<QueueEvents>, id: string, release?: () => void): Promise<string[]> {
  const events = await opening;
  const ids = heardBy(events);
  try {
    await finishOne(queue, id);
    release?.();
    await waitUntil(
      () => ids.includes(id),
      5_000,
      () => `${id} heard: ${ids.join()}`,
    );
    return ids;
  } finally {
    await events.close();
    await queue.obliterate({ force: true });
    await queue.close();
  }
}
