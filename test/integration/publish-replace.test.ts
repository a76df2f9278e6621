import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Job, Queue, UnrecoverableError, Worker } from 'bullmq';
import { INCIDENTS_QUEUE, runIdFor } from '@bosun/contract';
import { publishOrReplace } from '@bosun/cli';
import { keys, type RedisClient } from '@bosun/transport';
import { openContext, waitUntil, type TestContext } from '../helpers/index.js';

// `bosun publish` replacing a rejected incident, with a racer that completes the whole
// replacement at the worst moment of the other: between two of its reads. Real Redis; the job is
// rejected here the way the coordinator rejects one (failed, and its poison dead letter recorded).
// These orders were seen in CI as two publishers printing different run ids.

let ctx: TestContext;
let incidents: Queue;
let rejecter: Worker;

beforeAll(async () => {
  ctx = await openContext('republish');
  incidents = new Queue(INCIDENTS_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
  rejecter = new Worker(
    INCIDENTS_QUEUE,
    async (job) => {
      if (job.data.summary === 42) {
        // What the coordinator leaves of a poison job: the dedupe marker of its dead letter.
        await ctx.redis.set(keys.deadLetterSeen(ctx.prefix, `poison-${job.id}-${job.timestamp}`), '1', 'EX', 600);
        throw new UnrecoverableError('invalid incident: summary: expected string');
      }
      return { status: 'completed' };
    },
    { connection: ctx.redis, prefix: ctx.prefix, autorun: false },
  );
});

afterAll(async () => {
  await rejecter?.close();
  await incidents?.close();
  await ctx?.close();
});

const fixed = (id: string) => ({ id, source: 'cli', reason: 'HighLatency', summary: 'payments slow', labels: { service: 'payments' } });

async function rejected(id: string): Promise<Job> {
  const job = await incidents.add('incident', { id, source: 'cli', summary: 42 }, { jobId: id, removeOnFail: false });
  if (!rejecter.isRunning()) void rejecter.run();
  await waitUntil(async () => (await job.getState()) === 'failed', 10_000, `${id} rejected`);
  return job;
}

/** Runs `racer` (once) just before the first call of `method` on `target` goes out. */
function before<T extends object>(target: T, method: keyof T & string, racer: () => Promise<unknown>): T {
  let fired = false;
  return new Proxy(target, {
    get(t, key, receiver) {
      const value = Reflect.get(t, key, receiver) as unknown;
      if (key !== method || typeof value !== 'function') return typeof value === 'function' ? value.bind(t) : value;
      return async (...args: unknown[]) => {
        if (!fired) {
          fired = true;
          await racer();
        }
        return (value as (...a: unknown[]) => unknown).apply(t, args);
      };
    },
  });
}

describe('publishOrReplace against a racer that replaces the job between two reads', () => {
  it("reports the replacement's run, not the rejected one's, when the job changed before its state was read", async () => {
    const old = await rejected('race-state');
    const deps = { redis: ctx.redis, prefix: ctx.prefix };
    const racer = async () => {
      winner = await publishOrReplace(deps, incidents, fixed('race-state'));
    };
    let winner: Awaited<ReturnType<typeof publishOrReplace>> | undefined;
    // The late publisher's queue: its first state read waits for the racer's whole replacement.
    const late = new Queue(INCIDENTS_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
    try {
      (late as unknown as { backend: object }).backend = before(
        (late as unknown as { backend: { getState: unknown } }).backend,
        'getState',
        racer,
      );
      const loser = await publishOrReplace(deps, late, fixed('race-state'));
      const job = await Job.fromId(incidents, 'race-state');
      expect(job!.timestamp).not.toBe(old.timestamp);
      expect(winner?.replaced?.runId).toBe(runIdFor('race-state', old.timestamp));
      expect(winner?.runId).toBe(runIdFor('race-state', job!.timestamp));
      expect(loser.replaced).toBeUndefined();
      expect(loser.duplicate).toBe(true);
      expect(loser.runId).toBe(winner?.runId);
    } finally {
      await late.close();
    }
  });

  it('leaves the replacement standing when it was made while the late publisher was checking the dead letter', async () => {
    const old = await rejected('race-take');
    let winner: Awaited<ReturnType<typeof publishOrReplace>> | undefined;
    const racer = async () => {
      winner = await publishOrReplace({ redis: ctx.redis, prefix: ctx.prefix }, incidents, fixed('race-take'));
    };
    // The late publisher read the rejected job as failed; its check of the dead letter's marker
    // waits for the racer's whole replacement (whose marker then says done).
    const redis = before(ctx.redis, 'exists', racer) as RedisClient;
    const loser = await publishOrReplace({ redis, prefix: ctx.prefix }, incidents, fixed('race-take'));
    const job = await Job.fromId(incidents, 'race-take');
    expect(winner?.replaced?.runId).toBe(runIdFor('race-take', old.timestamp));
    // The racer's job stands: the late publisher did not remove it to add its own.
    expect(job!.timestamp).toBe(winner?.jobTimestamp);
    expect(loser.replaced, JSON.stringify(loser)).toBeUndefined();
    expect(loser.runId).toBe(winner?.runId);
  });
});
