import { createHash, createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue } from 'bullmq';
import { DEAD_LETTER_QUEUE, INCIDENT_JOB, runCheckpointId, type Approval, type DeadLetter } from '@bosun/contract';
import { ApprovalStore, RedisCheckpointStore } from '@bosun/transport';
import { SlackApi, SlackApiError } from '@bosun/intake';
import { openContext, waitUntil, type TestContext } from '../helpers/index.js';
import { startIntake, type IntakeUnderTest } from '../helpers/intake.js';
import { slackFixture, startSlackServer, type SlackCall, type SlackServer } from '../helpers/slack-server.js';
import { createLogger } from '@bosun/config';

// Slack approvals (issue 23 item 2) through one intake process with real Redis and NATS: the
// announcer posts each pending approval to a local Slack Web API stand-in, and Slack's
// interaction requests — block_actions payloads in Slack's documented format
// (test/fixtures/slack/README.md), signed as Slack signs them — decide it at POST /slack/interactions.

const BOT_TOKEN = 'xoxb-test-bot-token-of-the-test';
const SIGNING_SECRET = '8f742231b10e8888abcd99yyyzzz85a5';
const OTHER_SECRET = 'the-lost-sinks-own-signing-secret';
const CHANNEL = 'C0ONCALL1';
const sha = (t: string) => createHash('sha256').update(t).digest('hex');

/** users.info's answer for rita: the fixture's shape, her id and e-mail. */
function ritaInfo(): unknown {
  const info = slackFixture('users-info-ok') as { user: Record<string, any> };
  info.user.id = 'U0RITA001';
  info.user.name = 'rita';
  info.user.profile = { ...info.user.profile, display_name: 'rita', email: 'rita@example.com' };
  return info;
}

let ctx: TestContext;
let slack: SlackServer;
let intake: IntakeUnderTest;
let store: ApprovalStore;

beforeAll(async () => {
  ctx = await openContext('slack');
  slack = await startSlackServer(BOT_TOKEN, (call) => {
    if (call.method === 'chat.postMessage' && call.args.channel === 'C0MISSING') return 'error-channel-not-found';
    // A second person users.info knows: rita, a read-only operator mapped by her e-mail.
    if (call.method === 'users.info' && call.args.user === 'U0RITA001') return { status: 200, body: ritaInfo() };
    return undefined;
  });
  const app = { type: 'slack', botToken: '${TEST_SLACK_BOT_TOKEN}', slackApiUrl: slack.apiUrl, timeoutMs: 5_000 };
  intake = await startIntake(
    ctx,
    { sources: { am: { format: 'alertmanager', auth: { bearer: 'unused-token' } } } },
    {
      env: { TEST_SLACK_BOT_TOKEN: BOT_TOKEN, TEST_SLACK_SIGNING_SECRET: SIGNING_SECRET },
      delivery: {
        attempts: 3,
        backoffMs: 200,
        approvalScanMs: 200,
        sinks: {
          oncall: {
            ...app,
            channel: CHANNEL,
            signingSecret: '${TEST_SLACK_SIGNING_SECRET}',
            users: { U0ALICE01: 'alice', U0BOB0001: 'bob', U0DAVE001: 'dave' },
            emails: { 'carol@example.com': 'carol', 'rita@example.com': 'rita' },
          },
          lost: { ...app, channel: 'C0MISSING', signingSecret: OTHER_SECRET },
        },
        announceApprovals: ['oncall', 'lost'],
      },
      // The people of the config: their roles decide who may approve in Slack (dave and rita only read).
      config: {
        operators: [
          ...['alice', 'bob', 'carol'].map((name) => ({ name, tokenSha256: sha(`${name}-token`), roles: ['approve', 'read'] })),
          ...['dave', 'rita'].map((name) => ({ name, tokenSha256: sha(`${name}-token`), roles: ['read'] })),
        ],
      },
    },
  );
  store = new ApprovalStore({ redis: ctx.redis, prefix: ctx.prefix });
});

afterAll(async () => {
  await store?.close();
  await intake?.close();
  await slack?.close();
  await ctx?.close();
});

let approvals = 0;
/** A pending approval of a restart with a secret argument, and its incident's job. */
async function pendingApproval(): Promise<Approval> {
  approvals += 1;
  const incidentId = `am-slack${approvals}-1764640000000`;
  await intake.incidents.add(
    INCIDENT_JOB,
    {
      id: incidentId,
      source: 'am',
      reason: 'PodCrashLooping',
      summary: 'checkout pods crash-looping\n\n3 of 3 pods restarted 12 times in 10 minutes after deploy 2026-12-02.1.',
      severity: 'critical',
      labels: { service: 'checkout', team: 'payments' },
    },
    { jobId: incidentId },
  );
  const runId = `r${String(approvals).padStart(20, '0')}`;
  // The run so far, as the coordinator keeps it: a database specialist has finished.
  await new RedisCheckpointStore({ redis: ctx.redis, prefix: ctx.prefix }).save(runCheckpointId(runId), {
    v: 1,
    runId,
    incidentId,
    startedAt: new Date().toISOString(),
    deadlineAt: new Date(Date.now() + 600_000).toISOString(),
    jobId: incidentId,
    mode: 'route',
    phase: 'waiting',
    round: 0,
    messages: [],
    delegations: [
      { taskId: `slack-${approvals}`, agent: 'kubernetes', round: 0, task: 'look' },
      {
        taskId: `slack-db-${approvals}`,
        agent: 'database',
        round: 0,
        task: 'look',
        result: {
          v: 1,
          taskId: `slack-db-${approvals}`,
          agent: 'database',
          status: 'completed',
          output: { summary: 'no database errors since the deploy', password: 'db-pass-do-not-show' },
          attempts: 1,
        },
      },
    ],
  });
  const now = Date.now();
  return store.request({
    id: `ap-slack-${approvals}-s1`,
    runId,
    incidentId,
    agent: 'kubernetes',
    taskId: `slack-${approvals}`,
    reason: 'The pods crash-loop since the deploy; restarting checkout clears the bad cache.',
    calls: [
      { index: 0, tool: 'demo.get_service_status', args: { service: 'checkout' }, needsApproval: false, key: `k${approvals}-0` },
      {
        index: 1,
        tool: 'demo.restart_service',
        args: { service: 'checkout', api_key: 'sk-live-do-not-show' },
        needsApproval: true,
        key: `k${approvals}-1`,
      },
    ],
    steps: [{ tool: 'demo.get_logs', args: { service: 'checkout' }, result: 'cache entry corrupt: checkout-v42' }],
    createdAt: new Date(now).toISOString(),
    timeoutAt: new Date(now + 3_600_000).toISOString(),
  });
}

/** The message the announcer posted for an approval (waits for it). */
async function posted(id: string): Promise<SlackCall> {
  const find = () => slack.of('chat.postMessage').find((c) => c.args.channel === CHANNEL && JSON.stringify(c.args.blocks).includes(id));
  await waitUntil(() => find() !== undefined, 15_000, `the Slack message of ${id}`);
  return find()!;
}

/** A block_actions payload of the fixture: `user` clicked `action` on the message of approval `id`. */
function payloadOf(id: string, user: string, action = 'bosun.approve', blocks: unknown = []): Record<string, any> {
  const p = slackFixture('block-actions') as Record<string, any>;
  p.user.id = user;
  p.actions[0].action_id = action;
  p.actions[0].value = id;
  p.message.blocks = blocks;
  return p;
}

/** Posts an interaction as Slack does: a form with `payload`, signed with `secret` at `timestamp` (Unix seconds). */
function interact(
  payload: unknown,
  options: { secret?: string; timestamp?: number; body?: (signed: string) => string; headers?: Record<string, string> } = {},
): Promise<Response> {
  const body = `payload=${encodeURIComponent(JSON.stringify(payload))}`;
  const ts = options.timestamp ?? Math.floor(Date.now() / 1000);
  const signature = `v0=${createHmac('sha256', options.secret ?? SIGNING_SECRET)
    .update(`v0:${ts}:${body}`)
    .digest('hex')}`;
  return fetch(`${intake.base}/slack/interactions`, {
    method: 'POST',
    body: options.body ? options.body(body) : body,
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      'x-slack-request-timestamp': String(ts),
      'x-slack-signature': signature,
      ...options.headers,
    },
  });
}

const updatesOf = (id: string) => slack.of('chat.update').filter((c) => JSON.stringify(c.args).includes(id));
const ephemeralsTo = (user: string) => slack.of('chat.postEphemeral').filter((c) => c.args.user === user);

describe('the approval message', () => {
  it('posts one Block Kit message per pending approval: the incident, the reason, the evidence, the redacted calls, Approve / Deny', async () => {
    const a = await pendingApproval();
    const call = await posted(a.id);
    expect(call.token).toBe(BOT_TOKEN);
    const blocks = call.args.blocks as Record<string, any>[];
    const text = JSON.stringify(blocks);
    expect(blocks[0]).toMatchObject({ type: 'header', text: { type: 'plain_text', text: 'Approval needed: demo.restart_service' } });
    for (const shown of ['checkout pods crash-looping', 'critical', '*Service*\\ncheckout', 'am (PodCrashLooping)', a.runId, a.timeoutAt])
      expect(text).toContain(shown);
    expect(text).toContain('restarting checkout clears the bad cache');
    expect(text).toContain('3 of 3 pods restarted 12 times');
    expect(text).toContain('[redacted]');
    expect(text).not.toContain('sk-live-do-not-show');
    // The run so far: how far it has got, the other specialists' findings, the earlier steps.
    expect(text).toContain('*Approvals*\\n0 of 1');
    expect(text).toContain('• *database* completed: no database errors since the deploy');
    expect(text).toContain('• `demo.get_logs` {\\"service\\":\\"checkout\\"} → cache entry corrupt: checkout-v42');
    expect(text).not.toContain('db-pass-do-not-show');
    // The call that needs no approval is not offered as one.
    expect(text).not.toContain('demo.get_service_status');
    const actions = blocks.find((b) => b.type === 'actions')!;
    expect(actions.elements.map((e: any) => [e.type, e.action_id, e.value, e.style])).toEqual([
      ['button', 'bosun.approve', a.id, 'primary'],
      ['button', 'bosun.deny', a.id, 'danger'],
    ]);
    expect(String(call.args.text)).toContain(`critical incident ${a.incidentId}`);
  });

  it('a channel_not_found answer dead-letters the announcement at once (ok: false is permanent), sent once', async () => {
    const a = await pendingApproval();
    const dlq = new Queue(DEAD_LETTER_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
    try {
      let letter: DeadLetter | undefined;
      await waitUntil(
        async () => {
          letter = (await dlq.getWaiting(0, 1000))
            .map((j) => j.data as DeadLetter)
            .find((d) => d.kind === 'delivery' && JSON.stringify(d.input).includes(a.id));
          return letter !== undefined;
        },
        15_000,
        `the dead letter of ${a.id} to the lost sink`,
      );
      expect(letter!.reason).toMatch(/sink lost: Slack chat\.postMessage: channel_not_found/);
      expect(letter!.attempts).toBe(1);
      const tries = slack
        .of('chat.postMessage')
        .filter((c) => c.args.channel === 'C0MISSING' && JSON.stringify(c.args.blocks).includes(a.id));
      expect(tries).toHaveLength(1);
    } finally {
      await dlq.close();
    }
  });
});

describe('POST /slack/interactions', () => {
  it('a signed Approve decides through the store as the mapped operator, and updates the message once', async () => {
    const a = await pendingApproval();
    const { args } = await posted(a.id);
    const res = await interact(payloadOf(a.id, 'U0ALICE01', 'bosun.approve', args.blocks));
    expect(res.status).toBe(200);
    const decided = (await store.get(a.id))!;
    expect(decided).toMatchObject({ status: 'approved', approved: [1], decidedBy: 'alice' });
    expect(decided.actor).toMatchObject({
      name: 'alice',
      verified: true,
      path: 'slack',
      slack: { teamId: 'T0BOSUN01', userId: 'U0ALICE01' },
    });
    const updates = updatesOf(a.id);
    expect(updates).toHaveLength(1);
    expect(updates[0]!.args).toMatchObject({ channel: CHANNEL, ts: '1764640800.000100' });
    const shown = JSON.stringify(updates[0]!.args.blocks);
    expect(shown).toContain('*Approved*');
    expect(shown).toContain('by *alice* in Slack (<@U0ALICE01>)');
    expect(shown).toContain(decided.decidedAt!);
    expect(shown).not.toContain('bosun.approve');
    expect(shown).toContain('checkout pods crash-looping');
  });

  it('Deny by a user mapped by e-mail (users.info) denies, naming them', async () => {
    const a = await pendingApproval();
    await posted(a.id);
    const res = await interact(payloadOf(a.id, 'U0CAROL01', 'bosun.deny'));
    expect(res.status).toBe(200);
    expect(slack.of('users.info').at(-1)!.args).toMatchObject({ user: 'U0CAROL01' });
    const decided = (await store.get(a.id))!;
    expect(decided).toMatchObject({ status: 'denied', decidedBy: 'carol', denyReason: 'denied in Slack by carol' });
    expect(decided.actor).toMatchObject({ path: 'slack', email: 'carol@example.com', slack: { userId: 'U0CAROL01' } });
    expect(updatesOf(a.id)).toHaveLength(1);
  });

  it('refuses a wrong signature, a body changed after signing, and missing headers: 401, nothing decided', async () => {
    const a = await pendingApproval();
    const p = payloadOf(a.id, 'U0ALICE01');
    const wrong = await interact(p, { secret: 'not-the-signing-secret' });
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toEqual({ error: 'unauthorized: X-Slack-Signature does not match' });
    const tampered = await interact(p, { body: (b) => b.replace('U0ALICE01', 'U0BOB0001') });
    expect(tampered.status).toBe(401);
    const bare = await fetch(`${intake.base}/slack/interactions`, { method: 'POST', body: 'payload=%7B%7D' });
    expect(bare.status).toBe(401);
    expect(await bare.json()).toEqual({ error: 'unauthorized: missing X-Slack-Signature' });
    expect((await store.get(a.id))!.status).toBe('pending');
    expect(updatesOf(a.id)).toHaveLength(0);
  });

  it('refuses a replayed request whose timestamp is more than 5 minutes old (or ahead), however well signed', async () => {
    const a = await pendingApproval();
    const p = payloadOf(a.id, 'U0ALICE01');
    const old = await interact(p, { timestamp: Math.floor(Date.now() / 1000) - 301 });
    expect(old.status).toBe(401);
    expect(((await old.json()) as { error: string }).error).toMatch(
      /^unauthorized: X-Slack-Request-Timestamp: 30\d s from now \(at most 300\)$/,
    );
    const ahead = await interact(p, { timestamp: Math.floor(Date.now() / 1000) + 400 });
    expect(ahead.status).toBe(401);
    expect((await store.get(a.id))!.status).toBe('pending');
  });

  it('an unmapped user is told so, ephemerally, and nothing is decided', async () => {
    const a = await pendingApproval();
    const res = await interact(payloadOf(a.id, 'U0MALLORY'));
    expect(res.status).toBe(200);
    expect((await store.get(a.id))!.status).toBe('pending');
    const told = ephemeralsTo('U0MALLORY');
    expect(told).toHaveLength(1);
    expect(told[0]!.args).toMatchObject({ channel: CHANNEL });
    expect(String(told[0]!.args.text)).toMatch(/not mapped to a Bosun operator/);
    expect(updatesOf(a.id)).toHaveLength(0);
  });

  it('two people clicking at once: one decision, the message updated exactly once, the other told who won', async () => {
    const a = await pendingApproval();
    const { args } = await posted(a.id);
    const before = { alice: ephemeralsTo('U0ALICE01').length, bob: ephemeralsTo('U0BOB0001').length };
    const [r1, r2] = await Promise.all([
      interact(payloadOf(a.id, 'U0ALICE01', 'bosun.approve', args.blocks)),
      interact(payloadOf(a.id, 'U0BOB0001', 'bosun.deny', args.blocks)),
    ]);
    expect([r1.status, r2.status]).toEqual([200, 200]);
    const decided = (await store.get(a.id))!;
    const winner = decided.decidedBy === 'alice' ? 'U0ALICE01' : 'U0BOB0001';
    const loser = winner === 'U0ALICE01' ? 'U0BOB0001' : 'U0ALICE01';
    expect(decided.status).toBe(winner === 'U0ALICE01' ? 'approved' : 'denied');
    expect(decided.actor?.slack?.userId).toBe(winner);
    expect(updatesOf(a.id)).toHaveLength(1);
    const told = ephemeralsTo(loser).slice(loser === 'U0ALICE01' ? before.alice : before.bob);
    expect(told).toHaveLength(1);
    expect(String(told[0]!.args.text)).toContain(`already decided: ${decided.status} by ${decided.decidedBy}`);
    // A late third click changes nothing either.
    expect((await interact(payloadOf(a.id, winner, 'bosun.deny'))).status).toBe(200);
    expect(updatesOf(a.id)).toHaveLength(1);
    expect((await store.get(a.id))!.status).toBe(decided.status);
  });

  it('an approval decided elsewhere: the first click after it updates the message once, saying who decided and how', async () => {
    const a = await pendingApproval();
    const { args } = await posted(a.id);
    await store.decide(a.id, { approve: true, by: 'carol', actor: { name: 'carol', verified: true, path: 'cli' } });
    expect(updatesOf(a.id)).toHaveLength(0);
    expect((await interact(payloadOf(a.id, 'U0BOB0001', 'bosun.deny', args.blocks))).status).toBe(200);
    const updates = updatesOf(a.id);
    expect(updates).toHaveLength(1);
    const shown = JSON.stringify(updates[0]!.args.blocks);
    expect(shown).toContain('*Approved* (call 1) by *carol* via cli at');
    expect(shown).not.toContain('bosun.approve');
    expect(String(ephemeralsTo('U0BOB0001').at(-1)!.args.text)).toContain('already decided: approved by carol');
    // Later clicks change nothing.
    expect((await interact(payloadOf(a.id, 'U0ALICE01', 'bosun.approve', args.blocks))).status).toBe(200);
    expect(updatesOf(a.id)).toHaveLength(1);
    expect((await store.get(a.id))!).toMatchObject({ status: 'approved', decidedBy: 'carol' });
  });

  it('a signed payload of another interaction type is taken and ignored; a malformed one is a 400', async () => {
    const closed = await interact({ type: 'view_closed', user: { id: 'U0ALICE01' }, team: { id: 'T0BOSUN01' } });
    expect(closed.status).toBe(200);
    const broken = await interact({ type: 'block_actions', user: {} });
    expect(broken.status).toBe(400);
    expect(((await broken.json()) as { error: string }).error).toMatch(/^payload: user\.id: /);
  });
});

describe('the Web API client against a server answering as Slack does', () => {
  const log = createLogger({ service: 'slack-test', level: 'silent' });

  it('chat.postMessage ok: the channel and ts; ok: false and HTTP errors as SlackApiError, permanent or not', async () => {
    const server = await startSlackServer(BOT_TOKEN, (call, i) => {
      if (call.method !== 'chat.update') return undefined;
      if (i === 0) return 'error-channel-not-found';
      if (i === 1) return { status: 500, body: { ok: false, error: 'internal_error' } };
      return { status: 429, body: { ok: false, error: 'ratelimited' }, headers: { 'retry-after': '30' } };
    });
    try {
      const api = new SlackApi({ token: BOT_TOKEN, slackApiUrl: server.apiUrl, log });
      expect(
        await api.postMessage({ channel: CHANNEL, text: 'hi', blocks: [{ type: 'section', text: { type: 'mrkdwn', text: 'hi' } }] }),
      ).toEqual({
        channel: CHANNEL,
        ts: '1764640800.000100',
      });
      expect(server.of('chat.postMessage')[0]!.args).toMatchObject({ channel: CHANNEL, text: 'hi', blocks: [{ type: 'section' }] });
      const failure = (p: Promise<unknown>) =>
        p.then(
          () => undefined,
          (err: unknown) => err as SlackApiError,
        );
      const update = () => api.update({ channel: CHANNEL, ts: '1.2', text: 'x' });
      const notFound = await failure(update());
      expect(notFound).toBeInstanceOf(SlackApiError);
      expect(notFound).toMatchObject({ code: 'slack_api', slackError: 'channel_not_found', permanent: true });
      expect(await failure(update())).toMatchObject({ slackError: 'http_500', permanent: false });
      expect(await failure(update())).toMatchObject({ slackError: 'ratelimited', permanent: false });
      const badToken = new SlackApi({ token: 'xoxb-wrong', slackApiUrl: server.apiUrl, log });
      expect(await failure(badToken.postEphemeral({ channel: CHANNEL, user: 'U0ALICE01', text: 'x' }))).toMatchObject({
        slackError: 'invalid_auth',
        permanent: true,
      });
      expect(await api.userEmail('U0CAROL01')).toBe('Carol@Example.com');
    } finally {
      await server.close();
    }
  });
});

describe('roles on the Slack path', () => {
  it("a mapped operator without the config's approve role (by user id or by e-mail) is told so and decides nothing; one with it decides", async () => {
    const a = await pendingApproval();
    const { args } = await posted(a.id);
    const before = { dave: ephemeralsTo('U0DAVE001').length, rita: ephemeralsTo('U0RITA001').length };
    expect((await interact(payloadOf(a.id, 'U0DAVE001', 'bosun.approve', args.blocks))).status).toBe(200);
    // rita is mapped by her e-mail, which the stand-in's users.info answers for U0RITA001.
    expect((await interact(payloadOf(a.id, 'U0RITA001', 'bosun.deny', args.blocks))).status).toBe(200);
    expect((await store.get(a.id))!.status).toBe('pending');
    expect(
      ephemeralsTo('U0DAVE001')
        .slice(before.dave)
        .map((c) => String(c.args.text)),
    ).toEqual(['You decide as dave, who does not have the approve role, so your click decided nothing.']);
    expect(
      ephemeralsTo('U0RITA001')
        .slice(before.rita)
        .map((c) => String(c.args.text)),
    ).toEqual(['You decide as rita, who does not have the approve role, so your click decided nothing.']);
    expect(updatesOf(a.id)).toHaveLength(0);
    expect((await interact(payloadOf(a.id, 'U0ALICE01', 'bosun.approve', args.blocks))).status).toBe(200);
    expect((await store.get(a.id))!).toMatchObject({ status: 'approved', decidedBy: 'alice' });
    expect(updatesOf(a.id)).toHaveLength(1);
  });
});
