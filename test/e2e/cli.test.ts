import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue } from 'bullmq';
import { INCIDENTS_QUEUE, STALL_MARKER, runIdFor } from '@bosun/contract';
import { TestCluster, demoConfig, openContext, runCli, writeConfig, type TestContext } from '../helpers/index.js';

let ctx: TestContext;
let cluster: TestCluster;
let env: Record<string, string>;

const bosun = (args: string[], input?: string) => runCli(env, args, input);

beforeAll(async () => {
  ctx = await openContext('cli');
  const file = writeConfig(ctx, demoConfig());
  env = { ...ctx.env, BOSUN_CONFIG: file };
  cluster = await TestCluster.start(env, { specialists: 1 });
});

afterAll(async () => {
  await cluster?.stop();
  await ctx?.close();
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
    const incident = { id: 'cli-1', source: 'cli', reason: 'ErrorRateHigh', summary: 'errors', labels: { service: 'checkout' }, payload: { fake: { stall: ['database'] } } };
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
});
