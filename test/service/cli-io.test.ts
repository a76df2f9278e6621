import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Job, Queue, Worker } from 'bullmq';
import { DEAD_LETTER_QUEUE, INCIDENTS_QUEUE, INCIDENT_LIMITS, STALL_MARKER, runIdFor, type RunResult } from '@bosun/contract';
import { openContext, runCli, waitUntil, type TestContext } from '../helpers/index.js';

// The bosun CLI's own input and output, with no cluster running: usage errors and refused input
// (exit 2, naming what is wrong), output larger than a pipe's buffer, and a failed (not rejected)
// incident published again. The incidents this file needs finished are finished by a worker of
// the test itself. (The refusals of malformed, huge and deep incidents and of a bad run id were
// in test/e2e/cli.test.ts and test/e2e/limits.test.ts, each with a whole cluster running.)

let ctx: TestContext;
let incidents: Queue;
let dlq: Queue;

const bosun = (args: string[], input?: string) => runCli(ctx.env, args, input);

/** Finishes the incident jobs added while `fn` runs with `processor`, then stops the worker. */
async function withWorker<T>(processor: (job: Job) => Promise<unknown>, fn: () => Promise<T>): Promise<T> {
  const worker = new Worker(INCIDENTS_QUEUE, processor, { connection: ctx.redis, prefix: ctx.prefix });
  try {
    return await fn();
  } finally {
    await worker.close();
  }
}

async function finished(id: string, state: 'completed' | 'failed'): Promise<Job> {
  let job: Job | undefined;
  await waitUntil(
    async () => (job = await Job.fromId(incidents, id)) !== undefined && (await job.getState()) === state,
    15_000,
    `incident ${id} ${state}`,
  );
  return job!;
}

beforeAll(async () => {
  ctx = await openContext('cli-io');
  incidents = new Queue(INCIDENTS_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
  dlq = new Queue(DEAD_LETTER_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
});

afterAll(async () => {
  await incidents?.close();
  await dlq?.close();
  await ctx?.close();
});

describe('bosun usage errors', () => {
  it('result --timeout that is not a number exits 2 naming the option, instead of waiting forever', async () => {
    const r = await bosun(['result', 'never-published', '--wait', '--timeout', 'abc']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('bosun: result: --timeout must be a positive number of seconds, at most 604800 (got "abc")');
    for (const bad of ['0', '1e3']) expect((await bosun(['result', 'x', '--timeout', bad])).code, bad).toBe(2);
  });

  it('an unknown option exits 2 naming it, for every command', async () => {
    const cases: [string[], string][] = [
      [['publish', '--bogus', 'x.json'], '--bogus'],
      [['watch', '--nope'], '--nope'],
      [['result', 'x', '--frob'], '--frob'],
      [['demo', '--fast'], '--fast'],
      [['runs', 'list', '--all'], '--all'],
      [['cancel', 'r0123456789abcdef0123', '--force'], '--force'],
    ];
    for (const [args, option] of cases) {
      const r = await bosun(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr, args.join(' ')).toContain(`Unknown option '${option}'`);
    }
  });

  it('publish of a file that cannot be read exits 2 naming the file, without a raw ENOENT', async () => {
    const missing = join(ctx.dir, 'nonexistent.json');
    const r = await bosun(['publish', missing]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`bosun: publish: cannot read "${missing}": no such file\n`);
    const folder = join(ctx.dir, 'a-folder');
    mkdirSync(folder, { recursive: true });
    const dir = await bosun(['publish', folder]);
    expect(dir.code).toBe(2);
    expect(dir.stderr).toContain(`cannot read "${folder}": it is a directory`);
  });
});

describe('bosun refuses bad input up front', () => {
  it('refuses a malformed incident before it reaches the queue, naming the fields', async () => {
    const bad = join(ctx.dir, 'bad.json');
    writeFileSync(bad, JSON.stringify({ id: 'has space', source: 's', summary: 'x', payload: 'p'.repeat(300_000) }));
    const r = await bosun(['publish', bad]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/invalid incident: id: .*; reason: .*; payload: must be at most 262144 bytes/);
    const notJson = await bosun(['publish', '-'], '{ nope');
    expect(notJson.code).toBe(2);
    expect(notJson.stderr).toMatch(/not valid JSON/);
    expect(await incidents.getJob('has space')).toBeUndefined();
  });

  it('refuses a 5 MB summary and a payload nested 10,000 levels, naming the field and the limit', async () => {
    const deep = (levels: number) => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;
    const big = join(ctx.dir, 'big.json');
    writeFileSync(big, JSON.stringify({ id: 'cli-huge', source: 'test', reason: 'PodCrashLooping', summary: 's'.repeat(5 * 1024 * 1024) }));
    const deepFile = join(ctx.dir, 'deep.json');
    writeFileSync(deepFile, `{"id":"cli-deep","source":"test","reason":"PodCrashLooping","summary":"x","payload":${deep(10_000)}}`);
    const r1 = await bosun(['publish', big]);
    expect(r1.code).toBe(2);
    expect(r1.stderr).toContain(`invalid incident: summary: must be at most ${INCIDENT_LIMITS.summaryChars} characters`);
    const r2 = await bosun(['publish', deepFile]);
    expect(r2.code).toBe(2);
    expect(r2.stderr).toContain(
      `invalid incident: payload: must nest objects and arrays at most ${INCIDENT_LIMITS.payloadDepth} levels deep`,
    );
    expect(r2.stderr).not.toMatch(/call stack/);
    expect(await incidents.getJob('cli-huge')).toBeUndefined();
    expect(await incidents.getJob('cli-deep')).toBeUndefined();
  });

  it('refuses to watch something that is not a run id, instead of waiting forever', async () => {
    const r = await bosun(['watch', 'a.b']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('watch: "a.b" is not a run id (r and 20 hex digits, as bosun publish prints it)');
  });

  it('says when a result is not there yet, and when an incident or a command is unknown', async () => {
    const none = await bosun(['result', 'never-published']);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('no incident never-published');
    const usage = await bosun(['frobnicate']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('unknown command "frobnicate"');
  });
});

describe('output through a pipe', () => {
  it('prints a result larger than 64 KiB in full', async () => {
    const answer = `${'0123456789abcdef'.repeat(64 * 1024)}\u001b`;
    const job = await withWorker(
      (j): Promise<RunResult> => {
        const now = new Date().toISOString();
        return Promise.resolve({
          v: 1,
          runId: runIdFor(String(j.id), j.timestamp),
          incidentId: String(j.id),
          status: 'completed',
          answer,
          specialists: [],
          stalled: 0,
          startedAt: now,
          finishedAt: now,
        });
      },
      async () => {
        await incidents.add('incident', { id: 'big-1', source: 't', reason: 'R', summary: 's' }, { jobId: 'big-1' });
        return finished('big-1', 'completed');
      },
    );
    const r = await bosun(['result', 'big-1']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.length).toBeGreaterThan(1024 * 1024);
    const result = JSON.parse(r.stdout) as RunResult;
    expect(result.answer).toBe(answer);
    expect(result.runId).toBe(runIdFor('big-1', job.timestamp));
  });

  it('prints dlq show and dlq list --json larger than 64 KiB in full', async () => {
    const reason = 'r'.repeat(300 * 1024);
    await dlq.add('failure', { v: 1, kind: 'failure', marker: STALL_MARKER, at: new Date().toISOString(), reason }, { jobId: 'big-entry' });
    const show = await bosun(['dlq', 'show', 'big-entry']);
    expect(show.code, show.stderr).toBe(0);
    expect((JSON.parse(show.stdout) as { reason: string }).reason).toBe(reason);
    const list = await bosun(['dlq', 'list', '--json']);
    expect(list.code, list.stderr).toBe(0);
    expect((JSON.parse(list.stdout) as { id: string; reason: string }[]).find((e) => e.id === 'big-entry')?.reason).toBe(reason);
  });
});

describe('bosun publish of an incident whose job failed', () => {
  it('refuses (exit 1) when the job failed for another reason than rejected input, and says what to do', async () => {
    const failed = await withWorker(
      () => Promise.reject(new Error('boom: the run checkpoint cannot be used')),
      async () => {
        await incidents.add(
          'incident',
          { id: 'failed-1', source: 't', reason: 'R', summary: 's' },
          { jobId: 'failed-1', removeOnFail: false },
        );
        return finished('failed-1', 'failed');
      },
    );
    const r = await bosun(['publish', '-'], JSON.stringify({ id: 'failed-1', source: 't', reason: 'R', summary: 'fixed' }));
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain(
      `incident failed-1 was already published (run ${runIdFor('failed-1', failed.timestamp)}), and its job failed: boom: the run checkpoint cannot be used. Nothing was published`,
    );
    expect(r.stderr).toContain('bosun dlq retry');
    const still = await Job.fromId(incidents, 'failed-1');
    expect(still?.timestamp).toBe(failed.timestamp);
    expect(await still?.getState()).toBe('failed');
  });
});

describe('bosun result of a stored result that does not parse', () => {
  it('names the bad fields (exit 1) instead of printing it', async () => {
    await withWorker(
      (j) => Promise.resolve({ v: 1, runId: runIdFor(String(j.id), j.timestamp), status: 'done' }),
      async () => {
        await incidents.add('incident', { id: 'bad-result-1', source: 't', reason: 'R', summary: 's' }, { jobId: 'bad-result-1' });
        return finished('bad-result-1', 'completed');
      },
    );
    const r = await bosun(['result', 'bad-result-1']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^bosun: the result of incident bad-result-1 does not parse: incidentId: .*; status: .*; answer: /);
  });
});
