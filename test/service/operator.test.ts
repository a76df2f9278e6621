import { beforeAll, describe, expect, it } from 'vitest';
import { Job, type Queue } from 'bullmq';
import { STALL_MARKER, runIdFor } from '@bosun/contract';
import { type TestContext } from '../helpers/index.js';
import { deadLetter, operatorFixture } from '../helpers/operator.js';
// The operator commands dlq list/show/retry/drop and runs show against data seeded straight
// into Redis, with no cluster process (test/helpers/operator.ts; ack, stats and stored values
// that do not parse are in operator-ack.test.ts).

let ctx: TestContext;
let dlq: Queue;
let incidents: Queue;
const { bosun, dataOf } = operatorFixture('operator', { gateway: false }, (f) => {
  ({ ctx, dlq, incidents } = f);
});

describe('bosun dlq', () => {
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    ids.old = String(
      (await dlq.add('stall', deadLetter('stall', '2026-01-01T00:00:01.000Z', { runId: 'rold', agent: 'database', incidentId: 'inc-old' })))
        .id,
    );
    ids.poison = String(
      (await dlq.add('poison', deadLetter('poison', '2026-01-01T00:00:03.000Z', { incidentId: 'bad one', input: { id: 'bad one' } }))).id,
    );
    ids.newest = String(
      (
        await dlq.add(
          'timeout',
          deadLetter('timeout', '2026-01-01T00:00:05.000Z', { runId: 'rnew', agent: 'kubernetes', reason: 'x'.repeat(300) }),
        )
      ).id,
    );
  });

  it('lists the entries newest first, filters by kind, and prints JSON', async () => {
    const table = await bosun(['dlq', 'list']);
    expect(table.code, table.stderr).toBe(0);
    const lines = table.stdout.split('\n');
    const row = (id: string) => lines.findIndex((l) => l.startsWith(`${id} `));
    expect(row(ids.newest!)).toBeGreaterThan(0);
    expect(row(ids.newest!)).toBeLessThan(row(ids.poison!));
    expect(row(ids.poison!)).toBeLessThan(row(ids.old!));
    const oldLine = lines[row(ids.old!)]!;
    expect(oldLine).toMatch(/stall\s+rold\s+database/);
    // One line, truncated.
    expect(oldLine).toContain('stall happened over two lines');
    expect(lines[row(ids.newest!)]).toContain(`${'x'.repeat(100)}…`);
    expect(lines[row(ids.newest!)]).not.toContain('x'.repeat(101));

    const bare = await bosun(['dlq']);
    expect(bare.code).toBe(0);
    expect(bare.stdout).toBe(table.stdout);

    const json = await bosun(['dlq', 'list', '--json', '--kind', 'stall']);
    expect(json.code, json.stderr).toBe(0);
    const entries = JSON.parse(json.stdout) as { id: string; kind: string }[];
    expect(entries.length).toBeGreaterThan(0);
    expect(entries.every((e) => e.kind === 'stall')).toBe(true);
    expect(entries.find((e) => e.id === ids.old)).toMatchObject({ runId: 'rold', agent: 'database', marker: STALL_MARKER });

    const badKind = await bosun(['dlq', 'list', '--kind', 'nope']);
    expect(badKind.code).toBe(2);
  });

  it('shows one entry in full, and drops it', async () => {
    const show = await bosun(['dlq', 'show', ids.poison!]);
    expect(show.code, show.stderr).toBe(0);
    expect(JSON.parse(show.stdout)).toEqual({
      id: ids.poison,
      ...deadLetter('poison', '2026-01-01T00:00:03.000Z', { incidentId: 'bad one', input: { id: 'bad one' } }),
    });

    const missing = await bosun(['dlq', 'show', 'no-such-entry']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('no dead-letter entry no-such-entry');

    const extra = await dlq.add('failure', deadLetter('failure', new Date().toISOString()));
    const drop = await bosun(['dlq', 'drop', String(extra.id)]);
    expect(drop.code, drop.stderr).toBe(0);
    expect(await Job.fromId(dlq, String(extra.id))).toBeUndefined();
    const again = await bosun(['dlq', 'drop', String(extra.id)]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`no dead-letter entry ${String(extra.id)}`);
  });

  it('retries a stall by publishing the incident again as <id>-retry<n>, linked to the entry', async () => {
    const original = {
      id: 'inc-retry',
      source: 'test',
      reason: 'PodCrashLooping',
      summary: 'crash',
      severity: 'critical',
      labels: { service: 'checkout' },
      payload: { a: 1 },
    };
    await incidents.add('incident', original, { jobId: original.id });
    const entry = await dlq.add(
      'stall',
      deadLetter('stall', new Date().toISOString(), { runId: 'rorig', incidentId: original.id, agent: 'database' }),
      { jobId: 'stall-rorig-d0-database' },
    );
    const id = String(entry.id);

    const r = await bosun(['dlq', 'retry', id]);
    expect(r.code, r.stderr).toBe(0);
    const retried = await Job.fromId(incidents, 'inc-retry-retry1');
    expect(retried).toBeDefined();
    expect(retried!.name).toBe('incident');
    expect(retried!.data).toEqual({ ...original, id: 'inc-retry-retry1', labels: { service: 'checkout', bosunRetryOf: id } });
    const runId = runIdFor('inc-retry-retry1', retried!.timestamp);
    expect(r.stdout.trim()).toBe(runId);
    const data = await dataOf(id);
    expect(data.retriedAs).toMatchObject({ incidentId: 'inc-retry-retry1', runId });
    expect(Number.isNaN(Date.parse(data.retriedAs.at))).toBe(false);
    // The entry stays, and is marked.
    const list = await bosun(['dlq', 'list', '--kind', 'stall']);
    expect(list.stdout.split('\n').find((l) => l.startsWith(`${id} `))).toMatch(/\bretried\b/);

    const second = await bosun(['dlq', 'retry', id]);
    expect(second.code, second.stderr).toBe(0);
    expect(await Job.fromId(incidents, 'inc-retry-retry2')).toBeDefined();
    expect((await dataOf(id)).retriedAs.incidentId).toBe('inc-retry-retry2');
    // The original incident is untouched.
    expect((await Job.fromId(incidents, original.id))!.data).toEqual(original);
  });

  it('keeps a retry id within 128 characters', async () => {
    const longId = `long-${'y'.repeat(123)}`;
    await incidents.add(
      'incident',
      { id: longId, source: 'test', reason: 'OOMKilled', summary: 's', severity: 'warning' },
      { jobId: longId },
    );
    const entry = await dlq.add('failure', deadLetter('failure', new Date().toISOString(), { runId: 'rlong', incidentId: longId }));
    const r = await bosun(['dlq', 'retry', String(entry.id)]);
    expect(r.code, r.stderr).toBe(0);
    const newId = `${longId.slice(0, 128 - '-retry1'.length)}-retry1`;
    expect(newId).toHaveLength(128);
    expect(await Job.fromId(incidents, newId)).toBeDefined();
    expect((await dataOf(String(entry.id))).retriedAs.incidentId).toBe(newId);
  });

  it('refuses to retry poison and in-doubt entries', async () => {
    const poison = await bosun(['dlq', 'retry', ids.poison!]);
    expect(poison.code).toBe(2);
    expect(poison.stderr).toMatch(/invalid as it stands/);
    expect(poison.stderr).toContain('bosun publish');

    const key = 'rdlq-d0-kubernetes-s1-c0';
    const doubt = await dlq.add(
      'in-doubt',
      deadLetter('in-doubt', new Date().toISOString(), { input: { key, tool: 'demo__restart_pod', args: {} } }),
    );
    const r = await bosun(['dlq', 'retry', String(doubt.id)]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`bosun ack ${key} --retry`);
    expect((await dataOf(String(doubt.id))).retriedAs).toBeUndefined();

    const missing = await bosun(['dlq', 'retry', 'no-such-entry']);
    expect(missing.code).toBe(1);
  });
});

describe('bosun runs show', () => {
  const runId = 'rshow0000000000000001';
  const k8s = `${runId}-d0-kubernetes`;
  const db = `${runId}-d1-database`;
  const queued = `${runId}-d2-network`;

  beforeAll(async () => {
    const run = {
      v: 1,
      runId,
      incidentId: 'inc-show',
      startedAt: '2026-02-01T10:00:00.000Z',
      deadlineAt: '2026-02-01T10:10:00.000Z',
      jobId: 'inc-show',
      mode: 'route',
      phase: 'waiting',
      round: 0,
      messages: [],
      delegations: [
        { taskId: k8s, agent: 'kubernetes', round: 0, task: 'look at pods', deadlineAt: '2026-02-01T10:05:00.000Z' },
        {
          taskId: db,
          agent: 'database',
          round: 0,
          task: 'look at queries',
          result: { v: 1, taskId: db, agent: 'database', status: 'completed', output: { summary: 'ok' }, attempts: 1 },
        },
        { taskId: queued, agent: 'network', round: 0, task: 'look at the network' },
      ],
    };
    await ctx.redis.set(`${ctx.prefix}:ckpt:run:${runId}`, JSON.stringify(run));
    await ctx.redis.set(
      `${ctx.prefix}:ckpt:task:${k8s}`,
      JSON.stringify({
        v: 1,
        taskId: k8s,
        step: 3,
        toolRounds: 2,
        invalidOutputs: 0,
        askedToFinish: false,
        messages: [{ role: 'user', text: 'go' }],
        pending: { kind: 'tools', step: 3, keys: [`${k8s}-s3-c0`, `${k8s}-s3-c1`], at: '2026-02-01T10:01:00.000Z' },
      }),
    );
    await ctx.redis.hset(`${ctx.prefix}:toolcall:${k8s}-s1-c0`, {
      state: 'done',
      tool: 'demo__get_pods',
      args: '{"service":"checkout"}',
      result: JSON.stringify({
        v: 1,
        key: `${k8s}-s1-c0`,
        tool: 'demo__get_pods',
        status: 'ok',
        isError: false,
        text: 'pods',
        durationMs: 3,
      }),
    });
    await ctx.redis.hset(`${ctx.prefix}:toolcall:${k8s}-s3-c0`, {
      state: 'inflight',
      tool: 'demo__get_logs',
      args: '{"service":"checkout"}',
    });
    await ctx.redis.hset(`${ctx.prefix}:toolcall:${k8s}-s3-c1`, {
      state: 'in-doubt',
      tool: 'demo__restart_pod',
      args: JSON.stringify({ service: 'checkout', pod: 'checkout-1' }),
      runId,
      incidentId: 'inc-show',
      agent: 'kubernetes',
    });
    await ctx.redis.set(`${ctx.prefix}:ckpt:run:rcorrupt`, '{"v":1, not json');
  });

  it('shows the run, each delegation with its pending step and tool calls, and the calls in doubt', async () => {
    const r = await bosun(['runs', 'show', runId]);
    expect(r.code, r.stderr).toBe(0);
    const out = r.stdout;
    expect(out).toContain(`run ${runId}`);
    expect(out).toMatch(/phase:\s+waiting/);
    expect(out).toContain('2026-02-01T10:00:00.000Z');
    expect(out).toContain('2026-02-01T10:10:00.000Z');
    expect(out).toMatch(new RegExp(`kubernetes\\s+running\\s+${k8s}\\s+\\(step 3, 2 tool rounds\\)`));
    expect(out).toMatch(new RegExp(`database\\s+completed\\s+${db}`));
    expect(out).toMatch(new RegExp(`network\\s+queued\\s+${queued}`));
    expect(out).toContain(`last saved before tool calls at step 3: ${k8s}-s3-c0, ${k8s}-s3-c1`);
    expect(out).toMatch(new RegExp(`done\\s+${k8s}-s1-c0\\s+demo__get_pods ok`));
    expect(out).toMatch(new RegExp(`inflight\\s+${k8s}-s3-c0\\s+demo__get_logs`));
    const inDoubt = out.slice(out.indexOf('in doubt'));
    expect(inDoubt).toContain(`${k8s}-s3-c1  demo__restart_pod {"service":"checkout","pod":"checkout-1"}`);
    expect(inDoubt).not.toContain(`${k8s}-s3-c0`);

    const json = await bosun(['runs', 'show', runId, '--json']);
    expect(json.code, json.stderr).toBe(0);
    const view = JSON.parse(json.stdout) as Record<string, any>;
    expect(view).toMatchObject({ runId, phase: 'waiting', startedAt: '2026-02-01T10:00:00.000Z', deadlineAt: '2026-02-01T10:10:00.000Z' });
    expect(view.status).toBeUndefined();
    expect(view.delegations.map((d: any) => [d.agent, d.status])).toEqual([
      ['kubernetes', 'running'],
      ['database', 'completed'],
      ['network', 'queued'],
    ]);
    expect(view.delegations[0]).toMatchObject({
      step: 3,
      toolRounds: 2,
      pending: { kind: 'tools', step: 3, keys: [`${k8s}-s3-c0`, `${k8s}-s3-c1`] },
    });
    expect(view.delegations[0].toolCalls.map((c: any) => [c.key, c.state])).toEqual([
      [`${k8s}-s1-c0`, 'done'],
      [`${k8s}-s3-c0`, 'inflight'],
      [`${k8s}-s3-c1`, 'in-doubt'],
    ]);
    expect(view.inDoubt).toEqual([
      { key: `${k8s}-s3-c1`, agent: 'kubernetes', tool: 'demo__restart_pod', args: { service: 'checkout', pod: 'checkout-1' } },
    ]);
  });

  it('fails clearly on a missing or corrupt checkpoint', async () => {
    const missing = await bosun(['runs', 'show', 'rmissing']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`no run rmissing under BOSUN_PREFIX=${ctx.prefix}`);
    const corrupt = await bosun(['runs', 'show', 'rcorrupt']);
    expect(corrupt.code).toBe(1);
    expect(corrupt.stderr).toContain(`checkpoint ${ctx.prefix}:ckpt:run:rcorrupt is not valid JSON`);
    // `bosun runs` alone lists runs now; an unknown sub-command is still bad usage.
    const usage = await bosun(['runs', 'frob']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('unknown runs command "frob" (list, show)');
  });
});
