import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Job, Queue } from 'bullmq';
import { DEAD_LETTER_QUEUE, INCIDENTS_QUEUE, STALL_MARKER, runIdFor } from '@bosun/contract';
import { demoConfig, openContext, runCli, startService, writeConfig, type ServiceProcess, type TestContext } from '../helpers/index.js';

// The operator commands (dlq list/show/retry/drop, runs show, ack, stats) against data seeded
// straight into Redis. Only `ack --retry` needs a cluster process: a real tool gateway.

let ctx: TestContext;
let gateway: ServiceProcess | undefined;
let dlq: Queue;
let incidents: Queue;
let callLog: string;

/** Runs the bosun CLI with the context's environment and `extraEnv`. */
const bosun = (args: string[], extraEnv: Record<string, string> = {}, timeoutMs?: number) =>
  runCli({ ...ctx.env, ...extraEnv }, args, undefined, timeoutMs);

function deadLetter(kind: string, at: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { v: 1, kind, marker: STALL_MARKER, at, reason: `${kind} happened\nover two lines`, ...extra };
}

async function seedInDoubt(key: string, tool: string, args: Record<string, unknown>, agent = 'kubernetes'): Promise<string> {
  await ctx.redis.hset(`${ctx.prefix}:toolcall:${key}`, {
    state: 'in-doubt',
    tool,
    args: JSON.stringify(args),
    runId: 'rindoubt0000000000000',
    incidentId: 'inc-in-doubt',
    agent,
    startedAt: new Date().toISOString(),
    readOnly: 'false',
  });
  const job = await dlq.add(
    'in-doubt',
    deadLetter('in-doubt', new Date().toISOString(), {
      runId: 'rindoubt0000000000000',
      incidentId: 'inc-in-doubt',
      agent,
      input: { key, tool, args },
    }),
    { jobId: `in-doubt-${key}` },
  );
  return String(job.id);
}

async function dataOf(id: string): Promise<Record<string, any>> {
  const job = await Job.fromId(dlq, id);
  expect(job, `dead letter ${id}`).toBeDefined();
  return job!.data as Record<string, any>;
}

beforeAll(async () => {
  ctx = await openContext('operator');
  dlq = new Queue(DEAD_LETTER_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
  incidents = new Queue(INCIDENTS_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
  callLog = join(ctx.dir, 'calls.jsonl');
  const cfg = demoConfig();
  // ack --retry re-sends a call that was already running: no approval gate here.
  cfg.mcpServers.demo.tools = {};
  cfg.mcpServers.demo.env = { DEMO_MCP_CALL_LOG: callLog };
  gateway = startService('gateway', { ...ctx.env, BOSUN_CONFIG: writeConfig(ctx, cfg) });
  await gateway.ready();
});

afterAll(async () => {
  await gateway?.stop();
  await dlq?.close();
  await incidents?.close();
  await ctx?.close();
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

describe('bosun ack', () => {
  it('--done records that the call took effect and annotates the dead letter', async () => {
    const key = 'rack00000000000000001-d0-kubernetes-s2-c0';
    const dl = await seedInDoubt(key, 'demo__restart_pod', { service: 'checkout', pod: 'p1' });
    const r = await bosun(['ack', key, '--done', '--by', 'alice']);
    expect(r.code, r.stderr).toBe(0);
    const record = await ctx.redis.hgetall(`${ctx.prefix}:toolcall:${key}`);
    expect(record.state).toBe('done');
    expect(JSON.parse(record.result!)).toEqual({
      v: 1,
      key,
      tool: 'demo__restart_pod',
      status: 'ok',
      isError: false,
      text: 'Resolved by an operator: the call took effect.',
      durationMs: 0,
    });
    expect(JSON.parse(record.resolution!)).toMatchObject({ action: 'done', by: 'alice' });
    expect((await dataOf(dl)).resolution).toMatchObject({ action: 'done', by: 'alice' });
    const list = await bosun(['dlq', 'list', '--kind', 'in-doubt']);
    expect(list.stdout.split('\n').find((l) => l.startsWith(`${dl} `))).toMatch(/\bresolved\b/);

    // Not in doubt any more.
    const again = await bosun(['ack', key, '--skip']);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('is not in doubt: its state is "done"');
  });

  it('--skip records the call as not executed, by $USER when --by is absent', async () => {
    const key = 'rack00000000000000002-d0-kubernetes-s2-c0';
    const dl = await seedInDoubt(key, 'demo__rollback_deployment', { service: 'checkout' });
    const r = await bosun(['ack', key, '--skip'], { USER: 'bob' });
    expect(r.code, r.stderr).toBe(0);
    const record = await ctx.redis.hgetall(`${ctx.prefix}:toolcall:${key}`);
    expect(record.state).toBe('done');
    expect(JSON.parse(record.result!)).toEqual({
      v: 1,
      key,
      tool: 'demo__rollback_deployment',
      status: 'error',
      isError: true,
      text: '',
      error: 'Resolved by an operator: treated as not executed.',
      code: 'refused',
      durationMs: 0,
    });
    expect((await dataOf(dl)).resolution).toMatchObject({ action: 'skip', by: 'bob' });
  });

  it('refuses a key that is not in doubt, and bad usage', async () => {
    const key = 'rack00000000000000003-d0-kubernetes-s1-c0';
    await ctx.redis.hset(`${ctx.prefix}:toolcall:${key}`, { state: 'inflight', tool: 'demo__get_pods', args: '{}' });
    const r = await bosun(['ack', key, '--done']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('is not in doubt: its state is "inflight"');
    expect(await ctx.redis.hget(`${ctx.prefix}:toolcall:${key}`, 'state')).toBe('inflight');

    const none = await bosun(['ack', 'no-such-key', '--done']);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('no tool call no-such-key');

    expect((await bosun(['ack', key])).code).toBe(2);
    expect((await bosun(['ack', key, '--done', '--skip'])).code).toBe(2);
  });

  it('acknowledges a call in doubt, later seen done, with --done (its recorded result stays), and refuses --retry and --skip', async () => {
    const key = 'rack00000000000000011-d0-kubernetes-s1-c0';
    const dl = await seedInDoubt(key, 'demo__restart_pod', { service: 'checkout', pod: 'p1' });
    const result = { v: 1, key, tool: 'demo__restart_pod', status: 'ok', isError: false, text: 'restarted', durationMs: 5 };
    // The gateway that ran it recorded its outcome after another had declared it in doubt.
    await ctx.redis.hset(`${ctx.prefix}:toolcall:${key}`, {
      state: 'done',
      result: JSON.stringify(result),
      inDoubtAt: '2026-01-01T00:00:01.000Z',
      seenDoneAt: '2026-01-01T00:00:03.000Z',
    });
    for (const action of ['--retry', '--skip']) {
      const refused = await bosun(['ack', key, action]);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(
        `tool call ${key} was declared in doubt, and its outcome was recorded after all (ok at 2026-01-01T00:00:03.000Z): its outcome is known; acknowledge it with --done`,
      );
    }
    const r = await bosun(['ack', key, '--done', '--by', 'alice']);
    expect(r.code, r.stderr).toBe(0);
    const record = await ctx.redis.hgetall(`${ctx.prefix}:toolcall:${key}`);
    expect(JSON.parse(record.result!)).toEqual(result);
    expect(JSON.parse(record.resolution!)).toMatchObject({ action: 'done', by: 'alice' });
    expect((await dataOf(dl)).resolution).toMatchObject({ action: 'done', by: 'alice' });
    const again = await bosun(['ack', key, '--done']);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('was acknowledged already by alice');
  });

  it('--retry sends the call once more through the gateway, which runs it exactly once', async () => {
    const key = 'rack00000000000000004-d0-kubernetes-s3-c0';
    const args = { service: 'checkout', pod: 'checkout-7c9d6f8b4-9mz4q' };
    const dl = await seedInDoubt(key, 'demo__restart_pod', args);
    const r = await bosun(['ack', key, '--retry', '--by', 'carol'], {}, 150_000);
    expect(r.code, r.stderr).toBe(0);
    const printed = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(printed).toMatchObject({ key, tool: 'demo__restart_pod', status: 'ok', isError: false });

    expect(existsSync(callLog)).toBe(true);
    const calls = readFileSync(callLog, 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as { tool: string; args: unknown });
    const restarts = calls.filter((c) => c.tool === 'restart_pod');
    expect(restarts).toHaveLength(1);
    expect(restarts[0]!.args).toEqual(args);

    const record = await ctx.redis.hgetall(`${ctx.prefix}:toolcall:${key}`);
    expect(record.state).toBe('done');
    expect(JSON.parse(record.result!)).toMatchObject({ key, status: 'ok', isError: false });
    expect((await dataOf(dl)).resolution).toMatchObject({ action: 'retry', by: 'carol' });

    const again = await bosun(['ack', key, '--retry']);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('is not in doubt: its state is "done"');
    expect(
      readFileSync(callLog, 'utf8')
        .split('\n')
        .filter((l) => l.includes('"restart_pod"')),
    ).toHaveLength(1);
  }, 180_000);
});

describe('bosun stats', () => {
  it('prints the degraded-result counters and dropped events', async () => {
    await ctx.redis.hset(`${ctx.prefix}:stats:degraded`, { 'kubernetes:stall': '3', 'database:timeout': '1' });
    await ctx.redis.hset(`${ctx.prefix}:stats:events`, { dropped: '2' });
    const r = await bosun(['stats']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/kubernetes\s+stall\s+3/);
    expect(r.stdout).toMatch(/database\s+timeout\s+1/);
    expect(r.stdout).toContain('events dropped: 2');
    const json = await bosun(['stats', '--json']);
    expect(JSON.parse(json.stdout)).toEqual({
      degraded: [
        { agent: 'kubernetes', kind: 'stall', count: 3 },
        { agent: 'database', kind: 'timeout', count: 1 },
      ],
      dropped: 2,
    });
  });
});

describe('stored values that do not parse', () => {
  it('dlq list and dlq show name the bad fields of an entry (exit 1); the other entries are still listed', async () => {
    const bad = await dlq.add(
      'stall',
      { v: 1, kind: 'stalled', marker: STALL_MARKER, at: new Date().toISOString() },
      { jobId: 'bad-entry' },
    );
    const good = await dlq.add('failure', deadLetter('failure', new Date().toISOString()), { jobId: 'good-entry' });
    const list = await bosun(['dlq', 'list', '--json']);
    expect(list.code).toBe(1);
    expect(list.stderr).toMatch(/bosun: dead-letter entry bad-entry does not parse: kind: .*; reason: .*; it is not listed/);
    const listed = JSON.parse(list.stdout) as { id: string }[];
    expect(listed.map((e) => e.id)).toContain(good.id);
    expect(listed.map((e) => e.id)).not.toContain('bad-entry');

    const show = await bosun(['dlq', 'show', 'bad-entry']);
    expect(show.code).toBe(1);
    expect(JSON.parse(show.stdout)).toEqual({ id: 'bad-entry', data: bad.data });
    expect(show.stderr).toMatch(/^bosun: dead-letter entry bad-entry does not parse: kind: /);
    const retry = await bosun(['dlq', 'retry', 'bad-entry']);
    expect(retry.code).toBe(1);
    expect(retry.stderr).toMatch(/^bosun: dead-letter entry bad-entry does not parse: kind: /);
    // Dropping needs nothing of it.
    expect((await bosun(['dlq', 'drop', 'bad-entry'])).code).toBe(0);
    await good.remove();
  });

  it('runs show names a task checkpoint and a tool-call record that do not parse (exit 1), and shows the rest', async () => {
    const runId = 'rbadparts000000000001';
    const task = `${runId}-d0-kubernetes`;
    const run = {
      v: 1,
      runId,
      incidentId: 'inc-bad',
      startedAt: '2026-02-01T10:00:00.000Z',
      deadlineAt: '2026-02-01T10:10:00.000Z',
      jobId: 'inc-bad',
      mode: 'route',
      phase: 'waiting',
      round: 0,
      messages: [],
      delegations: [{ taskId: task, agent: 'kubernetes', round: 0, task: 'look' }],
    };
    await ctx.redis.set(`${ctx.prefix}:ckpt:run:${runId}`, JSON.stringify(run));
    const ckpt = {
      v: 1,
      taskId: task,
      step: 'three',
      toolRounds: 0,
      invalidOutputs: 0,
      askedToFinish: false,
      messages: [{ role: 'user', text: 'go' }],
    };
    await ctx.redis.set(`${ctx.prefix}:ckpt:task:${task}`, JSON.stringify(ckpt));
    await ctx.redis.hset(`${ctx.prefix}:toolcall:${task}-s1-c0`, { state: 'done', tool: 'demo__get_pods', args: '{}', result: '{"v":1' });
    await ctx.redis.hset(`${ctx.prefix}:toolcall:${task}-s1-c1`, { state: 'in-doubt', tool: 'demo__restart_pod', args: '{"pod":"p"}' });

    const r = await bosun(['runs', 'show', runId, '--json']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`bosun: checkpoint task:${task} cannot be used: step: `);
    expect(r.stderr).toContain(`bosun: invalid tool call record ${task}-s1-c0: result: is not valid JSON`);
    const view = JSON.parse(r.stdout) as Record<string, any>;
    expect(view.delegations[0]).toMatchObject({ agent: 'kubernetes', status: 'unknown' });
    expect(view.delegations[0].toolCalls.map((c: any) => [c.key, c.state])).toEqual([
      [`${task}-s1-c0`, 'unreadable'],
      [`${task}-s1-c1`, 'in-doubt'],
    ]);
    expect(view.inDoubt).toEqual([{ key: `${task}-s1-c1`, agent: 'kubernetes', tool: 'demo__restart_pod', args: { pod: 'p' } }]);
  });

  it('runs show names the bad fields of a run checkpoint (exit 1)', async () => {
    await ctx.redis.set(`${ctx.prefix}:ckpt:run:rbadphase`, JSON.stringify({ v: 1, runId: 'rbadphase', phase: 'sleeping' }));
    const r = await bosun(['runs', 'show', 'rbadphase']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`^bosun: checkpoint ${ctx.prefix}:ckpt:run:rbadphase does not parse: incidentId: .*; phase: `));
  });

  it('audit names an entry that does not parse (exit 1) and prints the others', async () => {
    const key = `${ctx.prefix}:audit`;
    const fields = (runId: string, status: string, args: string) =>
      ['at', new Date().toISOString(), 'key', `${runId}-k`, 'runId', runId, 'incidentId', 'i', 'agent', 'a', 'tool', 't'].concat([
        'args',
        args,
        'approvalId',
        '',
        'approver',
        '',
        'status',
        status,
      ]);
    await ctx.redis.xadd(key, '*', ...fields('raudit-good', 'ok', '{"n":1}'));
    const badId = await ctx.redis.xadd(key, '*', ...fields('raudit-bad', 'perhaps', '{n'));
    const r = await bosun(['audit', '--json']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`bosun: audit entry ${badId} does not parse: args: is not valid JSON; status: `);
    // The gateway of this file audits its calls too (ack --retry): only these two entries matter here.
    const runs = (JSON.parse(r.stdout) as { runId: string }[]).map((e) => e.runId);
    expect(runs).toContain('raudit-good');
    expect(runs).not.toContain('raudit-bad');
  });

  it('approvals show names the bad field of a stored approval (exit 1)', async () => {
    await ctx.redis.set(`${ctx.prefix}:approval:appr-bad`, JSON.stringify({ id: 'appr-bad', status: 'pending', calls: 'none' }));
    const r = await bosun(['approvals', 'show', 'appr-bad']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^bosun: approval appr-bad does not parse: runId: .*; calls: /);
  });

  it('ack resolves the call, and names its dead letter when that does not parse (exit 1)', async () => {
    const key = 'rack00000000000000009-d0-kubernetes-s1-c0';
    const dl = await seedInDoubt(key, 'demo__restart_pod', { pod: 'p9' });
    const job = await Job.fromId(dlq, dl);
    await job!.updateData({ ...job!.data, at: 42 });
    const r = await bosun(['ack', key, '--done']);
    expect(r.code).toBe(1);
    expect(await ctx.redis.hget(`${ctx.prefix}:toolcall:${key}`, 'state')).toBe('done');
    expect(r.stdout).toContain(`tool call ${key} resolved: took effect`);
    expect(r.stderr).toContain(`bosun: dead-letter entry ${dl} does not parse: at: `);
    expect((await dataOf(dl)).resolution).toBeUndefined();
  });
});
