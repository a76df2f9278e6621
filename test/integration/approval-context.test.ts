import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCheckpointId, taskCheckpointId, type RunCheckpoint } from '@bosun/contract';
import { ApprovalReader, ApprovalStore, RedisCheckpointStore, keys, type Approval } from '@bosun/transport';
import { openContext, type TestContext } from '../helpers/index.js';

// The context read beside an approval (issue 23 item 3), against a real Redis: the run's other
// specialists derived from the run's checkpoint at read time (and an approval whose run
// checkpoint is gone or broken still reads), and who has looked at it, one entry per person,
// kept with the approval's TTL.

let ctx: TestContext;
let store: ApprovalStore;
let reader: ApprovalReader;
let checkpoints: RedisCheckpointStore;

beforeAll(async () => {
  ctx = await openContext('approval-context');
  store = new ApprovalStore({ redis: ctx.redis, prefix: ctx.prefix });
  reader = new ApprovalReader({ redis: ctx.redis, prefix: ctx.prefix });
  checkpoints = new RedisCheckpointStore({ redis: ctx.redis, prefix: ctx.prefix });
});
afterAll(async () => {
  await store?.close();
  await ctx?.close();
});

function seed(id: string, runId: string): Promise<Approval> {
  const now = Date.now();
  return store.request({
    id,
    runId,
    incidentId: 'inc-ctx',
    agent: 'kubernetes',
    taskId: `${runId}-kubernetes`,
    calls: [{ index: 0, tool: 'demo__rollback', args: { to: 'v41' }, needsApproval: true, key: `${runId}-kubernetes-s2-c0` }],
    reason: 'roll back',
    createdAt: new Date(now).toISOString(),
    timeoutAt: new Date(now + 300_000).toISOString(),
  });
}

function runCkpt(runId: string): RunCheckpoint {
  const part = (agent: string) => ({ taskId: `${runId}-${agent}`, agent, round: 0, task: 'look' });
  return {
    v: 1,
    runId,
    incidentId: 'inc-ctx',
    startedAt: new Date().toISOString(),
    deadlineAt: new Date(Date.now() + 600_000).toISOString(),
    jobId: 'inc-ctx',
    mode: 'route',
    phase: 'waiting',
    round: 0,
    messages: [],
    delegations: [
      part('kubernetes'),
      {
        ...part('database'),
        result: {
          v: 1,
          taskId: `${runId}-database`,
          agent: 'database',
          status: 'completed',
          output: null,
          outputIn: 'checkpoint',
          attempts: 1,
          reason: 'completed',
        },
      },
      part('network'),
    ],
  };
}

describe('ApprovalReader', () => {
  it('shows the run’s other specialists from its checkpoint, an output stored in a task checkpoint included', async () => {
    const runId = 'rctxrun00000000000001';
    const a = await seed('ap-ctx-1', runId);
    await checkpoints.save(runCheckpointId(runId), runCkpt(runId));
    await checkpoints.save(taskCheckpointId(`${runId}-database`), {
      v: 1,
      taskId: `${runId}-database`,
      step: 3,
      toolRounds: 2,
      invalidOutputs: 0,
      askedToFinish: false,
      messages: [{ role: 'user', text: 'look' }],
      result: {
        v: 1,
        taskId: `${runId}-database`,
        agent: 'database',
        status: 'completed',
        output: { summary: 'the pool is exhausted', password: 'hunter22' },
        attempts: 1,
      },
    });
    const view = await reader.view(a);
    expect(view.specialists).toEqual([
      { taskId: `${runId}-database`, agent: 'database', status: 'completed', reason: 'completed', finding: 'the pool is exhausted' },
      { taskId: `${runId}-network`, agent: 'network', status: 'queued' },
    ]);
    expect(view.progress.text).toBe('0 of 1');
    // A list reads the same, and records nobody.
    const [listed] = await reader.views([a]);
    expect(listed!.specialists).toEqual(view.specialists);
    expect(listed!.viewers).toBeUndefined();
  });

  it('reads an approval whose run checkpoint has expired, and names a run checkpoint that does not parse', async () => {
    const gone = await seed('ap-ctx-2', 'rctxrun00000000000002');
    const view = await reader.view(gone);
    expect(view.id).toBe('ap-ctx-2');
    expect(view.specialists).toBeUndefined();
    expect(view.specialistsProblem).toBeUndefined();

    const broken = await seed('ap-ctx-3', 'rctxrun00000000000003');
    await ctx.redis.set(keys.checkpoint(ctx.prefix, runCheckpointId('rctxrun00000000000003')), '{"v":1,"runId":3}');
    const bad = await reader.view(broken);
    expect(bad.specialists).toBeUndefined();
    expect(bad.specialistsProblem).toMatch(/checkpoint run:rctxrun00000000000003/);
    await ctx.redis.set(keys.checkpoint(ctx.prefix, runCheckpointId('rctxrun00000000000003')), 'not json');
    expect((await reader.view(broken)).specialistsProblem).toMatch(/not valid JSON/);
  });

  it('records each viewer once, at the latest time, with the approval’s TTL; nothing for an approval that is gone', async () => {
    const a = await seed('ap-ctx-4', 'rctxrun00000000000004');
    await reader.recordViewer(a.id, { name: 'alice', verified: true, path: 'console' }, new Date('2026-01-01T00:00:00.000Z'));
    await reader.recordViewer(a.id, { name: 'bob', verified: true, path: 'cli' }, new Date('2026-01-01T00:01:00.000Z'));
    const view = await reader.view(a, { name: 'Alice', verified: true, path: 'http' });
    expect(view.viewers).toHaveLength(2);
    expect(view.viewers![0]).toMatchObject({ name: 'Alice', path: 'http', verified: true });
    expect(Date.parse(view.viewers![0]!.at)).toBeGreaterThan(Date.parse('2026-01-02T00:00:00.000Z'));
    expect(view.viewers![1]).toEqual({ name: 'bob', verified: true, path: 'cli', at: '2026-01-01T00:01:00.000Z' });

    const ttl = await ctx.redis.pttl(keys.approvalViewers(ctx.prefix, a.id));
    const approvalTtl = await ctx.redis.pttl(keys.approval(ctx.prefix, a.id));
    expect(ttl).toBeGreaterThan(0);
    expect(Math.abs(ttl - approvalTtl)).toBeLessThan(5_000);

    await reader.recordViewer('ap-ctx-none', { name: 'alice', verified: true, path: 'cli' });
    expect(await ctx.redis.exists(keys.approvalViewers(ctx.prefix, 'ap-ctx-none'))).toBe(0);
  });
});
