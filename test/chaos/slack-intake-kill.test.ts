import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INCIDENT_JOB, type Approval } from '@bosun/contract';
import { ApprovalStore } from '@bosun/transport';
import { openContext, startService, waitUntil, type ServiceProcess, type TestContext } from '../helpers/index.js';
import { startIntake, type IntakeUnderTest } from '../helpers/intake.js';
import {
  blockActionsPayload,
  postInteraction,
  startSlackServer,
  type SlackAnswer,
  type SlackCall,
  type SlackServer,
} from '../helpers/slack-server.js';

// The intake SIGKILLed in the middle of a Slack decision (issue 23 item 2), after the signed
// interaction request arrived: once while it waits to learn who clicked (users.info, before any
// decision), once while the message's update is on its way (after the decision). The intake is
// started again each time; the person clicks again, as they would in Slack (which does not send
// an interaction twice). Each time the decision is taken exactly once, and the message is
// updated once.

const BOT_TOKEN = 'xoxb-chaos-bot-token-of-the-test';
const SIGNING_SECRET = 'chaos-signing-secret-0123456789ab';
const CHANNEL = 'C0ONCALL1';

let ctx: TestContext;
let slack: SlackServer;
let intake: IntakeUnderTest;
let store: ApprovalStore;
/** The intake processes started after the first, stopped at the end. */
const restarted: ServiceProcess[] = [];
let base: string;
/** Methods whose answers are held (never given) while set: the intake is killed meanwhile. */
const held = new Set<string>();

beforeAll(async () => {
  ctx = await openContext('slack-intake-kill');
  slack = await startSlackServer(BOT_TOKEN, (call): Promise<SlackAnswer | undefined> | undefined =>
    held.has(call.method) ? new Promise<never>(() => undefined) : undefined,
  );
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
            type: 'slack',
            botToken: '${TEST_SLACK_BOT_TOKEN}',
            slackApiUrl: slack.apiUrl,
            timeoutMs: 5_000,
            channel: CHANNEL,
            signingSecret: '${TEST_SLACK_SIGNING_SECRET}',
            users: { U0ALICE01: 'alice', U0BOB0001: 'bob' },
            // carol is mapped by her e-mail: her click waits on users.info.
            emails: { 'carol@example.com': 'carol' },
          },
        },
        announceApprovals: ['oncall'],
      },
    },
  );
  base = intake.base;
  store = new ApprovalStore({ redis: ctx.redis, prefix: ctx.prefix });
});

afterAll(async () => {
  held.clear();
  await Promise.all(restarted.map((p) => p.stop()));
  await store?.close();
  await intake?.close();
  await slack?.close();
  await ctx?.close();
});

let seeded = 0;
/** A pending approval of a restart, with its incident's job. */
async function pendingApproval(): Promise<Approval> {
  seeded += 1;
  const incidentId = `am-chaos-slack${seeded}-1764640000000`;
  await intake.incidents.add(
    INCIDENT_JOB,
    { id: incidentId, source: 'am', reason: 'PodCrashLooping', summary: 'checkout pods crash-looping', severity: 'critical' },
    { jobId: incidentId },
  );
  const now = Date.now();
  return store.request({
    id: `ap-chaos-slack-${seeded}-s1`,
    runId: `rchaosslack${String(seeded).padStart(10, '0')}`,
    incidentId,
    agent: 'kubernetes',
    taskId: `chaos-slack-${seeded}`,
    reason: 'restart checkout',
    calls: [{ index: 0, tool: 'demo.restart_service', args: { service: 'checkout' }, needsApproval: true, key: `kc${seeded}-0` }],
    createdAt: new Date(now).toISOString(),
    timeoutAt: new Date(now + 3_600_000).toISOString(),
  });
}

const callsOf = (method: string, id: string): SlackCall[] => slack.of(method).filter((c) => JSON.stringify(c.args).includes(id));

/** The message the intake posted for an approval (waits for it). */
async function posted(id: string): Promise<SlackCall> {
  await waitUntil(() => callsOf('chat.postMessage', id).length > 0, 15_000, `the Slack message of ${id}`);
  return callsOf('chat.postMessage', id)[0]!;
}

/** A click sent while the intake dies: its answer never comes (the connection breaks). */
function clickDuringKill(payload: unknown): Promise<unknown> {
  return postInteraction(base, payload, SIGNING_SECRET).then(
    (r) => r.status,
    (err: unknown) => err,
  );
}

/** SIGKILLs the running intake once `arrived` holds, and starts it again on the same port. */
async function killWhen(arrived: () => boolean, what: string): Promise<void> {
  await waitUntil(arrived, 15_000, what);
  const current = restarted.at(-1) ?? intake.process;
  current.kill('SIGKILL');
  await current.exited;
  held.clear();
  const next = startService(
    'intake',
    {
      ...ctx.env,
      LOG_LEVEL: 'info',
      BOSUN_CONFIG: intake.configFile,
      TEST_SLACK_BOT_TOKEN: BOT_TOKEN,
      TEST_SLACK_SIGNING_SECRET: SIGNING_SECRET,
    },
    {
      name: `intake-${restarted.length + 2}`,
    },
  );
  restarted.push(next);
  await next.ready();
}

describe('the intake killed during a Slack decision', () => {
  it('before the decision (waiting on users.info): nothing is decided; the click again decides once and updates the message once', async () => {
    const a = await pendingApproval();
    const { args } = await posted(a.id);
    held.add('users.info');
    const infoBefore = slack.of('users.info').length;
    const click = clickDuringKill(blockActionsPayload(a.id, 'U0CAROL01', 'bosun.deny', args.blocks));
    await killWhen(() => slack.of('users.info').length > infoBefore, 'users.info asked for the clicker');
    expect(await click).toBeInstanceOf(Error);
    expect((await store.get(a.id))!.status).toBe('pending');
    expect(callsOf('chat.update', a.id)).toHaveLength(0);

    expect((await postInteraction(base, blockActionsPayload(a.id, 'U0CAROL01', 'bosun.deny', args.blocks), SIGNING_SECRET)).status).toBe(
      200,
    );
    const decided = (await store.get(a.id))!;
    expect(decided).toMatchObject({ status: 'denied', decidedBy: 'carol', actor: { path: 'slack', slack: { userId: 'U0CAROL01' } } });
    expect(callsOf('chat.update', a.id)).toHaveLength(1);
    // Another click changes nothing.
    expect((await postInteraction(base, blockActionsPayload(a.id, 'U0ALICE01', 'bosun.approve', args.blocks), SIGNING_SECRET)).status).toBe(
      200,
    );
    expect(await store.get(a.id)).toMatchObject({ status: 'denied', decidedAt: decided.decidedAt });
    expect(callsOf('chat.update', a.id)).toHaveLength(1);
  }, 60_000);

  it('after the decision (its message update on its way): the decision stands, once; a click after the restart updates nothing again', async () => {
    const a = await pendingApproval();
    const { args } = await posted(a.id);
    held.add('chat.update');
    const click = clickDuringKill(blockActionsPayload(a.id, 'U0ALICE01', 'bosun.approve', args.blocks));
    await killWhen(() => callsOf('chat.update', a.id).length > 0, 'chat.update of the decided message');
    expect(await click).toBeInstanceOf(Error);
    const decided = (await store.get(a.id))!;
    expect(decided).toMatchObject({ status: 'approved', decidedBy: 'alice', approved: [0] });

    const ephemeralsBefore = slack.of('chat.postEphemeral').length;
    expect((await postInteraction(base, blockActionsPayload(a.id, 'U0BOB0001', 'bosun.deny', args.blocks), SIGNING_SECRET)).status).toBe(
      200,
    );
    // bob is told who decided; the decision and the one update stand.
    const told = slack.of('chat.postEphemeral').slice(ephemeralsBefore);
    expect(told.map((c) => String(c.args.text))).toEqual([expect.stringContaining('already decided: approved by alice')]);
    expect(await store.get(a.id)).toMatchObject({ status: 'approved', decidedBy: 'alice', decidedAt: decided.decidedAt });
    expect(callsOf('chat.update', a.id)).toHaveLength(1);
  }, 60_000);
});
