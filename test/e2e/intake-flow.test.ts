import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Job } from 'bullmq';
import { JoinedAlert, intakeJoinedKey } from '@bosun/contract';
import { freePort, runCli, startClusterTest, startService, type ClusterTest } from '../helpers/index.js';

// The intake's flow controls, with a real cluster behind it: grouping within a window, a
// per-source rate limit whose excess waits in a visible backlog, a resolved alert cancelling its
// run, and runbooks given to the run (events, run result).

const TOKEN = 'flow-token';
const RUNBOOK = '# Crash loops\n\n1. Look at the last restarts and their exit codes.\n2. Compare with the last deployment.';

let t: ClusterTest;
let base: string;

beforeAll(async () => {
  const port = await freePort();
  const source = (extra: Record<string, unknown> = {}) => ({ format: 'alertmanager', auth: { bearer: TOKEN }, ...extra });
  t = await startClusterTest('intake-flow', (config, ctx) => {
    mkdirSync(join(ctx.dir, 'runbooks'));
    writeFileSync(join(ctx.dir, 'runbooks', 'crashloop.md'), RUNBOOK);
    // Tool calls take a while: a run is still under way when its alert resolves.
    config.mcpServers.demo.env = { DEMO_MCP_SLOW_MS: '1500' };
    config.intake = {
      port,
      host: '127.0.0.1',
      runbooks: [
        { name: 'crashloop', match: { reason: ['PodCrashLooping'] }, file: 'runbooks/crashloop.md' },
        { name: 'db-team', match: { labels: { team: 'db' } }, text: 'Check the connection pool first.' },
      ],
      sources: {
        grouped: source({ group: { by: ['alertname'], windowMs: 120_000 } }),
        ungrouped: source(),
        limited: source({ rateLimit: { max: 2, perMs: 60_000 } }),
        cancelling: source({ onResolved: 'cancel' }),
      },
    };
  });
  t.cluster.add(startService('intake', t.env));
  await t.cluster.get('intake').ready();
  base = `http://127.0.0.1:${port}`;
});

afterAll(async () => {
  await t?.close();
});

const startsAt = '2026-11-30T21:00:00Z';

function alert(fingerprint: string, labels: Record<string, string>, status: 'firing' | 'resolved' = 'firing') {
  return {
    status,
    labels: { service: 'checkout', severity: 'warning', ...labels },
    annotations: { summary: `${labels.alertname} ${fingerprint}`, runbook_url: 'https://runbooks.example/x' },
    startsAt,
    ...(status === 'resolved' ? { endsAt: '2026-11-30T21:30:00Z' } : {}),
    fingerprint,
  };
}

async function post(source: string, alerts: unknown[], status: 'firing' | 'resolved' = 'firing'): Promise<any> {
  const body = { version: '4', groupKey: `{}:{${source}}`, status, receiver: 'bosun', alerts };
  const res = await fetch(`${base}/alerts/${source}`, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
  });
  expect(res.status).toBe(202);
  return res.json();
}

const five = (prefix: string) => Array.from({ length: 5 }, (_, i) => alert(`${prefix}${i}`, { alertname: 'DiskFull', pod: `p${i}` }));

describe('grouping', () => {
  it('5 alerts of one group → 1 incident with grouping on', async () => {
    const answer = await post('grouped', five('ab00'));
    expect(answer.accepted).toHaveLength(1);
    const primary = answer.accepted[0].incidentId;
    expect(answer.joined).toEqual([{ incidentId: primary, alerts: expect.any(Array) }]);
    expect(answer.joined[0].alerts).toHaveLength(4);
    const job = (await Job.fromId(t.client.incidents, primary))!;
    expect(job.data.payload.grouped).toHaveLength(4);
    // Later in the window: another alert of the group joins the same incident.
    const later = await post('grouped', [alert('ab10', { alertname: 'DiskFull', pod: 'p9' })]);
    expect(later.accepted).toEqual([]);
    expect(later.joined).toEqual([{ incidentId: primary, alerts: [expect.stringMatching(/^am-ab10-/)] }]);
    const joined = (await t.ctx.redis.lrange(intakeJoinedKey(t.ctx.prefix, primary), 0, -1)).map((e) => JoinedAlert.parse(JSON.parse(e)));
    expect(joined).toHaveLength(5);
  });

  it('5 alerts of one group → 5 incidents with grouping off', async () => {
    const answer = await post('ungrouped', five('cd00'));
    expect(answer.accepted).toHaveLength(5);
    expect(answer.joined).toEqual([]);
    expect(new Set(answer.accepted.map((a: any) => a.runId)).size).toBe(5);
  });
});

describe('rate limit', () => {
  it('past the limit, incidents wait in a visible backlog instead of being dropped', async () => {
    const alerts = Array.from({ length: 5 }, (_, i) => alert(`ef00${i}`, { alertname: `Limited${i}` }));
    const answer = await post('limited', alerts);
    expect(answer.accepted).toHaveLength(5);
    const delays = answer.accepted.map((a: any) => a.delayedMs ?? 0);
    expect(delays.slice(0, 2)).toEqual([0, 0]);
    // The excess starts one every 30 s (2 per minute), in the order it came.
    for (const [i, d] of delays.slice(2).entries()) expect(d).toBeGreaterThan(20_000 + i * 30_000);
    const states = await Promise.all(
      answer.accepted.map(async (a: any) => (await Job.fromId(t.client.incidents, a.incidentId))!.getState()),
    );
    expect(states.slice(2)).toEqual(['delayed', 'delayed', 'delayed']);
    // Operators see the backlog as waiting runs.
    const runs = await runCli(t.env, ['runs', 'list', '--status', 'waiting', '--json']);
    expect(runs.code).toBe(0);
    const waiting = JSON.parse(runs.stdout).map((r: any) => r.incidentId);
    for (const a of answer.accepted.slice(2)) expect(waiting).toContain(a.incidentId);
  });
});

describe('resolved alerts', () => {
  it('a resolved alert cancels its run while it is still under way (onResolved: cancel)', async () => {
    const firing = alert('aa55', { alertname: 'SlowBurn' });
    const answer = await post('cancelling', [firing]);
    const { incidentId, runId } = answer.accepted[0];
    await t.client.events.waitFor((e) => e.runId === runId && e.type === 'tool.started', 60_000, 'a tool call of the run');
    const resolved = await post('cancelling', [alert('aa55', { alertname: 'SlowBurn' }, 'resolved')], 'resolved');
    expect(resolved.resolved).toEqual([expect.objectContaining({ incidentId, runId, run: 'cancelled' })]);
    const result = await t.client.result((await Job.fromId(t.client.incidents, incidentId))!, 90_000);
    expect(result.status).toBe('cancelled');
    expect(result.cancelled).toMatchObject({ by: 'intake/cancelling', reason: expect.stringContaining('the alert was resolved') });
  });
});

describe('runbooks', () => {
  it('a matched runbook travels with the incident, shows in run.started and in the run result', async () => {
    const answer = await post('ungrouped', [alert('bb66', { alertname: 'PodCrashLooping' })]);
    const { incidentId, runId } = answer.accepted[0];
    const job = (await Job.fromId(t.client.incidents, incidentId))!;
    expect(job.data.payload.runbook).toEqual({ name: 'crashloop', text: RUNBOOK });
    const started = await t.client.events.waitFor((e) => e.runId === runId && e.type === 'run.started', 60_000, 'run.started');
    expect(started.data.runbook).toEqual({ name: 'crashloop', url: 'https://runbooks.example/x' });
    const result = await t.client.result(job, 90_000);
    expect(result.runbook).toEqual({ name: 'crashloop', url: 'https://runbooks.example/x' });
  });

  it('matched by labels; no runbook leaves the incident without one', async () => {
    const answer = await post('ungrouped', [alert('cc77', { alertname: 'Whatever', team: 'db' }), alert('dd88', { alertname: 'Other' })]);
    const [byLabel, none] = await Promise.all(answer.accepted.map((a: any) => Job.fromId(t.client.incidents, a.incidentId)));
    expect(byLabel!.data.payload.runbook).toEqual({ name: 'db-team', text: 'Check the connection pool first.' });
    expect(none!.data.payload.runbook).toBeUndefined();
  });
});
