import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DeliveryConfigSchema, resolveDeliverySecrets, sinksFor } from '@bosun/config';
import { STALL_MARKER, type DeliveryJob } from '@bosun/contract';
import { approvalCommands, deliveryRequest, signatureHeader } from './deliver.js';
import { approvalText, notChecked, slackText } from './slack.js';

const job = (status: 'completed' | 'partial', specialists: DeliveryJob['result']['specialists']): DeliveryJob => ({
  v: 1,
  key: 'r0123456789abcdef0123.hook',
  sink: 'hook',
  incident: {
    id: 'inc-1',
    source: 'am',
    reason: 'HighLatency',
    severity: 'critical',
    title: 'checkout <slow>',
    runbookUrl: 'https://rb.example/x',
  },
  result: {
    v: 1,
    runId: 'r0123456789abcdef0123',
    incidentId: 'inc-1',
    status,
    answer: 'line 1\n\nline 2\nline 3\nline 4',
    specialists,
    stalled: 0,
    startedAt: '2026-01-01T00:00:00Z',
    finishedAt: '2026-01-01T00:01:00Z',
  },
});

describe('Slack text', () => {
  it('a partial run names what was not checked, shows the first lines and the links', () => {
    const j = job('partial', [
      { name: 'kubernetes', status: 'completed', output: {}, attempts: 1 },
      { name: 'database', status: 'stalled', output: { summary: STALL_MARKER }, attempts: 1 },
      { name: 'network', status: 'failed', output: {}, attempts: 3 },
    ]);
    const text = slackText(j, { answerLines: 2, runUrl: 'https://c.example/runs/{runId}' });
    expect(text).toContain('*PARTIAL — not everything was checked*');
    expect(text).toContain('> checkout &lt;slow&gt;');
    expect(text).toContain('line 1\nline 2\n_… 2 more lines in the run result_');
    expect(text).toContain('*Not checked (INCOMPLETE):* database (stalled), network (failed)');
    expect(text).toContain('<https://c.example/runs/r0123456789abcdef0123|run page> · <https://rb.example/x|runbook>');
    expect(notChecked(j.result)).toEqual(['database (stalled)', 'network (failed)']);
  });
});

describe('webhook request', () => {
  it('the body is the run result; Bosun-Signature is HMAC-SHA256 of "<t>.<body>"', () => {
    const j = job('completed', []);
    const { body, headers } = deliveryRequest(j, { type: 'webhook', url: 'http://x', secret: 'k', timeoutMs: 1000 }, 2, 1_700_000_000_999);
    expect(JSON.parse(body)).toEqual(j.result);
    const hex = createHmac('sha256', 'k').update(`1700000000.${body}`).digest('hex');
    expect(headers['bosun-signature']).toBe(`t=1700000000,v1=${hex}`);
    expect(signatureHeader('k', body, 1700000000)).toBe(headers['bosun-signature']);
    expect(headers).toMatchObject({ 'idempotency-key': j.key, 'bosun-delivery-attempt': '2', 'content-type': 'application/json' });
  });
});

describe('delivery config', () => {
  const config = DeliveryConfigSchema.parse({
    sinks: { a: { type: 'slack', url: '${SLACK_X}' }, b: { type: 'webhook', url: 'http://h/x', secret: '${SEC_X}' } },
    routes: [
      { severity: ['critical'], status: ['partial'], sinks: ['a', 'b'] },
      { source: ['am'], sinks: ['a'] },
    ],
    defaultSinks: ['b'],
  });

  it('the first matching route chooses the sinks, else the default', () => {
    expect(sinksFor(config, { severity: 'critical', source: 'x', reason: 'r', status: 'partial' })).toEqual(['a', 'b']);
    expect(sinksFor(config, { severity: 'critical', source: 'am', reason: 'r', status: 'completed' })).toEqual(['a']);
    expect(sinksFor(config, { severity: 'info', source: 'x', reason: 'r', status: 'completed' })).toEqual(['b']);
  });

  it('refuses a route naming an unknown sink', () => {
    const r = DeliveryConfigSchema.safeParse({ sinks: {}, defaultSinks: ['nope'] });
    expect(r.success).toBe(false);
    expect(JSON.stringify(r.error?.issues)).toContain('unknown sink \\"nope\\"');
  });

  it('resolves URLs and secrets, never showing a bad value', () => {
    const r = resolveDeliverySecrets(config, { SLACK_X: 'https://hooks.example/T/B/secret', SEC_X: 's' });
    expect(r.sinks.a!.url).toBe('https://hooks.example/T/B/secret');
    expect(() => resolveDeliverySecrets(config, { SLACK_X: 'not a url token123', SEC_X: 's' })).toThrow(
      'delivery.sinks.a.url: must be an http(s) URL (its value is not shown)',
    );
    expect(() => resolveDeliverySecrets(config, { SLACK_X: 'http://h' })).toThrow(
      'delivery.sinks.b.secret: environment variable SEC_X is not set',
    );
  });
});

describe('approval announcement', () => {
  it('names the calls that need approval and the commands that decide it', () => {
    const approval = {
      id: 'ap-r1-d0-kubernetes-s2',
      status: 'pending' as const,
      runId: 'r1',
      incidentId: 'inc-1',
      agent: 'kubernetes',
      taskId: 'r1-d0-kubernetes',
      calls: [
        { index: 0, tool: 'demo__get_pods', args: {}, needsApproval: false },
        { index: 1, tool: 'demo__rollback_deployment', args: { toVersion: 'v41' }, needsApproval: true },
      ],
      reason: 'roll back the bad deploy',
      createdAt: '2026-01-01T00:00:00Z',
      timeoutAt: '2026-01-01T00:05:00Z',
    };
    const text = approvalText({ v: 1, key: 'k', sink: 's', approval }, approvalCommands(approval.id));
    expect(text).toContain('*Approval needed* — run `r1` (incident `inc-1`), agent kubernetes');
    expect(text).toContain('• `demo__rollback_deployment` {"toVersion":"v41"}');
    expect(text).not.toContain('demo__get_pods');
    expect(text).toContain('Approve: `npx bosun approve ap-r1-d0-kubernetes-s2`');
  });
});
