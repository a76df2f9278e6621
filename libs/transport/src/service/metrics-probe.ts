import { Queue } from 'bullmq';
import { COORDINATOR_TIMERS_QUEUE, DEAD_LETTER_QUEUE, INCIDENTS_QUEUE, TOOLS_QUEUE, specialistQueue } from '@bosun/contract';
import type { RedisClient } from '../base/connections.js';
import { keys } from '../keys.js';
import type { ClusterProbe, ClusterSnapshot } from '../base/metrics.js';

/** How long an index entry of an in-doubt call is counted: the life of its record (7 days). */
const IN_DOUBT_HORIZON_MS = 7 * 24 * 3600 * 1000;

/** A {@link ClusterProbe} over Redis, with the queues it opened. */
export interface RedisClusterProbe {
  probe: ClusterProbe;
  close(): Promise<void>;
}

/**
 * Reads the cluster's gauges on scrape: the job counts and workers of every Bosun queue (the
 * incidents, each specialist's, tools, dead-letter and the coordinator's timers), the pending
 * approvals and the calls in doubt. A few Redis round trips per queue, only when Prometheus asks.
 */
export function redisClusterProbe(options: { redis: RedisClient; prefix: string; specialists: string[] }): RedisClusterProbe {
  const { redis, prefix } = options;
  const names = [INCIDENTS_QUEUE, ...options.specialists.map(specialistQueue), TOOLS_QUEUE, DEAD_LETTER_QUEUE, COORDINATOR_TIMERS_QUEUE];
  const queues = names.map((name) => new Queue(name, { connection: redis, prefix }));
  const probe = async (): Promise<ClusterSnapshot> => {
    const counted = await Promise.all(
      queues.map(async (q) => {
        const [counts, workers] = await Promise.all([q.getJobCounts('waiting', 'active', 'delayed', 'failed'), q.getWorkersCount()]);
        return {
          queue: q.name,
          waiting: counts.waiting ?? 0,
          active: counts.active ?? 0,
          delayed: counts.delayed ?? 0,
          failed: counts.failed ?? 0,
          workers,
        };
      }),
    );
    const inDoubtKey = keys.inDoubt(prefix);
    const pendingKey = keys.approvalsPending(prefix);
    const [pending, oldest, , inDoubt] = await Promise.all([
      redis.zcard(pendingKey),
      redis.zrange(pendingKey, 0, 0, 'WITHSCORES'),
      redis.zremrangebyscore(inDoubtKey, '-inf', Date.now() - IN_DOUBT_HORIZON_MS),
      redis.zcard(inDoubtKey),
    ]);
    const oldestAt = oldest[1] === undefined ? undefined : Number(oldest[1]);
    const oldestApprovalSeconds = oldestAt === undefined ? 0 : Math.max(0, (Date.now() - oldestAt) / 1000);
    return { queues: counted, approvalsPending: pending, oldestApprovalSeconds, inDoubt };
  };
  return {
    probe,
    async close() {
      await Promise.all(queues.map((q) => q.close()));
    },
  };
}
