import { QueueEvents, type Queue } from 'bullmq';
import type { RedisClient } from './connections.js';

/**
 * Opens a `QueueEvents` on `queue` that hears every event added after this call returns.
 *
 * BullMQ's `QueueEvents` reads its stream from `$` by default, and its first `XREAD` goes out only
 * after `waitUntilReady()` has resolved and a `CLIENT SETNAME` has been answered. A job added and
 * finished in that gap (a fast worker on a loaded machine) finishes unheard, and whoever waits on
 * it waits until their timeout. Here the stream's last entry is read first, and the listener
 * starts from it: an event added at any time after that is delivered, however late the first
 * `XREAD` leaves.
 *
 * `redis` is a shared client: BullMQ makes the blocking connection the listener reads on as a
 * duplicate of it, and closes that duplicate with the listener.
 */
export async function openQueueEvents(queue: Queue, redis: RedisClient): Promise<QueueEvents> {
  const last = await redis.xrevrange(queue.toKey('events'), '+', '-', 'COUNT', 1);
  // An empty or absent stream: every event from its first on.
  const lastEventId = last[0]?.[0] ?? '0-0';
  const events = new QueueEvents(queue.name, { connection: redis, prefix: queue.opts.prefix, lastEventId });
  events.setMaxListeners(0);
  try {
    await events.waitUntilReady();
  } catch (err) {
    // The open's own error is the one to report; the close only frees what the open made.
    await events.close().catch(() => undefined);
    throw err;
  }
  return events;
}
