import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue, Worker, type Job } from 'bullmq';
import {
  COORDINATOR_TIMERS_QUEUE,
  DEAD_LETTER_QUEUE,
  INCIDENTS_QUEUE,
  STALL_MARKER,
  TOOLS_QUEUE,
  runIdFor,
  type RunCheckpoint,
  type ToolCallJob,
} from '@bosun/contract';
import { DeadLetters, QueueToolClient, RunControl, RunControlError, keys } from '@bosun/transport';
import { openContext, waitUntil, type TestContext } from '../helpers/index.js';

// libs/transport against a real Redis: the dead-letter queue, the tool client's waits and
// timeouts, and run control's reading of incident jobs, checkpoints and cancel keys.

let ctx: TestContext;
beforeAll(async () => {
  ctx = await openContext('transport');
});
afterAll(async () => {
  await ctx?.close();
});

describe('DeadLetters', () => {
  it('adds an entry to the dead-letter queue and counts it per agent and kind', async () => {
    const dl = new DeadLetters({ redis: ctx.redis, prefix: ctx.prefix });
    const queue = new Queue(DEAD_LETTER_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
    try {
      const entry = await dl.add({ kind: 'stall', runId: 'r1', agent: 'database', reason: 'no answer' });
      await dl.add({ kind: 'poison', reason: 'invalid incident: id: required', input: { summary: 'x' } });
      expect(entry).toMatchObject({ v: 1, kind: 'stall', marker: STALL_MARKER, reason: 'no answer' });
      const jobs = await queue.getWaiting();
      expect(jobs.map((j) => (j.data as { kind: string }).kind).sort()).toEqual(['poison', 'stall']);
      expect(jobs.find((j) => j.name === 'poison')?.data).toMatchObject({ input: { summary: 'x' } });
      expect(await dl.counters()).toEqual({ 'database:stall': 1, '-:poison': 1 });
    } finally {
      await queue.obliterate({ force: true });
      await queue.close();
      await dl.close();
      await ctx.redis.del(keys.degraded(ctx.prefix));
    }
  });

  it('writes an entry with a dedupe id once, even after an operator dropped it, and counts it once', async () => {
    const dl = new DeadLetters({ redis: ctx.redis, prefix: ctx.prefix });
    const queue = new Queue(DEAD_LETTER_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
    try {
      const input = { kind: 'timeout' as const, runId: 'r2', agent: 'kubernetes', reason: 'deadline' };
      await dl.add(input, 'dl-r2-timeout');
      await dl.add(input, 'dl-r2-timeout');
      expect((await queue.getWaiting()).map((j) => j.id)).toEqual(['dl-r2-timeout']);
      await (await queue.getJob('dl-r2-timeout'))!.remove();
      await dl.add(input, 'dl-r2-timeout');
      expect(await queue.getWaiting()).toEqual([]);
      expect(await dl.counters()).toEqual({ 'kubernetes:timeout': 1 });
    } finally {
      await queue.obliterate({ force: true });
      await queue.close();
      await dl.close();
      await ctx.redis.del(keys.degraded(ctx.prefix));
    }
  });
});

describe('QueueToolClient', () => {
  const call = (key: string): ToolCallJob => ({
    v: 1,
    key,
    runId: 'r3',
    incidentId: 'inc-3',
    agent: 'kubernetes',
    tool: 'demo__get_pods',
    args: { service: 'checkout' },
  });

  it('waits for the catalog a bounded time, then names the prefix; reads and caches it once it is there', async () => {
    const tools = new QueueToolClient({ redis: ctx.redis, prefix: ctx.prefix, catalogWaitMs: 300, catalogCacheMs: 60_000 });
    try {
      const t0 = Date.now();
      await expect(tools.catalog()).rejects.toMatchObject({
        code: 'no_catalog',
        message: expect.stringContaining(`BOSUN_PREFIX=${ctx.prefix}`),
      });
      expect(Date.now() - t0).toBeGreaterThanOrEqual(300);
      const catalog = { v: 1, updatedAt: new Date().toISOString(), tools: [], unavailable: { demo: 'down' } };
      await ctx.redis.set(keys.catalog(ctx.prefix), JSON.stringify(catalog));
      expect(await tools.catalog()).toEqual(catalog);
      // Cached: a change is not read again within catalogCacheMs.
      await ctx.redis.set(keys.catalog(ctx.prefix), JSON.stringify({ ...catalog, unavailable: {} }));
      expect((await tools.catalog()).unavailable).toEqual({ demo: 'down' });
    } finally {
      await ctx.redis.del(keys.catalog(ctx.prefix));
      await tools.close();
    }
  });

  it('gives callers that ask at once one parsed catalog, and keeps that object while the text is unchanged', async () => {
    // No cache: every call that does not overlap another reads Redis again.
    const tools = new QueueToolClient({ redis: ctx.redis, prefix: ctx.prefix, catalogCacheMs: 0 });
    try {
      const catalog = { v: 1, updatedAt: new Date().toISOString(), tools: [], unavailable: {} };
      await ctx.redis.set(keys.catalog(ctx.prefix), JSON.stringify(catalog));
      const many = await Promise.all(Array.from({ length: 50 }, () => tools.catalog()));
      expect(new Set(many).size).toBe(1);
      // Read again: the same text gives the same object, a new text a new one.
      expect(await tools.catalog()).toBe(many[0]);
      await ctx.redis.set(keys.catalog(ctx.prefix), JSON.stringify({ ...catalog, unavailable: { demo: 'down' } }));
      const changed = await tools.catalog();
      expect(changed).not.toBe(many[0]);
      expect(changed.unavailable).toEqual({ demo: 'down' });
    } finally {
      await ctx.redis.del(keys.catalog(ctx.prefix));
      await tools.close();
    }
  });

  it('refuses a catalog that does not match the contract, naming the field', async () => {
    const tools = new QueueToolClient({ redis: ctx.redis, prefix: ctx.prefix });
    try {
      await ctx.redis.set(keys.catalog(ctx.prefix), JSON.stringify({ v: 1, tools: [] }));
      await expect(tools.catalog()).rejects.toMatchObject({
        code: 'invalid_input',
        message: expect.stringMatching(/tool catalog: updatedAt/),
      });
    } finally {
      await ctx.redis.del(keys.catalog(ctx.prefix));
      await tools.close();
    }
  });

  it('gives up waiting at its timeout when no gateway answers; the call stays queued once under its key', async () => {
    const tools = new QueueToolClient({ redis: ctx.redis, prefix: ctx.prefix });
    const queue = new Queue(TOOLS_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
    try {
      await tools.ready();
      const t0 = Date.now();
      await expect(tools.call(call('k-timeout'), { timeoutMs: 300 })).rejects.toThrow(/timed out/);
      expect(Date.now() - t0).toBeLessThan(5_000);
      // Re-sent after the timeout (a retried step): the same job, not a second call.
      await expect(tools.call(call('k-timeout'), { timeoutMs: 300 })).rejects.toThrow(/timed out/);
      expect((await queue.getWaiting()).map((j) => j.id)).toEqual(['k-timeout']);
    } finally {
      await queue.obliterate({ force: true });
      await queue.close();
      await tools.close();
    }
  });

  it("returns the gateway's result, and refuses one that does not match the contract", async () => {
    const tools = new QueueToolClient({ redis: ctx.redis, prefix: ctx.prefix });
    const gateway = new Worker(
      TOOLS_QUEUE,
      (job: Job<ToolCallJob>) =>
        Promise.resolve(
          job.data.key === 'k-bad'
            ? { v: 1, status: 'fine' }
            : { v: 1, key: job.data.key, tool: job.data.tool, status: 'ok', text: 'pods' },
        ),
      { connection: ctx.redis, prefix: ctx.prefix },
    );
    try {
      await tools.ready();
      expect(await tools.call(call('k-ok'), { timeoutMs: 10_000 })).toMatchObject({
        key: 'k-ok',
        status: 'ok',
        text: 'pods',
        isError: false,
      });
      await expect(tools.call(call('k-bad'), { timeoutMs: 10_000 })).rejects.toMatchObject({
        code: 'invalid_input',
        message: expect.stringContaining('tool call result'),
      });
    } finally {
      await gateway.close();
      await tools.close();
      const queue = new Queue(TOOLS_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
      await queue.obliterate({ force: true });
      await queue.close();
    }
  });
});

describe('RunControl', () => {
  let incidents: Queue;
  let runs: RunControl;
  const ids = { waiting: 'rc-waiting', partial: 'rc-partial', cancelled: 'rc-cancelled', failed: 'rc-failed', plain: 'rc-plain' };
  const runOf = (job: Job) => runIdFor(String(job.id), job.timestamp);
  let jobs: Record<keyof typeof ids, Job>;

  beforeAll(async () => {
    incidents = new Queue(INCIDENTS_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
    runs = new RunControl({ redis: ctx.redis, prefix: ctx.prefix });
    const add = (id: string, data: Record<string, unknown> = {}) =>
      incidents.add('incident', { id, source: 'test', reason: 'r', summary: 's', ...data }, { jobId: id });
    // Four incidents that a stand-in coordinator finishes, each its own way.
    const finished = await Promise.all([add(ids.partial), add(ids.cancelled), add(ids.failed), add(ids.plain)]);
    const worker = new Worker(
      INCIDENTS_QUEUE,
      (job: Job<{ id: string }>) => {
        const runId = runOf(job);
        switch (job.data.id) {
          case ids.partial:
            return Promise.resolve({ runId, status: 'partial', specialists: [{ name: 'database' }, { name: 'kubernetes' }] });
          case ids.cancelled:
            return Promise.resolve({ runId, status: 'cancelled', specialists: [], cancelled: { by: 'bob', reason: 'dup', at: 'x' } });
          case ids.failed:
            return Promise.reject(new Error('invalid incident: labels: expected record'));
          default:
            return Promise.resolve('not a run result');
        }
      },
      { connection: ctx.redis, prefix: ctx.prefix },
    );
    await waitUntil(
      async () => (await Promise.all(finished.map((j) => j.isCompleted().then(async (c) => c || j.isFailed())))).every(Boolean),
      15_000,
      'the stand-in coordinator finished its four incidents',
    );
    await worker.close();
    // One not started yet, with a routing already checkpointed and a cancellation requested.
    const waiting = await add(ids.waiting);
    await ctx.redis.set(
      keys.checkpoint(ctx.prefix, `run:${runOf(waiting)}`),
      JSON.stringify({
        v: 1,
        runId: runOf(waiting),
        incidentId: ids.waiting,
        startedAt: new Date().toISOString(),
        deadlineAt: new Date(Date.now() + 60_000).toISOString(),
        jobId: ids.waiting,
        mode: 'route',
        phase: 'routing',
        round: 0,
        delegations: [],
        messages: [],
        routed: ['kubernetes'],
      } satisfies RunCheckpoint),
    );
    await ctx.redis.set(keys.cancelRun(ctx.prefix, runOf(waiting)), JSON.stringify({ by: 'alice', reason: 'test', at: 'now' }));
    const byId = async (id: string) => (await incidents.getJob(id))!;
    jobs = {
      waiting: await byId(ids.waiting),
      partial: await byId(ids.partial),
      cancelled: await byId(ids.cancelled),
      failed: await byId(ids.failed),
      plain: await byId(ids.plain),
    };
  }, 30_000);

  afterAll(async () => {
    await runs?.close();
    await incidents?.obliterate({ force: true });
    await incidents?.close();
  });

  it('reads each run state from its incident job, and its specialists from the result or the checkpoint', async () => {
    const list = await runs.list();
    const byIncident = new Map(list.map((r) => [r.incidentId, r]));
    expect(byIncident.get(ids.waiting)).toMatchObject({
      runId: runOf(jobs.waiting),
      state: 'waiting',
      specialists: ['kubernetes'],
      cancelRequested: { by: 'alice', reason: 'test', at: 'now' },
    });
    expect(byIncident.get(ids.partial)).toMatchObject({ state: 'partial', specialists: ['database', 'kubernetes'] });
    expect(byIncident.get(ids.partial)?.finishedAt).toMatch(/^\d{4}-/);
    expect(byIncident.get(ids.cancelled)).toMatchObject({ state: 'cancelled' });
    expect(byIncident.get(ids.failed)).toMatchObject({ state: 'failed', reason: 'invalid incident: labels: expected record' });
    expect(byIncident.get(ids.plain)).toMatchObject({ state: 'completed', specialists: [] });
    // Newest first.
    expect(list.map((r) => r.incidentId)[0]).toBe(ids.waiting);
    expect((await runs.list({ state: 'partial' })).map((r) => r.incidentId)).toEqual([ids.partial]);
    await expect(runs.list({ state: 'nosuch' as never })).rejects.toMatchObject({ code: 'bad_request' });
    expect(await runs.get(runOf(jobs.failed))).toMatchObject({ incidentId: ids.failed, state: 'failed' });
    expect(await runs.get('r00000000000000000000')).toBeNull();
    expect(await runs.get('not-a-run-id')).toBeNull();
  });

  it('cancels a run not started yet once, refuses a finished or unknown one, and checks who and why', async () => {
    await expect(runs.cancel(runOf(jobs.waiting), { by: ' ', reason: 'x' })).rejects.toMatchObject({ code: 'bad_request' });
    await expect(runs.cancel(runOf(jobs.waiting), { by: 'carol', reason: 'x'.repeat(10_001) })).rejects.toBeInstanceOf(RunControlError);
    await expect(runs.cancel(runOf(jobs.partial), { by: 'carol', reason: 'late' })).rejects.toMatchObject({ code: 'finished' });
    await expect(runs.cancel('r00000000000000000000', { by: 'carol', reason: 'x' })).rejects.toMatchObject({ code: 'not_found' });
    // Alice's cancellation was first: it stays in force.
    const outcome = await runs.cancel(runOf(jobs.waiting), { by: 'carol', reason: 'again' });
    expect(outcome).toMatchObject({ incidentId: ids.waiting, already: true, state: 'waiting', cancelled: { by: 'alice' } });
    const timers = new Queue(COORDINATOR_TIMERS_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
    try {
      expect((await timers.getJob(`cancel-run-${runOf(jobs.waiting)}`))?.data).toEqual({ kind: 'cancel-run', runId: runOf(jobs.waiting) });
    } finally {
      await timers.obliterate({ force: true });
      await timers.close();
    }
    const earlier = await runs.cancel(runOf(jobs.cancelled), { by: 'carol', reason: 'x' });
    expect(earlier).toMatchObject({ already: true, state: 'cancelled', cancelled: { by: 'bob', reason: 'dup' } });
  });
});
