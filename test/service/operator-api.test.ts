import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Job, Queue } from 'bullmq';
import { ApprovalStore, RedisCheckpointStore, type Approval } from '@bosun/transport';
import { runCheckpointId, type ApprovalView, type RunCheckpoint } from '@bosun/contract';
import {
  EventCollector,
  demoConfig,
  freePort,
  openClient,
  openContext,
  runCli,
  startService,
  wholeOutput,
  writeConfig,
  type Client,
  type ServiceProcess,
  type TestContext,
} from '../helpers/index.js';

// The operator's surface of one coordinator process, no cluster: approvals of tool calls over the
// CLI (`bosun approvals`, `approve`, `deny`) and the HTTP API (`GET /approvals`, `POST
// /approvals/<id>`), against approvals seeded straight into Redis with the ApprovalStore the
// services use; `bosun audit`; and run control's refusals (`bosun cancel` and `POST
// /runs/<runId>/cancel` of a finished or unknown run, a bad body; `GET /runs` with a bad query).
// Cancelling runs that are under way needs specialists: test/e2e/cancel.test.ts.

const TOKEN = 'test-token-123';
const PARKED_QUEUE = 'specialist-kubernetes';

let ctx: TestContext;
let store: ApprovalStore;
let parked: Queue;
let collector: EventCollector;
let coordinator: ServiceProcess | undefined;

/** Runs the bosun CLI with the context's environment and `extraEnv`. */
const bosun = (args: string[], extraEnv: Record<string, string> = {}, timeoutMs?: number) =>
  runCli({ ...ctx.env, ...extraEnv }, args, undefined, timeoutMs);

/** A pending approval of two proposed calls: [0] reads (no approval needed), [1] restarts (needs approval). */
let seededAt = 0;

async function seed(id: string, runId: string): Promise<Approval> {
  const now = Date.now();
  seededAt = now;
  return store.request({
    id,
    runId,
    incidentId: `inc-${id}`,
    agent: 'kubernetes',
    taskId: `${runId}-kubernetes-1`,
    calls: [
      { index: 0, tool: 'demo__get_pods', args: { namespace: 'payments' }, needsApproval: false, key: `${runId}-kubernetes-1-s1-c0` },
      {
        index: 1,
        tool: 'demo__restart_pod',
        args: { name: 'payments-7f9c', namespace: 'payments' },
        needsApproval: true,
        key: `${runId}-kubernetes-1-s1-c1`,
      },
    ],
    reason: 'The pod is crash-looping on a stale config;\nrestarting it picks up the fixed one.',
    incident: { id: `inc-${id}`, title: 'payments pods crash-looping', severity: 'critical', service: 'payments', source: 'am' },
    steps: [{ tool: 'demo__get_logs', args: { pod: 'payments-7f9c' }, result: 'config v12 not found' }],
    createdAt: new Date(now - 90_000).toISOString(),
    timeoutAt: new Date(now + 300_000).toISOString(),
  });
}

/**
 * The run's checkpoint as the coordinator keeps it: the asking kubernetes task still running,
 * and a database specialist that has finished with its finding.
 */
async function seedRun(runId: string): Promise<void> {
  const checkpoint: RunCheckpoint = {
    v: 1,
    runId,
    incidentId: `inc-${runId}`,
    startedAt: new Date().toISOString(),
    deadlineAt: new Date(Date.now() + 600_000).toISOString(),
    jobId: `inc-${runId}`,
    mode: 'route',
    phase: 'waiting',
    round: 0,
    messages: [],
    delegations: [
      { taskId: `${runId}-kubernetes-1`, agent: 'kubernetes', round: 0, task: 'look' },
      {
        taskId: `${runId}-database-1`,
        agent: 'database',
        round: 0,
        task: 'look',
        result: {
          v: 1,
          taskId: `${runId}-database-1`,
          agent: 'database',
          status: 'completed',
          output: { summary: 'the config store lost v12', token: 'tok-secret-1' },
          attempts: 1,
        },
      },
    ],
  };
  await new RedisCheckpointStore({ redis: ctx.redis, prefix: ctx.prefix }).save(runCheckpointId(runId), checkpoint);
}

/** Parks a task job for an approval: delayed until (far past) the approval's timeout. */
async function park(approvalId: string, jobId: string): Promise<Job> {
  const job = await parked.add('task', { approvalId }, { jobId, delay: 600_000 });
  await store.parkedAt(approvalId, PARKED_QUEUE, jobId);
  expect(await job.getState()).toBe('delayed');
  return job;
}

beforeAll(async () => {
  ctx = await openContext('approvals');
  store = new ApprovalStore({ redis: ctx.redis, prefix: ctx.prefix });
  parked = new Queue(PARKED_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
  collector = new EventCollector(ctx.nats, ctx.prefix);
});

afterAll(async () => {
  await coordinator?.stop();
  collector?.close();
  await store?.close();
  await parked?.close();
  await ctx?.close();
});

describe('bosun approvals, approve, deny', () => {
  const runId = 'rcliapproval000000001';
  const id = 'appr-cli-1';
  let job: Job;

  beforeAll(async () => {
    await seed(id, runId);
    await seedRun(runId);
    job = await park(id, 'task-cli-1');
  });

  it('lists the pending approval with its calls, marking those that need approval', async () => {
    const r = await bosun(['approvals', 'list']);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.split('\n');
    const head = lines.find((l) => l.startsWith(`${id} `));
    expect(head, r.stdout).toBeDefined();
    // Created 90 s before it was seeded: the age shown lies between that and now (a loaded
    // machine may take seconds between the seed and the listing).
    const [, m, sec] = /age (\d+)m(\d+)s/.exec(head!) ?? [];
    const age = Number(m) * 60 + Number(sec);
    expect(age).toBeGreaterThanOrEqual(90);
    expect(age).toBeLessThanOrEqual(90 + Math.ceil((Date.now() - seededAt) / 1000));
    expect(head).toContain(`run ${runId}`);
    expect(head).toContain('agent kubernetes');
    expect(head).toMatch(/times out \d{4}-\d\d-\d\dT/);
    expect(r.stdout).toContain('reason: The pod is crash-looping on a stale config; restarting it picks up the fixed one.');
    // The context a person decides from: the incident and the run so far.
    expect(r.stdout).toContain(`incident: inc-${id} [critical] payments pods crash-looping  service payments  source am`);
    expect(r.stdout).toContain('      demo__get_logs {"pod":"payments-7f9c"} -> config v12 not found');
    // The run's other specialists, from the run's checkpoint as it is now.
    expect(r.stdout).toContain('    other specialists:\n      database completed: the config store lost v12\n');
    const call0 = lines.find((l) => l.includes('[0] demo__get_pods'));
    const call1 = lines.find((l) => l.includes('[1] demo__restart_pod'));
    expect(call0).toContain('{"namespace":"payments"}');
    expect(call0).not.toContain('needs approval');
    expect(call1).toContain('"name":"payments-7f9c"');
    expect(call1).toContain('needs approval');

    const bare = await bosun(['approvals']);
    expect(bare.code).toBe(0);
    const noAge = (l: string | undefined) => l?.replace(/age \S+/, 'age ?');
    expect(noAge(bare.stdout.split('\n')[0])).toBe(noAge(lines[0]));

    const json = await bosun(['approvals', 'list', '--json']);
    expect(json.code, json.stderr).toBe(0);
    const list = JSON.parse(json.stdout) as Approval[];
    expect(list.map((a) => a.id)).toEqual([id]);
    expect(list[0]!.calls).toHaveLength(2);

    expect(list[0]).toMatchObject({ progress: { text: '0 of 1' }, decisions: [] });
    expect((list[0] as ApprovalView).specialists).toEqual([
      { taskId: `${runId}-database-1`, agent: 'database', status: 'completed', finding: 'the config store lost v12' },
    ]);
    expect(json.stdout).not.toContain('tok-secret-1');

    const show = await bosun(['approvals', 'show', id]);
    expect(show.code, show.stderr).toBe(0);
    expect(JSON.parse(show.stdout)).toMatchObject({ status: 'pending', progress: { approvals: 0, required: 1 } });
    const missing = await bosun(['approvals', 'show', 'appr-nope']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('no approval appr-nope');
  });

  it('refuses --only naming a call that needs no approval (exit 2), and bad --only syntax', async () => {
    const r = await bosun(['approve', id, '--only', '0']);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/do not need approval: 0/);
    const syntax = await bosun(['approve', id, '--only', 'one']);
    expect(syntax.code).toBe(2);
    expect((await store.get(id))!.status).toBe('pending');
    expect(await job.getState()).toBe('delayed');
  });

  it('approves: records who decided, empties the pending list, publishes approval.resolved and wakes the task', async () => {
    const r = await bosun(['approve', id, '--only', '1', '--by', 'alice']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`approval ${id} approved \\(calls 1\\) by alice`));
    expect(r.stderr).not.toContain('could not be published');

    const a = (await store.get(id))!;
    expect(a.status).toBe('approved');
    expect(a.approved).toEqual([1]);
    expect(a.decidedBy).toBe('alice');
    expect(Date.parse(a.decidedAt!)).toBeGreaterThan(Date.now() - 60_000);
    expect(await store.pending()).toEqual([]);
    const list = await bosun(['approvals', 'list']);
    expect(list.stdout).toContain('no pending approvals');

    const e = await collector.waitFor((x) => x.type === 'approval.resolved' && x.runId === runId, 10_000, 'approval.resolved');
    expect(e.agent).toBe('kubernetes');
    expect(e.incidentId).toBe(`inc-${id}`);
    expect(e.data).toMatchObject({ approvalId: id, status: 'approved', approved: [1], decidedBy: 'alice', decidedAt: a.decidedAt });

    // The parked task job was promoted out of its delay.
    expect(['waiting', 'wait', 'prioritized']).toContain(await job.getState());
  });

  it('refuses a second decision (exit 1), naming who decided', async () => {
    const again = await bosun(['approve', id]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('already decided');
    expect(again.stderr).toContain('alice');
    const deny = await bosun(['deny', id, '--reason', 'too late']);
    expect(deny.code).toBe(1);
    expect(deny.stderr).toContain('by alice');
    // One decision, one event (the refused ones publish nothing).
    expect(collector.forRun(runId).filter((e) => e.type === 'approval.resolved')).toHaveLength(1);
    const none = await bosun(['approve', 'appr-nope']);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('no approval appr-nope');
  });

  it('deny needs --reason (exit 2), and then records the denial', async () => {
    const id2 = 'appr-cli-2';
    await seed(id2, 'rcliapproval000000002');
    const noReason = await bosun(['deny', id2]);
    expect(noReason.code).toBe(2);
    expect(noReason.stderr).toContain('--reason');
    const blank = await bosun(['deny', id2, '--reason', '  ']);
    expect(blank.code).toBe(2);
    expect((await store.get(id2))!.status).toBe('pending');

    const r = await bosun(['deny', id2, '--reason', 'not during business hours'], { USER: 'bob' });
    expect(r.code, r.stderr).toBe(0);
    const a = (await store.get(id2))!;
    expect(a).toMatchObject({ status: 'denied', denyReason: 'not during business hours', decidedBy: 'bob' });
    expect(a.approved).toBeUndefined();
    const e = await collector.waitFor(
      (x) => x.type === 'approval.resolved' && x.runId === 'rcliapproval000000002',
      10_000,
      'approval.resolved (denied)',
    );
    expect(e.data).toMatchObject({ approvalId: id2, status: 'denied', denyReason: 'not during business hours', decidedBy: 'bob' });
  });
});

describe('bosun audit', () => {
  it('reads the audit stream newest first, filtered by run', async () => {
    const key = `${ctx.prefix}:audit`;
    const entry = (runId: string, tool: string, status: string, approvalId = '', approver = '') => [
      'at',
      new Date().toISOString(),
      'key',
      `${runId}-kubernetes-1-s1-c0`,
      'runId',
      runId,
      'incidentId',
      `inc-${runId}`,
      'agent',
      'kubernetes',
      'tool',
      tool,
      'args',
      JSON.stringify({ name: 'payments-7f9c', token: '[redacted]' }),
      'approvalId',
      approvalId,
      'approver',
      approver,
      'status',
      status,
    ];
    await ctx.redis.xadd(key, '*', ...entry('raudit0000000000000001', 'demo__restart_pod', 'ok', 'appr-a1', 'alice'));
    await ctx.redis.xadd(key, '*', ...entry('raudit0000000000000002', 'demo__scale', 'refused'));

    const one = await bosun(['audit', '--run', 'raudit0000000000000001', '--json']);
    expect(one.code, one.stderr).toBe(0);
    const entries = JSON.parse(one.stdout) as Record<string, unknown>[];
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({
      runId: 'raudit0000000000000001',
      tool: 'demo__restart_pod',
      status: 'ok',
      approvalId: 'appr-a1',
      approver: 'alice',
      args: { name: 'payments-7f9c', token: '[redacted]' },
    });

    const all = await bosun(['audit', '--json']);
    const both = JSON.parse(all.stdout) as { runId: string; approvalId: unknown }[];
    expect(both.map((e) => e.runId)).toEqual(['raudit0000000000000002', 'raudit0000000000000001']);
    expect(both[0]!.approvalId).toBeNull();
    const limited = JSON.parse((await bosun(['audit', '--limit', '1', '--json'])).stdout) as { runId: string }[];
    expect(limited.map((e) => e.runId)).toEqual(['raudit0000000000000002']);

    const table = await bosun(['audit']);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(/refused\s+raudit0000000000000002\s+kubernetes\s+demo__scale/);
    expect(table.stdout).toContain('appr-a1 (alice)');
    expect((await bosun(['audit', '--limit', 'x'])).code).toBe(2);
  });
});

describe('the coordinator HTTP API', () => {
  let base: string;
  const id = 'appr-http-1';
  const runId = 'rhttpapproval00000001';
  let job: Job;

  const call = (path: string, init: RequestInit = {}, token: string | null = TOKEN) =>
    fetch(`${base}${path}`, {
      ...init,
      headers: {
        ...(token === null ? {} : { authorization: `Bearer ${token}` }),
        'content-type': 'application/json',
        ...(init.headers ?? {}),
      },
    });

  beforeAll(async () => {
    const port = await freePort();
    const cfg = demoConfig();
    cfg.coordinator.http = { port, operatorToken: '${BOSUN_OPERATOR_TOKEN}' };
    const file = writeConfig(ctx, cfg, 'bosun-http.json');
    coordinator = startService('coordinator', { ...ctx.env, BOSUN_CONFIG: file, BOSUN_OPERATOR_TOKEN: TOKEN });
    await coordinator.ready();
    const listening = await coordinator.waitForLine(/operator API listening/);
    expect(listening).toContain(`"port":${port}`);
    base = `http://127.0.0.1:${port}`;
    await seed(id, runId);
    job = await park(id, 'task-http-1');
  });

  it('answers 401 without a token or with a wrong one, and without detail', async () => {
    for (const token of [null, 'wrong-token', `${TOKEN}x`, '']) {
      const r = await call('/approvals', {}, token);
      expect(r.status).toBe(401);
      // RFC 6750: a bare challenge without a token, invalid_token with a wrong one.
      expect(r.headers.get('www-authenticate')).toMatch(
        token === null ? /^Bearer realm="bosun-operator"$/ : /^Bearer realm="bosun-operator", error="invalid_token"/,
      );
      const text = await r.text();
      expect(text).not.toContain(TOKEN);
      expect(text).not.toContain('approvals');
    }
    const basic = await fetch(`${base}/approvals`, { headers: { authorization: `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}` } });
    expect(basic.status).toBe(401);
    expect(basic.headers.get('www-authenticate')).toBe('Bearer realm="bosun-operator"');
    // Unknown paths are not told apart from known ones before authentication.
    expect((await call('/nowhere', {}, null)).status).toBe(401);
    expect((await call('/approvals/x', { method: 'POST', body: '{}' }, 'nope')).status).toBe(401);
  });

  it('lists the pending approvals, shows one, and answers 404 for unknown ids and paths', async () => {
    const r = await call('/approvals');
    expect(r.status).toBe(200);
    const list = (await r.json()) as ApprovalView[];
    expect(list.map((a) => a.id)).toEqual([id]);
    expect(list[0]!.calls[1]).toMatchObject({ tool: 'demo__restart_pod', needsApproval: true });
    // The context: the incident, the run so far, how far it has got and its decisions (none yet).
    expect(list[0]).toMatchObject({
      incident: { id: `inc-${id}`, title: 'payments pods crash-looping', severity: 'critical' },
      steps: [{ tool: 'demo__get_logs', result: 'config v12 not found' }],
      progress: { approvals: 0, required: 1, text: '0 of 1' },
      decisions: [],
    });

    // This run has no checkpoint (expired, say): the approval reads all the same, without specialists.
    expect(list[0]!.specialists).toBeUndefined();

    const one = await call(`/approvals/${id}`);
    expect(one.status).toBe(200);
    const shown = (await one.json()) as ApprovalView;
    expect(shown.runId).toBe(runId);
    // The shared token names nobody: no viewer is recorded.
    expect(shown.viewers).toBeUndefined();

    expect((await call('/approvals/appr-unknown')).status).toBe(404);
    expect((await call('/approvals/appr-unknown', { method: 'POST', body: JSON.stringify({ decision: 'approve' }) })).status).toBe(404);
    expect((await call('/elsewhere')).status).toBe(404);
  });

  it('answers 400 naming the bad field, and 413 past the body cap', async () => {
    const post = (body: string) => call(`/approvals/${id}`, { method: 'POST', body });
    const cases: [string, RegExp][] = [
      [JSON.stringify({ decision: 'deny' }), /^reason:/],
      [JSON.stringify({ decision: 'deny', reason: '' }), /^reason:/],
      [JSON.stringify({ decision: 'maybe' }), /^decision:/],
      [JSON.stringify({ decision: 'approve', only: 'all' }), /^only:/],
      [JSON.stringify({ decision: 'approve', only: [0] }), /do not need approval: 0/],
      [JSON.stringify({ decision: 'approve', by: 7 }), /^by:/],
      [JSON.stringify({ decision: 'approve', extra: true }), /^extra:/],
      ['{not json', /^body:/],
    ];
    for (const [body, re] of cases) {
      const r = await post(body);
      expect(r.status, body).toBe(400);
      expect(((await r.json()) as { error: string }).error, body).toMatch(re);
    }
    const big = await post(JSON.stringify({ decision: 'deny', reason: 'x'.repeat(70 * 1024) }));
    expect(big.status).toBe(413);
    expect((await store.get(id))!.status).toBe('pending');
    expect(await job.getState()).toBe('delayed');
  });

  it('approves (200, recorded, task woken, approval.resolved published), then answers 409', async () => {
    const r = await call(`/approvals/${id}`, { method: 'POST', body: JSON.stringify({ decision: 'approve' }) });
    expect(r.status).toBe(200);
    const decided = (await r.json()) as ApprovalView;
    expect(decided).toMatchObject({ id, status: 'approved', approved: [1], decidedBy: 'http-operator' });
    // Once decided: who, by which path, when.
    expect(decided.progress.text).toBe('1 of 1');
    expect(decided.decisions).toEqual([
      { decision: 'approve', name: 'http-operator', verified: false, path: 'http', at: decided.decidedAt },
    ]);
    const shown = (await (await call(`/approvals/${id}`)).json()) as ApprovalView;
    expect(shown.decisions).toEqual(decided.decisions);
    expect(await store.get(id)).toMatchObject({ status: 'approved', approved: [1], decidedBy: 'http-operator' });
    expect(['waiting', 'wait', 'prioritized']).toContain(await job.getState());
    const e = await collector.waitFor((x) => x.type === 'approval.resolved' && x.runId === runId, 10_000, 'approval.resolved (HTTP)');
    expect(e.data).toMatchObject({ approvalId: id, status: 'approved', approved: [1], decidedBy: 'http-operator' });

    const listed = (await (await call('/approvals')).json()) as Approval[];
    expect(listed).toEqual([]);

    const again = await call(`/approvals/${id}`, {
      method: 'POST',
      body: JSON.stringify({ decision: 'deny', reason: 'changed my mind', by: 'carol' }),
    });
    expect(again.status).toBe(409);
    expect(((await again.json()) as { error: string }).error).toContain('http-operator');
    expect((await store.get(id))!.status).toBe('approved');
  });

  it('denies with a reason and a named operator', async () => {
    const id2 = 'appr-http-2';
    await seed(id2, 'rhttpapproval00000002');
    const r = await call(`/approvals/${id2}`, {
      method: 'POST',
      body: JSON.stringify({ decision: 'deny', reason: 'use a rollout instead', by: 'dave' }),
    });
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ status: 'denied', denyReason: 'use a rollout instead', decidedBy: 'dave' });
  });

  it('logs each decision and never the token', async () => {
    await coordinator!.waitForLine(/appr-http-2.*approval decided over HTTP|approval decided over HTTP.*appr-http-2/);
    const decisions = coordinator!.lines.filter((l) => l.includes('approval decided over HTTP'));
    expect(decisions.some((l) => l.includes(id) && l.includes('"decision":"approve"') && l.includes('http-operator'))).toBe(true);
    expect(decisions.some((l) => l.includes('appr-http-2') && l.includes('"decision":"deny"') && l.includes('dave'))).toBe(true);
    expect(coordinator!.lines.length).toBeGreaterThan(0);
    for (const line of wholeOutput(coordinator!)) expect(line).not.toContain(TOKEN);
  });

  describe('run control', () => {
    const post = (path: string, body?: unknown, token: string | null = TOKEN) =>
      call(
        path,
        { method: 'POST', ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }) },
        token,
      );
    let done: string;
    let client: Client;

    beforeAll(async () => {
      client = await openClient(ctx);
      // Routed to no specialist that exists, the run ends at once (partial) with this coordinator alone.
      const { job, runId } = await client.publish({
        id: 'done-1',
        source: 'test',
        reason: 'HighLatency',
        summary: 'slow',
        payload: { fake: { route: ['nobody'] } },
      });
      expect((await client.result(job, 30_000)).status).toBe('partial');
      done = runId;
    });

    afterAll(async () => {
      await client?.close();
    });

    it('refuses to cancel a finished run (exit 1, 409) or an unknown one (exit 1, 404), and answers 400 for a bad body', async () => {
      const cli = await bosun(['cancel', done, '--reason', 'too late']);
      expect(cli.code).toBe(1);
      expect(cli.stderr).toContain(
        `bosun: cancel: run ${done} (incident done-1) has already finished: partial; there is nothing to cancel`,
      );
      const http = await post(`/runs/${done}/cancel`, { reason: 'too late' });
      expect(http.status).toBe(409);
      expect(await http.json()).toMatchObject({ code: 'finished' });
      expect(await ctx.redis.exists(`${ctx.prefix}:cancel:run:${done}`)).toBe(0);

      const unknown = await bosun(['cancel', 'r0000000000000000000f']);
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toContain('no run r0000000000000000000f');
      expect((await post('/runs/r0000000000000000000f/cancel', {})).status).toBe(404);

      for (const [body, field] of [
        [{ reason: 5 }, 'reason:'],
        [{ by: '' }, 'by:'],
        [{ why: 'x' }, 'why:'],
        ['{nope', 'body:'],
      ] as const) {
        const bad = await post(`/runs/${done}/cancel`, body);
        expect(bad.status, JSON.stringify(body)).toBe(400);
        expect(((await bad.json()) as { error: string }).error).toMatch(new RegExp(`^${field}`));
      }
      expect((await post(`/runs/${done}/cancel`, {}, null)).status).toBe(401);
      expect((await call(`/runs/${done}/cancel`)).status).toBe(405);
    });

    it('lists runs with GET /runs and answers 400 for a bad status or limit; bosun runs --status nope exits 2', async () => {
      const listed = await call('/runs?status=partial');
      expect(listed.status).toBe(200);
      expect(((await listed.json()) as { runId: string }[]).map((r) => r.runId)).toEqual([done]);
      expect((await call('/runs?status=nope')).status).toBe(400);
      expect((await call('/runs?limit=0')).status).toBe(400);
      expect((await bosun(['runs', '--status', 'nope'])).code).toBe(2);
    });
  });

  it('a second coordinator on the same port fails to start, naming the API and host:port', async () => {
    const port = Number(new URL(base).port);
    const cfg = demoConfig();
    cfg.coordinator.http = { port, operatorToken: '${BOSUN_OPERATOR_TOKEN}' };
    const second = startService('coordinator', {
      ...ctx.env,
      BOSUN_CONFIG: writeConfig(ctx, cfg, 'bosun-http-2.json'),
      BOSUN_OPERATOR_TOKEN: TOKEN,
    });
    expect(await second.exited).toEqual({ code: 1, signal: null });
    expect(second.lines).toContain(`coordinator: operator API: cannot listen on 127.0.0.1:${port}: the address is already in use`);
    for (const line of second.lines) expect(line).not.toContain(TOKEN);
    // The first one still answers.
    expect((await call('/approvals')).status).toBe(200);
  });
});
