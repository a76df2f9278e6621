import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Job } from 'bullmq';
import { IntakeResolution, intakeResolvedKey, runIdFor } from '@bosun/contract';
import {
  OwnServer,
  ROOT,
  freePort,
  startClusterTest,
  startService,
  waitUntil,
  writeConfig,
  type ClusterTest,
  type ServiceProcess,
} from '../helpers/index.js';

// The alert intake as a process of its own, in front of a whole cluster (gateway, coordinator,
// specialist, fake model): Alertmanager and generic webhooks in, runs out; auth, bad input and
// Redis down.

const TOKEN = 'am-token-of-the-test';
const SECRET = 'pager-secret-of-the-test';
const FIRING = readFileSync(join(ROOT, 'test/fixtures/alertmanager/firing.json'), 'utf8');

let t: ClusterTest;
let intake: ServiceProcess;
let base: string;
let intakeConfig: Record<string, any>;

function intakeSection(port: number): Record<string, any> {
  return {
    port,
    host: '127.0.0.1',
    redisTimeoutMs: 2_000,
    sources: {
      am: { format: 'alertmanager', auth: { bearer: '${TEST_INTAKE_TOKEN}' } },
      pager: {
        format: 'generic',
        auth: { hmac: { secret: '${TEST_PAGER_SECRET}', header: 'x-signature' } },
        mapping: {
          id: '$.incident.id',
          reason: '$.incident.type',
          summary: '$.incident.title',
          description: '$.incident.body',
          severity: '$.incident.urgency',
          labels: '$.incident.tags',
          runbookUrl: "$.incident.links['runbook']",
          status: '$.event',
        },
        severities: { urgent: 'critical' },
        maxBodyBytes: 2048,
      },
    },
  };
}

const secrets = { TEST_INTAKE_TOKEN: TOKEN, TEST_PAGER_SECRET: SECRET };

beforeAll(async () => {
  const port = await freePort();
  t = await startClusterTest('intake', (config) => {
    intakeConfig = intakeSection(port);
    config.intake = intakeConfig;
  });
  intake = t.cluster.add(startService('intake', { ...t.env, ...secrets }));
  await intake.ready();
  base = `http://127.0.0.1:${port}`;
});

afterAll(async () => {
  await t?.close();
});

function post(path: string, body: string, headers: Record<string, string> = {}, url = base): Promise<Response> {
  return fetch(`${url}${path}`, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
}

const bearer = { authorization: `Bearer ${TOKEN}` };
const sign = (body: string, secret = SECRET) => ({ 'x-signature': `sha256=${createHmac('sha256', secret).update(body).digest('hex')}` });

async function poisonFor(source: string): Promise<any[]> {
  const all = await t.client.deadLetters();
  return all.filter((d) => d.kind === 'poison' && d.reason.startsWith(`intake/${source}:`));
}

describe('Alertmanager webhook', () => {
  it('a firing alert becomes an incident whose run completes', async () => {
    const res = await post('/alerts/am', FIRING, bearer);
    expect(res.status).toBe(202);
    const answer = (await res.json()) as any;
    const startsMs = Date.parse('2026-11-30T21:58:12.345Z');
    const incidentId = `am-4c3a1e0f9b2d7a65-${startsMs}`;
    expect(answer.accepted).toEqual([{ incidentId, runId: expect.stringMatching(/^r[0-9a-f]{20}$/), duplicate: false }]);
    const job = (await Job.fromId(t.client.incidents, incidentId))!;
    expect(job.data).toMatchObject({
      id: incidentId,
      source: 'am',
      reason: 'PodCrashLooping',
      severity: 'critical',
      labels: { service: 'checkout', pod: 'checkout-7d9f-x2k4q' },
      payload: { runbookUrl: 'https://runbooks.example/pod-crashlooping', description: expect.stringContaining('restarted 6 times') },
    });
    expect(job.data.summary).toContain('checkout pod is crash looping');
    const result = await t.client.result(job, 90_000);
    expect(result).toMatchObject({ incidentId, runId: answer.accepted[0].runId, status: 'completed' });
    expect(result.runId).toBe(runIdFor(incidentId, job.timestamp));
  });

  it('the same notification posted 3 times starts 1 run', async () => {
    const again = JSON.parse(FIRING);
    again.alerts[0].fingerprint = 'aaaa000011112222';
    const body = JSON.stringify(again);
    const answers = [];
    for (let i = 0; i < 3; i++) {
      const res = await post('/alerts/am', body, bearer);
      expect(res.status).toBe(202);
      answers.push(((await res.json()) as any).accepted[0]);
    }
    expect(new Set(answers.map((a) => a.runId)).size).toBe(1);
    expect(answers.map((a) => a.duplicate)).toEqual([false, true, true]);
    const jobs = await t.client.incidents.getJobs(['waiting', 'active', 'waiting-children', 'completed', 'failed', 'delayed']);
    expect(jobs.filter((j) => j.id === answers[0].incidentId)).toHaveLength(1);
  });

  it('a resolved alert is recorded against its incident', async () => {
    const resolved = JSON.parse(FIRING);
    resolved.status = 'resolved';
    resolved.alerts[0].status = 'resolved';
    resolved.alerts[0].endsAt = '2026-11-30T22:10:00Z';
    const res = await post('/alerts/am', JSON.stringify(resolved), bearer);
    expect(res.status).toBe(202);
    const answer = (await res.json()) as any;
    expect(answer.accepted).toEqual([]);
    const incidentId = `am-4c3a1e0f9b2d7a65-${Date.parse('2026-11-30T21:58:12.345Z')}`;
    // The source records resolutions (onResolved: record): its run is left alone.
    expect(answer.resolved).toEqual([expect.objectContaining({ incidentId, run: 'recorded', endsAt: '2026-11-30T22:10:00Z' })]);
    const stored = IntakeResolution.parse(JSON.parse((await t.ctx.redis.get(intakeResolvedKey(t.ctx.prefix, incidentId)))!));
    expect(stored).toMatchObject({ incidentId, source: 'am', run: 'recorded' });
  });

  it('refuses a request without the bearer token (401) and queues nothing', async () => {
    const res = await post('/alerts/am', FIRING, { authorization: 'Bearer wrong' });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toContain('invalid_token');
    expect(((await res.json()) as any).error).toContain('not valid');
    expect((await post('/alerts/am', FIRING)).status).toBe(401);
  });

  it('a body that is not an Alertmanager notification is 400, kept as poison', async () => {
    const body = JSON.stringify({ hello: 'world' });
    const res = await post('/alerts/am', body, bearer);
    expect(res.status).toBe(400);
    expect(((await res.json()) as any).error).toMatch(/^not an Alertmanager webhook \(version 4\): .*version/);
    const poison = await poisonFor('am');
    expect(poison.find((d) => JSON.stringify(d.input) === body)).toBeDefined();
  });

  it('an unknown source is 404', async () => {
    expect((await post('/alerts/nope', FIRING, bearer)).status).toBe(404);
  });
});

describe('generic webhook', () => {
  const event = (id: string, extra: Record<string, unknown> = {}) =>
    JSON.stringify({
      event: 'triggered',
      incident: {
        id,
        type: 'HighLatency',
        title: 'checkout p99 over 2 s',
        body: 'since 21:50',
        urgency: 'urgent',
        tags: { service: 'checkout', team: 'shop' },
        links: { runbook: 'https://runbooks.example/latency' },
        ...extra,
      },
    });

  it('maps the body through the JSON paths of the config (HMAC good)', async () => {
    const body = event('PD-1234');
    const res = await post('/alerts/pager', body, sign(body));
    expect(res.status).toBe(202);
    const [accepted] = ((await res.json()) as any).accepted;
    expect(accepted.incidentId).toBe('pager-PD-1234');
    const job = (await Job.fromId(t.client.incidents, 'pager-PD-1234'))!;
    expect(job.data).toMatchObject({
      source: 'pager',
      reason: 'HighLatency',
      severity: 'critical',
      summary: 'checkout p99 over 2 s\n\nsince 21:50',
      labels: { service: 'checkout', team: 'shop' },
      payload: { runbookUrl: 'https://runbooks.example/latency', intake: { id: 'PD-1234' } },
    });
    const result = await t.client.result(job, 90_000);
    expect(result.status).toBe('completed');
  });

  it('a resolution (status path = resolvedValue) is recorded against the mapped incident', async () => {
    const body = JSON.stringify({ event: 'resolved', incident: { id: 'PD-1234' } });
    const res = await post('/alerts/pager', body, sign(body));
    expect(res.status).toBe(202);
    const answer = (await res.json()) as any;
    expect(answer.accepted).toEqual([]);
    expect(answer.resolved).toEqual([expect.objectContaining({ incidentId: 'pager-PD-1234', source: 'pager', run: 'recorded' })]);
  });

  it('a wrong signature is 401 and queues nothing', async () => {
    const body = event('PD-2');
    const res = await post('/alerts/pager', body, sign(body, 'not-the-secret'));
    expect(res.status).toBe(401);
    expect(((await res.json()) as any).error).toContain('does not match');
    expect((await post('/alerts/pager', body)).status).toBe(401);
    expect(await Job.fromId(t.client.incidents, 'pager-PD-2')).toBeUndefined();
  });

  it('an oversized body is 413, its first bytes kept as poison', async () => {
    const body = event('PD-3', { body: 'x'.repeat(4000) });
    const res = await post('/alerts/pager', body, sign(body));
    expect(res.status).toBe(413);
    expect(((await res.json()) as any).error).toBe('request body larger than 2048 bytes');
    const poison = await poisonFor('pager');
    expect(poison.find((d) => d.reason.includes('larger than') && d.input.contentLength === Buffer.byteLength(body))).toBeDefined();
  });

  it('a malformed body is 400, kept as poison with its text', async () => {
    const body = '{"event": "triggered", "incident": ';
    const res = await post('/alerts/pager', body, sign(body));
    expect(res.status).toBe(400);
    expect(((await res.json()) as any).error).toMatch(/^body: not valid JSON/);
    expect((await poisonFor('pager')).find((d) => d.input === body)).toBeDefined();
    const noId = JSON.stringify({ incident: { title: 'x' } });
    const res2 = await post('/alerts/pager', noId, sign(noId));
    expect(res2.status).toBe(400);
    expect(((await res2.json()) as any).error).toBe('mapping.id: $.incident.id found no string or number in the body');
  });
});

describe('Redis unavailable', () => {
  it('answers 503 and never 2xx for an alert that was not queued', async () => {
    const redis = await new OwnServer('redis', t.ctx.dir).start();
    const port = await freePort();
    const file = writeConfig(t.ctx, { ...readConfig(), intake: { ...intakeConfig, port } }, 'intake-own-redis.json');
    const own = t.cluster.add(
      startService('intake', { ...t.env, ...secrets, BOSUN_CONFIG: file, REDIS_URL: redis.url }, { name: 'intake-own' }),
    );
    try {
      await own.ready();
      const url = `http://127.0.0.1:${port}`;
      expect((await post('/alerts/am', FIRING, bearer, url)).status).toBe(202);
      await redis.stop();
      const down = JSON.parse(FIRING);
      down.alerts[0].fingerprint = 'bbbb000011112222';
      const res = await post('/alerts/am', JSON.stringify(down), bearer, url);
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('5');
      expect(((await res.json()) as any).error).toMatch(/^Redis .*(was not|may not be) stored/);
      // Bad input cannot be kept either: 503 too, so that the sender tries again.
      expect((await post('/alerts/am', '{', bearer, url)).status).toBe(503);
      await redis.start();
      await waitUntil(
        async () => (await post('/alerts/am', JSON.stringify(down), bearer, url)).status === 202,
        30_000,
        'intake takes alerts again',
      );
    } finally {
      await own.stop();
      await redis.stop();
    }
  });
});

function readConfig(): Record<string, any> {
  return JSON.parse(readFileSync(t.env.BOSUN_CONFIG!, 'utf8'));
}
