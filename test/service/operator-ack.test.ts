import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Job, type Queue } from 'bullmq';
import { STALL_MARKER } from '@bosun/contract';
import { type TestContext } from '../helpers/index.js';
import { deadLetter, operatorFixture } from '../helpers/operator.js';
// The operator commands ack and stats, and every command on stored values that do not parse,
// against data seeded straight into Redis. Only `ack --retry` needs a cluster process: a real
// tool gateway (test/helpers/operator.ts).

let ctx: TestContext;
let dlq: Queue;
let callLog: string;
const { bosun, seedInDoubt, dataOf } = operatorFixture('operator-ack', { gateway: true }, (f) => {
  ({ ctx, dlq, callLog } = f);
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
