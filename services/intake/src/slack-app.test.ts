import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DeliveryConfigSchema, deliverySecrets, resolveDeliverySecrets, slackAppSinks } from '@bosun/config';
import type { Approval } from '@bosun/contract';
import { ACTIONS_BLOCK, APPROVE_ACTION, DENY_ACTION, approvalBlocks, decidedBlocks } from './slack-blocks.js';
import { slackSignature, verifySlackRequest } from './slack-signature.js';
import { slackRoleCheck } from './slack-interactions.js';

const SECRET = '8f742231b10e8888abcd99yyyzzz85a5';
const NOW = 1_764_640_800_000;
const T = String(NOW / 1000);

describe('Slack request signatures (v0)', () => {
  const body = 'payload=%7B%22type%22%3A%22block_actions%22%7D';
  const sig = `v0=${createHmac('sha256', SECRET).update(`v0:${T}:${body}`).digest('hex')}`;
  const headers = (over: Record<string, string | undefined> = {}) => ({
    'x-slack-signature': sig,
    'x-slack-request-timestamp': T,
    ...over,
  });

  it('takes HMAC-SHA256 over "v0:<timestamp>:<raw body>" and says which secret signed it', () => {
    expect(slackSignature(SECRET, T, body)).toBe(sig);
    expect(verifySlackRequest([SECRET], headers(), body, NOW)).toEqual({ ok: true, index: 0 });
    expect(verifySlackRequest(['other-app-secret', SECRET], headers(), body, NOW)).toEqual({ ok: true, index: 1 });
  });

  it('refuses a wrong secret, a changed body, a malformed or missing header', () => {
    expect(verifySlackRequest(['nope'], headers(), body, NOW)).toEqual({ ok: false, reason: 'X-Slack-Signature does not match' });
    expect(verifySlackRequest([SECRET], headers(), `${body}x`, NOW)).toMatchObject({ ok: false });
    expect(verifySlackRequest([SECRET], headers({ 'x-slack-signature': 'v1=abc' }), body, NOW)).toEqual({
      ok: false,
      reason: 'X-Slack-Signature: not v0=<64 hex digits>',
    });
    expect(verifySlackRequest([SECRET], headers({ 'x-slack-signature': sig.toUpperCase() }), body, NOW)).toMatchObject({ ok: false });
    expect(verifySlackRequest([SECRET], headers({ 'x-slack-request-timestamp': undefined }), body, NOW)).toEqual({
      ok: false,
      reason: 'missing X-Slack-Request-Timestamp',
    });
    expect(verifySlackRequest([SECRET], headers({ 'x-slack-request-timestamp': '1e9' }), body, NOW)).toMatchObject({ ok: false });
    expect(verifySlackRequest([], headers(), body, NOW)).toMatchObject({ ok: false });
  });

  it('takes a timestamp up to 5 minutes either side of now, and no further', () => {
    expect(verifySlackRequest([SECRET], headers(), body, NOW + 300_000)).toMatchObject({ ok: true });
    expect(verifySlackRequest([SECRET], headers(), body, NOW - 300_000)).toMatchObject({ ok: true });
    expect(verifySlackRequest([SECRET], headers(), body, NOW + 301_000)).toEqual({
      ok: false,
      reason: 'X-Slack-Request-Timestamp: 301 s from now (at most 300)',
    });
    expect(verifySlackRequest([SECRET], headers(), body, NOW - 301_000)).toMatchObject({ ok: false });
  });
});

const approval: Approval = {
  id: 'ap-r1-d0-kubernetes-s2',
  status: 'pending',
  runId: 'r1',
  incidentId: 'inc-1',
  agent: 'kubernetes',
  taskId: 'r1-d0-kubernetes',
  calls: [
    { index: 0, tool: 'demo__get_pods', args: {}, needsApproval: false },
    { index: 1, tool: 'demo__rollback_deployment', args: { toVersion: 'v41', note: 'a ``` fence <b>' }, needsApproval: true },
  ],
  reason: 'roll back the bad deploy',
  createdAt: '2026-01-01T00:00:00Z',
  timeoutAt: '2026-01-01T00:05:00Z',
};
const incident = {
  id: 'inc-1',
  source: 'am',
  reason: 'HighLatency',
  severity: 'critical' as const,
  title: 'checkout <slow>',
  service: 'checkout',
  summary: 'checkout <slow>\n\np99 4 s since 10:02',
};

describe('the approval message blocks', () => {
  it('holds the incident, the reason, the evidence, the calls needing approval, and the two buttons carrying the id', () => {
    const blocks = approvalBlocks(approval, incident);
    const text = JSON.stringify(blocks);
    expect(text).toContain('checkout &lt;slow&gt;');
    expect(text).toContain('*Service*\\ncheckout');
    expect(text).toContain('p99 4 s since 10:02');
    expect(text).toContain('*Call 1:* `demo__rollback_deployment`');
    expect(text).not.toContain('demo__get_pods`');
    // A fence inside the arguments cannot end the code block.
    expect(text).toContain('a `\u200b`` fence &lt;b&gt;');
    const actions = blocks.find((b) => b.block_id === ACTIONS_BLOCK) as { elements: { action_id: string; value: string }[] };
    expect(actions.elements.map((e) => [e.action_id, e.value])).toEqual([
      [APPROVE_ACTION, approval.id],
      [DENY_ACTION, approval.id],
    ]);
    expect(blocks.length).toBeLessThanOrEqual(50);
  });

  it('stays within Slack limits for a long reason and many calls', () => {
    const many: Approval = {
      ...approval,
      reason: 'x'.repeat(10_000),
      calls: Array.from({ length: 40 }, (_, i) => ({ index: i, tool: `t${i}`, args: { big: 'y'.repeat(5000) }, needsApproval: true })),
    };
    const specialists = Array.from({ length: 30 }, (_, i) => ({
      taskId: `t${i}`,
      agent: `agent${i}`,
      status: 'completed' as const,
      finding: 'z'.repeat(300),
    }));
    const steps = Array.from({ length: 20 }, (_, i) => ({ tool: `s${i}`, args: { big: 'w'.repeat(3000) }, result: 'v'.repeat(300) }));
    const blocks = approvalBlocks({ ...many, steps }, undefined, specialists);
    expect(blocks.length).toBeLessThanOrEqual(50);
    for (const b of blocks) {
      const t = (b.text as { text?: string } | undefined)?.text;
      if (t !== undefined) expect(t.length).toBeLessThanOrEqual(b.type === 'header' ? 150 : 3000);
    }
    expect(JSON.stringify(blocks)).toContain('and 20 more calls');
  });

  it('shows how far it has got, when it times out, the other specialists’ findings and the latest earlier steps', () => {
    const ruled: Approval = {
      ...approval,
      rule: { required: 2, distinctFrom: 'requester' },
      requester: 'carol',
      votes: [{ actor: { name: 'alice', verified: true, path: 'slack' }, at: '2026-01-01T00:01:00Z' }],
      steps: Array.from({ length: 7 }, (_, i) => ({
        tool: `demo__step${i}`,
        args: { n: i },
        result: `out <${i}>`,
        ...(i === 6 ? { isError: true } : {}),
      })),
    };
    const specialists = [
      { taskId: 't2', agent: 'database', status: 'completed' as const, finding: 'the pool\nis exhausted' },
      { taskId: 't3', agent: 'network', status: 'running' as const },
    ];
    const text = JSON.stringify(approvalBlocks(ruled, incident, specialists));
    expect(text).toContain('*Approvals*\\n1 of 2 (alice); not carol');
    expect(text).toContain('*Times out*\\n2026-01-01T00:05:00Z (then denied)');
    expect(text).toContain('*The run so far: other specialists*\\n• *database* completed: the pool is exhausted\\n• *network* running');
    expect(text).toContain('*Earlier steps of kubernetes* (the latest 5 of 7)\\n• `demo__step2` {\\"n\\":2} → out &lt;2&gt;');
    expect(text).toContain('• `demo__step6` {\\"n\\":6} → _error:_ out &lt;6&gt;');
    expect(text).not.toContain('demo__step1`');
    // Without them, no such sections.
    expect(JSON.stringify(approvalBlocks(approval, incident))).not.toMatch(/run so far|Earlier steps/);
    expect(JSON.stringify(approvalBlocks(approval, incident))).toContain('*Approvals*\\n0 of 1');
  });

  it('once decided: no buttons, and who decided, from where, when', () => {
    const decided = { ...approval, status: 'approved' as const, approved: [1], decidedBy: 'alice', decidedAt: '2026-01-01T00:01:00Z' };
    const text = JSON.stringify(decidedBlocks(decided, incident, { name: 'alice', path: 'slack', slackUserId: 'U0ALICE01' }));
    expect(text).toContain(':white_check_mark: *Approved* (call 1) by *alice* in Slack (<@U0ALICE01>) at 2026-01-01T00:01:00Z');
    expect(text).not.toContain(APPROVE_ACTION);
  });
});

describe('the Slack sink config', () => {
  const app = { type: 'slack', botToken: '${BOT}', channel: 'C1', signingSecret: '${SIGN}' };

  it('is an incoming webhook (url) or an app (botToken, channel, signingSecret), never both, never half an app', () => {
    expect(DeliveryConfigSchema.safeParse({ sinks: { s: app } }).success).toBe(true);
    const both = DeliveryConfigSchema.safeParse({ sinks: { s: { ...app, url: 'http://h' } } });
    expect(both.error?.issues[0]).toMatchObject({ path: ['sinks', 's', 'botToken'] });
    const half = DeliveryConfigSchema.safeParse({ sinks: { s: { type: 'slack', botToken: 'x', channel: 'C1' } } });
    expect(half.error?.issues[0]).toMatchObject({ path: ['sinks', 's', 'signingSecret'] });
    expect(half.error?.issues[0]?.message).toMatch(/^required in app mode/);
    const badUser = DeliveryConfigSchema.safeParse({ sinks: { s: { ...app, users: { alice: 'alice' } } } });
    expect(badUser.success).toBe(false);
  });

  it('resolves the token and the signing secret, lists them as log secrets, and lowercases mapped e-mails', () => {
    const config = DeliveryConfigSchema.parse({
      sinks: { s: { ...app, emails: { 'Carol@Example.com': 'carol' } }, w: { type: 'slack', url: 'http://h/x' } },
    });
    const resolved = resolveDeliverySecrets(config, { BOT: 'xoxb-1', SIGN: 'sign-secret' });
    expect(slackAppSinks(resolved)).toEqual({
      s: expect.objectContaining({ botToken: 'xoxb-1', signingSecret: 'sign-secret', emails: { 'carol@example.com': 'carol' } }),
    });
    expect(deliverySecrets(resolved)).toEqual(expect.arrayContaining(['xoxb-1', 'sign-secret', 'http://h/x']));
    expect(() => resolveDeliverySecrets(config, { BOT: 'xoxb-1', SIGN: '' })).toThrow(
      'delivery.sinks.s.signingSecret: empty after substitution',
    );
  });
});

describe('the Slack role check', () => {
  it("is the config's approve role once operators are named, and absent without them", () => {
    const hash = (c: string) => c.repeat(64);
    const check = slackRoleCheck([
      { name: 'alice', tokenSha256: hash('a'), roles: ['approve', 'read'] },
      { name: 'rita', tokenSha256: hash('b'), roles: ['read'] },
    ])!;
    expect([check('alice'), check('Alice'), check('rita'), check('mallory')]).toEqual([true, true, false, false]);
    expect(slackRoleCheck([])).toBeUndefined();
  });
});
