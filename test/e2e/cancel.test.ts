import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Job, Queue } from 'bullmq';
import { specialistQueue, type RunEvent } from '@bosun/contract';
import { ApprovalStore, type CancelOutcome, type RunSummary } from '@bosun/transport';
import { callLog, freePort, runCli, startClusterTest, waitUntil, type CallLog, type ClusterTest } from '../helpers/index.js';

// Run control with the services as separate processes: `bosun cancel` and `POST
// /runs/<runId>/cancel` on a run whose specialist is in a slow model call, one parked for an
// approval, one whose coordinator is routing and one not started yet; and `bosun runs list` /
// `GET /runs` with a status filter. The refusals (a finished or unknown run, a bad body or
// query: 409, 404, 400, 401, 405) need the coordinator alone: test/service/operator-api.test.ts.

const TOKEN = 'cancel-test-token';

let t: ClusterTest;
let base: string;
let toolLog: CallLog;
let approvals: ApprovalStore;
let tasks: Queue;

const bosun = (args: string[]) => runCli(t.env, args);

function post(path: string, body?: unknown, token: string | null = TOKEN): Promise<Response> {
  return fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token === null ? {} : { authorization: `Bearer ${token}` }) },
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
}

const get = (path: string) => fetch(`${base}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });

const ofRun = (runId: string, type: RunEvent['type']) => t.client.events.forRun(runId).filter((e) => e.type === type);

/** The task job's result, once the specialist has ended it. */
async function taskEnded(taskId: string): Promise<{ status: string; error?: string }> {
  await waitUntil(async () => (await tasks.getJobState(taskId)) === 'completed', 30_000, `task ${taskId} ended`);
  // Read once it is completed: a job read before its state (it completed in between) has no
  // return value yet (seen in CI as `null`).
  const job = (await Job.fromId(tasks, taskId)) as Job;
  return job.returnvalue as { status: string; error?: string };
}

beforeAll(async () => {
  const port = await freePort();
  t = await startClusterTest('cancel', (config, ctx) => {
    config.coordinator.http = { port, operatorToken: TOKEN };
    // One run at a time, so that a second incident waits, not started, behind a slow one.
    config.coordinator.concurrency = 1;
    config.mcpServers.demo.env = { DEMO_MCP_CALL_LOG: join(ctx.dir, 'calls.jsonl') };
    config.workers = { lockDurationMs: 3_000, stalledIntervalMs: 1_000, maxStalledCount: 2 };
  });
  await t.cluster.host('coordinator').waitForLine(/operator API listening/);
  base = `http://127.0.0.1:${port}`;
  toolLog = callLog(join(t.ctx.dir, 'calls.jsonl'));
  approvals = new ApprovalStore({ redis: t.ctx.redis, prefix: t.ctx.prefix });
  tasks = new Queue(specialistQueue('kubernetes'), { connection: t.ctx.redis, prefix: t.ctx.prefix });
});

afterAll(async () => {
  await tasks?.close();
  await approvals?.close();
  await t?.close();
});

const ids: Record<string, string> = {};

describe('bosun cancel and POST /runs/<runId>/cancel', () => {
  it('cancels a run whose specialist is in a slow model call: the run ends at once, and the specialist makes no tool call', async () => {
    const { job, runId } = await t.client.publish({
      id: 'slow-spec',
      source: 'test',
      reason: 'PodCrashLooping',
      summary: 'x',
      labels: { service: 'cancel-slow' },
      payload: { fake: { slowMs: { kubernetes: 8_000 } } },
    });
    ids.slow = runId;
    const started = await t.client.events.waitFor((e) => e.runId === runId && e.type === 'agent.started', 20_000, 'agent.started');
    const taskId = String(started.data.taskId);
    // Parked (co-located: its task runs in the run's pass, checkpointed as waiting).
    await t.cluster.untilTasksOut(t.ctx.redis, t.ctx.prefix, job, runId);
    const state = t.cluster.layout === 'split' ? 'parked' : 'active';

    const r = await bosun(['cancel', runId, '--reason', 'wrong incident', '--by', 'alice']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain(`cancelling run ${runId} (incident slow-spec, ${state}) by alice at `);
    expect(r.stdout).toMatch(new RegExp(`^run ${runId} cancelled by alice at \\S+: wrong incident; not finished: kubernetes\\n$`));

    const result = await t.client.result(job, 30_000);
    expect(result).toMatchObject({ status: 'cancelled', cancelled: { by: 'alice', reason: 'wrong incident' }, stalled: 1 });
    expect(result.specialists).toEqual([expect.objectContaining({ name: 'kubernetes', status: 'stalled' })]);
    expect(result.answer).toContain(`This run was CANCELLED by alice at ${result.cancelled!.at}: wrong incident`);
    expect(result.answer).toContain('Not finished: kubernetes.');
    const done = await t.client.events.waitFor((e) => e.runId === runId && e.type === 'run.completed', 5_000, 'run.completed');
    expect(done.data).toMatchObject({ status: 'cancelled', cancelled: { by: 'alice', reason: 'wrong incident' } });
    // Announced for the one part (twice when the cancel timer cut it as the specialist's own
    // cancelled report came in: docs/protocol.md), and counted once in the result (above).
    const stalled = ofRun(runId, 'agent.stalled');
    expect(stalled.length).toBeGreaterThanOrEqual(1);
    expect(new Set(stalled.map((e) => `${String(e.data.taskId)} ${String(e.data.kind)}`))).toEqual(new Set([`${taskId} cancelled`]));
    // The run's cancellation is on record. The task's own stop key is written only when the
    // cancel timer cut the part; a specialist that saw the run's cancellation first ended the
    // task by itself, and nothing is left to stop (seen in CI as 1 key of 2).
    expect(await t.ctx.redis.exists(`${t.ctx.prefix}:cancel:run:${runId}`)).toBe(1);

    // The run ended at once, long before the 8 s model call would have. The specialist's call is
    // cut by the task's stop signal, and the task stops before its first tool call. Which of the
    // two ends first is a race on a busy machine (both follow the cancel within moments), so only
    // the run's promptness is asserted.
    expect(Date.parse(result.finishedAt) - Date.parse(started.at)).toBeLessThan(8_000);
    if (t.cluster.layout === 'split') {
      expect(await taskEnded(taskId)).toMatchObject({ status: 'stalled', error: 'cancelled' });
      const taskJob = await Job.fromId(tasks, taskId);
      expect(taskJob!.finishedOn! - Date.parse(started.at)).toBeLessThan(8_000);
    } else {
      // A local task (no job): it ended in the run's pass, its result in its checkpoint.
      const ckpt = JSON.parse((await t.ctx.redis.get(`${t.ctx.prefix}:ckpt:task:${taskId}`))!) as { result?: unknown };
      expect(ckpt.result).toMatchObject({ status: 'stalled', error: 'cancelled' });
      expect(await tasks.getJob(taskId)).toBeUndefined();
    }
    expect(toolLog.calls().filter((c) => c.args.service === 'cancel-slow')).toEqual([]);
    expect(t.client.events.forRun(runId).filter((e) => e.type.startsWith('tool.'))).toEqual([]);
    // An operator's cancellation leaves nothing in the dead-letter inbox.
    expect(await t.client.deadLetters(runId)).toEqual([]);
  });

  it('cancels a run parked on an approval over HTTP: the approval is denied, the call never runs; cancelling again is fine', async () => {
    const restart = { tool: 'demo__restart_pod', args: { service: 'cancel-parked', pod: 'cancel-parked-1', reason: 'parked-1' } };
    const { job, runId } = await t.client.publish({
      id: 'parked-1',
      source: 'test',
      reason: 'PodCrashLooping',
      summary: 'x',
      payload: { fake: { calls: { kubernetes: [restart] } } },
    });
    ids.parked = runId;
    const requested = await t.client.events.waitFor(
      (e) => e.runId === runId && e.type === 'approval.requested',
      20_000,
      'approval.requested',
    );
    const approvalId = String(requested.data.approvalId);
    const taskId = String(requested.data.taskId);
    await waitUntil(async () => (await (await Job.fromId(tasks, taskId))?.getState()) === 'delayed', 10_000, 'the task parked');

    const parked = JSON.parse((await bosun(['runs', '--status', 'parked', '--json'])).stdout) as RunSummary[];
    expect(parked).toEqual([expect.objectContaining({ runId, incidentId: 'parked-1', state: 'parked', specialists: ['kubernetes'] })]);

    const r = await post(`/runs/${runId}/cancel`, { reason: 'maintenance is over', by: 'bob' });
    expect(r.status).toBe(202);
    const outcome = (await r.json()) as CancelOutcome;
    expect(outcome).toMatchObject({
      runId,
      incidentId: 'parked-1',
      state: 'parked',
      already: false,
      cancelled: { by: 'bob', reason: 'maintenance is over' },
    });

    const result = await t.client.result(job, 30_000);
    expect(result).toMatchObject({ status: 'cancelled', cancelled: { by: 'bob', reason: 'maintenance is over' } });
    expect(result.answer).toContain('Not finished: kubernetes.');
    // Nobody is left to approve work that will not be done, and the woken task stops.
    expect(await approvals.get(approvalId)).toMatchObject({
      status: 'denied',
      decidedBy: 'bob',
      denyReason: 'the run was cancelled: maintenance is over',
    });
    expect(await taskEnded(taskId)).toMatchObject({ status: 'stalled', error: 'cancelled' });
    expect(toolLog.count('restart_pod')).toBe(0);

    const again = await post(`/runs/${runId}/cancel`, { reason: 'twice', by: 'carol' });
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({
      already: true,
      state: 'cancelled',
      cancelled: { by: 'bob', reason: 'maintenance is over' },
    });
    const cli = await bosun(['cancel', runId]);
    expect(cli.code, cli.stderr).toBe(0);
    expect(cli.stdout).toContain(`run ${runId} (incident parked-1) was already cancelled by bob at `);
  });

  it('cancels a run whose coordinator is still routing (no child job is made) and one not started yet', async () => {
    const routing = await t.client.publish({
      id: 'slow-coord',
      source: 'test',
      reason: 'PodCrashLooping',
      summary: 'x',
      payload: { fake: { slowMs: { coordinator: 15_000 } } },
    });
    ids.routing = routing.runId;
    await t.client.events.waitFor((e) => e.runId === routing.runId && e.type === 'run.started', 20_000, 'run.started');
    // The coordinator takes one run at a time: this one waits behind the first.
    const waiting = await t.client.publish({ id: 'not-started', source: 'test', reason: 'PodCrashLooping', summary: 'x' });
    ids.waiting = waiting.runId;
    expect(await waiting.job.getState()).toBe('waiting');
    const listed = async (status: string) =>
      ((await (await get(`/runs?status=${status}`)).json()) as RunSummary[]).map((r) => [r.runId, r.state]);
    expect(await listed('waiting')).toEqual([[waiting.runId, 'waiting']]);
    expect(await listed('active')).toEqual([[routing.runId, 'active']]);

    const w = await post(`/runs/${waiting.runId}/cancel`, { reason: 'duplicate' });
    expect(w.status).toBe(202);
    expect(await w.json()).toMatchObject({ state: 'waiting', cancelled: { by: 'http-operator', reason: 'duplicate' } });
    expect(await (await get(`/runs/${waiting.runId}`)).json()).toMatchObject({
      state: 'waiting',
      cancelRequested: { by: 'http-operator', reason: 'duplicate' },
    });
    // Not waiting for the end: the routing run ends only after its model call.
    const r = await bosun(['cancel', routing.runId, '--wait', '0']);
    expect(r.code, r.stdout + r.stderr).toBe(3);
    expect(r.stderr).toContain(`cancelling run ${routing.runId} (incident slow-coord, active) by `);
    expect(r.stdout).toContain('the cancellation is recorded; the run has not ended yet');

    const first = await t.client.result(routing.job, 30_000);
    expect(first).toMatchObject({ status: 'cancelled', cancelled: { reason: 'no reason given' } });
    expect(first.answer).toContain('Not finished: kubernetes.');
    expect(ofRun(routing.runId, 'agent.delegated')).toEqual([]);
    expect(await Job.fromId(tasks, `${routing.runId}-d0-kubernetes`)).toBeUndefined();

    const second = await t.client.result(waiting.job, 30_000);
    expect(second).toMatchObject({
      status: 'cancelled',
      specialists: [],
      stalled: 0,
      cancelled: { by: 'http-operator', reason: 'duplicate' },
    });
    expect(second.answer).toContain('It was cancelled before anything was delegated: nothing was checked.');
    expect(ofRun(waiting.runId, 'model.called')).toEqual([]);
  });
});

describe('bosun runs list and GET /runs', () => {
  it('lists runs newest first, filtered by status', async () => {
    const { job, runId } = await t.client.publish({
      id: 'done-1',
      source: 'test',
      reason: 'HighLatency',
      summary: 'slow',
      labels: { service: 'payments' },
    });
    ids.done = runId;
    expect((await t.client.result(job)).status).toBe('completed');
    const cancelled = JSON.parse((await bosun(['runs', 'list', '--status', 'cancelled', '--json'])).stdout) as RunSummary[];
    expect(cancelled.map((r) => r.runId)).toEqual([ids.waiting, ids.routing, ids.parked, ids.slow]);
    expect(cancelled.every((r) => r.state === 'cancelled' && r.finishedAt !== undefined)).toBe(true);
    const completed = JSON.parse((await bosun(['runs', '--status', 'completed', '--json'])).stdout) as RunSummary[];
    expect(completed).toEqual([
      expect.objectContaining({ runId: ids.done, incidentId: 'done-1', state: 'completed', specialists: ['database'] }),
    ]);

    const table = await bosun(['runs', '--limit', '2']);
    expect(table.code, table.stderr).toBe(0);
    const lines = table.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^run\s+incident\s+state\s+age\s+specialists$/);
    expect(lines.slice(1).map((l) => l.split(/\s+/).slice(0, 3))).toEqual([
      [ids.done, 'done-1', 'completed'],
      [ids.waiting, 'not-started', 'cancelled'],
    ]);

    const api = await get('/runs?status=cancelled&limit=2');
    expect(api.status).toBe(200);
    expect(((await api.json()) as RunSummary[]).map((r) => r.runId)).toEqual([ids.waiting, ids.routing]);
    const one = await get(`/runs/${ids.parked}`);
    expect(await one.json()).toMatchObject({ runId: ids.parked, incidentId: 'parked-1', state: 'cancelled', specialists: ['kubernetes'] });
  });
});
