import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Job, Queue } from 'bullmq';
import { DEAD_LETTER_QUEUE, INCIDENTS_QUEUE, STALL_MARKER, runIdFor } from '@bosun/contract';
import { publishOrReplace } from '@bosun/cli';
import { keys } from '@bosun/transport';
import { runCli, startClusterTest, waitUntil, type ClusterTest, type TestContext } from '../helpers/index.js';

let t: ClusterTest;
let ctx: TestContext;
let env: Record<string, string>;

const bosun = (args: string[], input?: string) => runCli(env, args, input);

beforeAll(async () => {
  t = await startClusterTest('cli', () => undefined);
  ({ ctx, env } = t);
});

afterAll(async () => {
  await t?.close();
});

describe('bosun CLI', () => {
  it('refuses a malformed incident before it reaches the queue, naming the fields', async () => {
    const bad = join(ctx.dir, 'bad.json');
    writeFileSync(bad, JSON.stringify({ id: 'has space', source: 's', summary: 'x', payload: 'p'.repeat(300_000) }));
    const r = await bosun(['publish', bad]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/invalid incident: id: .*; reason: .*; payload: must be at most 262144 bytes/);
    const notJson = await bosun(['publish', '-'], '{ nope');
    expect(notJson.code).toBe(2);
    expect(notJson.stderr).toMatch(/not valid JSON/);
    const q = new Queue(INCIDENTS_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
    expect(await q.count()).toBe(0);
    await q.close();
  });

  it('refuses to watch something that is not a run id, instead of waiting forever', async () => {
    const r = await bosun(['watch', 'a.b']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('watch: "a.b" is not a run id (r and 20 hex digits, as bosun publish prints it)');
  });

  it('publishes from stdin, prints the run id, and prints the result with --wait', async () => {
    const incident = {
      id: 'cli-1',
      source: 'cli',
      reason: 'ErrorRateHigh',
      summary: 'errors',
      labels: { service: 'checkout' },
      payload: { fake: { stall: ['database'] } },
    };
    const pub = await bosun(['publish', '-'], JSON.stringify(incident));
    expect(pub.code).toBe(0);
    const runId = pub.stdout.trim();
    const q = new Queue(INCIDENTS_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
    const job = await q.getJob('cli-1');
    await q.close();
    expect(runId).toBe(runIdFor('cli-1', job!.timestamp));

    const res = await bosun(['result', 'cli-1', '--wait', '--timeout', '60']);
    expect(res.code).toBe(0);
    const result = JSON.parse(res.stdout) as { status: string; runId: string };
    expect(result).toMatchObject({ status: 'partial', runId });

    const again = await bosun(['publish', '-'], JSON.stringify(incident));
    expect(again.code).toBe(0);
    expect(again.stdout.trim()).toBe(runId);
    expect(again.stderr).toMatch(/already published; it runs once/);

    const watch = await bosun(['watch', runId]);
    expect(watch.code).toBe(0);
    const lines = watch.stdout.trim().split('\n');
    expect(lines[0]).toContain('run.started');
    expect(lines[lines.length - 1]).toContain('run.completed');
    expect(watch.stdout).toContain('agent.stalled');

    const dlq = await bosun(['dlq', '--json']);
    expect(dlq.code).toBe(0);
    const entries = JSON.parse(dlq.stdout) as { kind: string; runId?: string; marker: string }[];
    expect(entries.filter((e) => e.runId === runId)).toEqual([expect.objectContaining({ kind: 'stall', marker: STALL_MARKER })]);
    const table = await bosun(['dlq']);
    expect(table.stdout).toContain('stall');
  });

  it('says when a result is not there yet, and when an incident is unknown', async () => {
    const none = await bosun(['result', 'never-published']);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('no incident never-published');
    const usage = await bosun(['frobnicate']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('unknown command "frobnicate"');
  });

  it('bosun watch prints control characters from incident text escaped, one line per event', async () => {
    const incident = {
      id: 'cli-esc',
      source: 'cli',
      reason: 'PodCrashLooping',
      summary: 'pods \u001b[2J\u001b[31mRED\u0000 restart\nfake line',
      labels: { service: 'checkout' },
    };
    const pub = await bosun(['publish', '-'], JSON.stringify(incident));
    expect(pub.code, pub.stderr).toBe(0);
    const runId = pub.stdout.trim();
    expect((await bosun(['result', 'cli-esc', '--wait', '--timeout', '60'])).code).toBe(0);
    const watch = await bosun(['watch', runId]);
    expect(watch.code, watch.stderr).toBe(0);
    const started = watch.stdout.split('\n').find((l) => l.includes('run.started'));
    expect(started).toContain('pods \\x1b[2J\\x1b[31mRED\\x00 restart fake line');
    // eslint-disable-next-line no-control-regex -- the point: no raw control character reaches the terminal
    expect(watch.stdout).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/);
    expect(
      watch.stdout
        .trim()
        .split('\n')
        .every((l) => l.includes(runId)),
    ).toBe(true);
  });
});

describe('bosun publish of a rejected incident, fixed', () => {
  let incidents: Queue;
  let dlq: Queue;
  const fixed = (id: string) =>
    JSON.stringify({ id, source: 'cli', reason: 'HighLatency', summary: 'payments slow', labels: { service: 'payments' } });

  /** Adds a job the coordinator rejects as poison (no reason, summary not a string), and waits for the rejection. */
  async function rejected(id: string): Promise<{ job: Job; deadLetterId: string }> {
    const job = await incidents.add('incident', { id, source: 'cli', summary: 42 }, { jobId: id, removeOnFail: false });
    const deadLetterId = `poison-${id}-${job.timestamp}`;
    await waitUntil(
      async () => (await job.getState()) === 'failed' && (await Job.fromId(dlq, deadLetterId)) !== undefined,
      30_000,
      `${id} rejected as poison`,
    );
    return { job, deadLetterId };
  }

  beforeAll(() => {
    incidents = new Queue(INCIDENTS_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
    dlq = new Queue(DEAD_LETTER_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
  });

  afterAll(async () => {
    await incidents?.close();
    await dlq?.close();
  });

  it('replaces the rejected job, says so, and the fixed incident runs', async () => {
    const { job: old, deadLetterId } = await rejected('fixme-1');
    const r = await bosun(['publish', '-'], fixed('fixme-1'));
    expect(r.code, r.stderr).toBe(0);
    const runId = r.stdout.trim();
    expect(runId).not.toBe(runIdFor('fixme-1', old.timestamp));
    expect(r.stderr).toContain(
      `incident fixme-1 replaces the rejected incident of that id (run ${runIdFor('fixme-1', old.timestamp)}, poison: invalid incident:`,
    );
    const res = await bosun(['result', 'fixme-1', '--wait', '--timeout', '60']);
    expect(res.code, res.stderr).toBe(0);
    expect(JSON.parse(res.stdout)).toMatchObject({ runId, status: 'completed' });
    // The dead letter stays, linked to the run that replaced it.
    expect((await Job.fromId(dlq, deadLetterId))?.data).toMatchObject({ kind: 'poison', retriedAs: { incidentId: 'fixme-1', runId } });
    // Published again now, it is an ordinary duplicate.
    const again = await bosun(['publish', '-'], fixed('fixme-1'));
    expect(again.code).toBe(0);
    expect(again.stdout.trim()).toBe(runId);
    expect(again.stderr).toContain('already published; it runs once');
  });

  it('replaces it when its dead letter does not parse, naming the bad field (exit 1), and leaves the entry as it is', async () => {
    const { deadLetterId } = await rejected('fixme-3');
    const entry = await Job.fromId(dlq, deadLetterId);
    await entry!.updateData({ ...entry!.data, kind: 'poisoned' });
    const r = await bosun(['publish', '-'], fixed('fixme-3'));
    expect(r.code).toBe(1);
    const runId = r.stdout.trim();
    const job = await Job.fromId(incidents, 'fixme-3');
    expect(runId).toBe(runIdFor('fixme-3', job!.timestamp));
    expect(r.stderr).toContain(`dead letter ${deadLetterId} is not linked to run ${runId}`);
    expect(r.stderr).toContain(`bosun: dead-letter entry ${deadLetterId} does not parse: kind: `);
    expect((await Job.fromId(dlq, deadLetterId))?.data).toMatchObject({ kind: 'poisoned' });
    expect((await Job.fromId(dlq, deadLetterId))?.data.retriedAs).toBeUndefined();
  });

  it('still replaces it after the dead letter was dropped, and of two publishers at once exactly one replaces it', async () => {
    const { deadLetterId } = await rejected('fixme-2');
    expect((await bosun(['dlq', 'drop', deadLetterId])).code).toBe(0);
    const [a, b] = await Promise.all([bosun(['publish', '-'], fixed('fixme-2')), bosun(['publish', '-'], fixed('fixme-2'))]);
    expect([a.code, b.code]).toEqual([0, 0]);
    const replaced = [a, b].filter((r) => r.stderr.includes('replaces the rejected incident'));
    expect(replaced, `${a.stderr}\n${b.stderr}`).toHaveLength(1);
    expect([a, b].filter((r) => r.stderr.includes('already published; it runs once'))).toHaveLength(1);
    expect(a.stdout.trim()).toBe(b.stdout.trim());
    const job = await Job.fromId(incidents, 'fixme-2');
    expect(runIdFor('fixme-2', job!.timestamp)).toBe(a.stdout.trim());
    await waitUntil(async () => (await job!.getState()) === 'completed', 60_000, 'the replacing fixme-2 completed');
    expect((await Job.fromId(incidents, 'fixme-2'))?.returnvalue).toMatchObject({ status: 'completed' });
  });

  it("reports a job added between the replacing publisher's remove and add as already published (the replacement)", async () => {
    // The replacing publisher is stopped half-way: marker taken, rejected job removed, new job not added.
    const { job: old } = await rejected('fixme-4');
    await ctx.redis.set(keys.republish(ctx.prefix, 'fixme-4'), String(old.timestamp), 'EX', 60);
    await old.remove();
    const r = await bosun(['publish', '-'], fixed('fixme-4'));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain('incident fixme-4 was already published; it runs once');
    const job = await Job.fromId(incidents, 'fixme-4');
    expect(r.stdout.trim()).toBe(runIdFor('fixme-4', job!.timestamp));
    // Once the replacement is done (the marker names another job), an add is an ordinary publish.
    await ctx.redis.set(keys.republish(ctx.prefix, 'fixme-4'), 'done:1', 'EX', 60);
    await waitUntil(async () => (await job!.getState()) === 'completed', 60_000, 'fixme-4 completed');
    await job!.remove();
    const fresh = await bosun(['publish', '-'], fixed('fixme-4'));
    expect(fresh.code, fresh.stderr).toBe(0);
    expect(fresh.stderr).toBe('');
  });

  it('of two publishers racing in one process, exactly one replaces, every time', async () => {
    const deps = { redis: ctx.redis, prefix: ctx.prefix };
    for (let i = 0; i < 8; i++) {
      const id = `fixme-race-${i}`;
      await rejected(id);
      const outcomes = await Promise.all([1, 2].map(() => publishOrReplace(deps, incidents, JSON.parse(fixed(id)))));
      expect(outcomes.filter((o) => o.replaced).length, JSON.stringify(outcomes)).toBe(1);
      expect(outcomes.filter((o) => !o.replaced && o.duplicate && !o.failed).length, JSON.stringify(outcomes)).toBe(1);
      const job = await Job.fromId(incidents, id);
      expect(outcomes.map((o) => o.runId)).toEqual([runIdFor(id, job!.timestamp), runIdFor(id, job!.timestamp)]);
    }
  });
});
