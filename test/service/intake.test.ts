import { createHmac } from 'node:crypto';
import { request } from 'node:http';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Job } from 'bullmq';
import {
  IntakeResolution,
  JoinedAlert,
  RunCancellation,
  intakeJoinedKey,
  intakeResolvedKey,
  runCancelKey,
  runIdFor,
} from '@bosun/contract';
import { OwnServer, ROOT, openContext, waitUntil, type TestContext } from '../helpers/index.js';
import { startIntake, type IntakeUnderTest } from '../helpers/intake.js';

// The intake's HTTP surface as one process with real Redis and NATS, and nothing behind it: status
// codes, the mapping to incident jobs, poison entries, ids no sender can collide (issue 19,
// items 5-10), and 503 while Redis is down. Runs end to end are in test/e2e/intake.test.ts.

const TOKEN = 'am-token-of-the-test';
const SECRET = 'pager-secret-of-the-test';
const FIRING = readFileSync(join(ROOT, 'test/fixtures/alertmanager/firing.json'), 'utf8');
const STARTS_MS = Date.parse('2026-11-30T21:58:12.345Z');

const intakeSection = {
  redisTimeoutMs: 2_000,
  sources: {
    am: { format: 'alertmanager', auth: { bearer: '${TEST_INTAKE_TOKEN}' } },
    amc: { format: 'alertmanager', auth: { bearer: '${TEST_INTAKE_TOKEN}' }, onResolved: 'cancel' },
    grouped: { format: 'alertmanager', auth: { bearer: '${TEST_INTAKE_TOKEN}' }, group: { by: ['alertname'], windowMs: 120_000 } },
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
    // The default body limit (1 MiB), for a body that is deep rather than large.
    deep: {
      format: 'generic',
      auth: { hmac: { secret: '${TEST_PAGER_SECRET}', header: 'x-signature' } },
      mapping: { id: '$.incident.id' },
    },
  },
};
const secrets = { TEST_INTAKE_TOKEN: TOKEN, TEST_PAGER_SECRET: SECRET };

let ctx: TestContext;
let intake: IntakeUnderTest;

beforeAll(async () => {
  ctx = await openContext('intake-svc');
  intake = await startIntake(ctx, intakeSection, { env: secrets });
});

afterAll(async () => {
  await intake?.close();
  await ctx?.close();
});

const bearer = { authorization: `Bearer ${TOKEN}` };
const sign = (body: string, secret = SECRET) => ({ 'x-signature': `sha256=${createHmac('sha256', secret).update(body).digest('hex')}` });
const json = async (res: Response) => (await res.json()) as any;

/** The fixture with its one alert changed. */
function notification(alert: Record<string, unknown>, status: 'firing' | 'resolved' = 'firing'): string {
  const n = JSON.parse(FIRING);
  n.status = status;
  n.alerts[0] = { ...n.alerts[0], status, ...alert };
  return JSON.stringify(n);
}

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

describe('Alertmanager webhook', () => {
  it('a firing alert becomes an incident job: id from fingerprint and start, fields from labels and annotations', async () => {
    const res = await intake.post('am', FIRING, bearer);
    expect(res.status).toBe(202);
    const incidentId = `am-4c3a1e0f9b2d7a65-${STARTS_MS}`;
    const answer = await json(res);
    expect(answer.accepted).toEqual([{ incidentId, runId: expect.stringMatching(/^r[0-9a-f]{20}$/), duplicate: false }]);
    const job = (await Job.fromId(intake.incidents, incidentId))!;
    expect(answer.accepted[0].runId).toBe(runIdFor(incidentId, job.timestamp));
    expect(job.data).toMatchObject({
      id: incidentId,
      source: 'am',
      reason: 'PodCrashLooping',
      severity: 'critical',
      labels: { service: 'checkout', pod: 'checkout-7d9f-x2k4q' },
      payload: {
        runbookUrl: 'https://runbooks.example/pod-crashlooping',
        description: expect.stringContaining('restarted 6 times'),
        alert: { fingerprint: '4c3a1e0f9b2d7a65', startsAt: '2026-11-30T21:58:12.345Z' },
      },
    });
    expect(job.data.summary).toContain('checkout pod is crash looping');
  });

  it('the same notification posted 3 times is 1 job', async () => {
    const body = notification({ fingerprint: 'aaaa000011112222' });
    const answers: { incidentId: string; runId: string; duplicate: boolean }[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await intake.post('am', body, bearer);
      expect(res.status).toBe(202);
      answers.push((await json(res)).accepted[0]);
    }
    expect(new Set(answers.map((a) => a.runId)).size).toBe(1);
    expect(answers.map((a) => a.duplicate)).toEqual([false, true, true]);
    const jobs = await intake.incidents.getJobs(['waiting', 'active', 'completed', 'failed', 'delayed']);
    expect(jobs.filter((j) => j.id === answers[0]!.incidentId)).toHaveLength(1);
  });

  it('a resolved alert is recorded against its incident (onResolved: record)', async () => {
    const res = await intake.post('am', notification({ endsAt: '2026-11-30T22:10:00Z' }, 'resolved'), bearer);
    expect(res.status).toBe(202);
    const answer = await json(res);
    expect(answer.accepted).toEqual([]);
    const incidentId = `am-4c3a1e0f9b2d7a65-${STARTS_MS}`;
    expect(answer.resolved).toEqual([expect.objectContaining({ incidentId, run: 'recorded', endsAt: '2026-11-30T22:10:00Z' })]);
    const stored = IntakeResolution.parse(JSON.parse((await ctx.redis.get(intakeResolvedKey(ctx.prefix, incidentId)))!));
    expect(stored).toMatchObject({ incidentId, source: 'am', run: 'recorded' });
  });

  it('refuses a request without the bearer token (401) and queues nothing', async () => {
    const res = await intake.post('am', notification({ fingerprint: 'c0ffee0000000001' }), { authorization: 'Bearer wrong' });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toContain('invalid_token');
    expect((await json(res)).error).toContain('not valid');
    expect((await intake.post('am', FIRING)).status).toBe(401);
    expect(await Job.fromId(intake.incidents, `am-c0ffee0000000001-${STARTS_MS}`)).toBeUndefined();
  });

  it('a body that is not an Alertmanager notification is 400, kept as poison', async () => {
    const body = JSON.stringify({ hello: 'world' });
    const res = await intake.post('am', body, bearer);
    expect(res.status).toBe(400);
    expect((await json(res)).error).toMatch(/^not an Alertmanager webhook \(version 4\): .*version/);
    expect((await intake.poison('am')).find((d) => JSON.stringify(d.input) === body)).toBeDefined();
  });

  it('an unknown source is 404', async () => {
    const res = await intake.post('nope', FIRING, bearer);
    expect(res.status).toBe(404);
    expect((await json(res)).error).toBe('no source nope');
  });
});

describe('ids no sender can collide (items 5, 6)', () => {
  const victimFp = 'feed000011112222';
  const victimId = `am-${victimFp}-${STARTS_MS}`;

  it('a resolved "<fp>/" with the victim\'s start does not cancel the victim; a firing "<fp> " is not its duplicate', async () => {
    const first = await json(await intake.post('amc', notification({ fingerprint: victimFp }), bearer));
    expect(first.accepted).toEqual([expect.objectContaining({ incidentId: victimId, duplicate: false })]);
    const victimRun = first.accepted[0].runId as string;

    const attack = await intake.post(
      'amc',
      notification({ fingerprint: `${victimFp}/`, endsAt: '2026-11-30T22:00:00Z' }, 'resolved'),
      bearer,
    );
    expect(attack.status).toBe(202);
    const [resolved] = (await json(attack)).resolved;
    expect(resolved.incidentId).not.toBe(victimId);
    expect(resolved.run).toBe('not-started');
    expect(await ctx.redis.get(runCancelKey(ctx.prefix, victimRun))).toBeNull();

    const twin = await json(await intake.post('amc', notification({ fingerprint: `${victimFp} ` }), bearer));
    expect(twin.accepted).toHaveLength(1);
    expect(twin.accepted[0].incidentId).not.toBe(victimId);
    expect(twin.accepted[0].duplicate).toBe(false);
    expect(await Job.fromId(intake.incidents, twin.accepted[0].incidentId)).toBeDefined();

    // The victim's own resolution does cancel it, by intake/<source>, with the documented reason.
    const res = await json(
      await intake.post('amc', notification({ fingerprint: victimFp, endsAt: '2026-11-30T22:10:00Z' }, 'resolved'), bearer),
    );
    expect(res.resolved).toEqual([expect.objectContaining({ incidentId: victimId, run: 'cancelled' })]);
    const job = (await Job.fromId(intake.incidents, victimId))!;
    const cancel = RunCancellation.parse(JSON.parse((await ctx.redis.get(runCancelKey(ctx.prefix, runIdFor(victimId, job.timestamp))))!));
    expect(cancel).toMatchObject({ by: 'intake/amc', reason: 'the alert was resolved (ends at 2026-11-30T22:10:00Z)' });
  });

  it('a generic id that needs hashing and a sender id spelled like a hash are two incidents', async () => {
    const post = async (id: string) => {
      const body = event(id);
      const res = await intake.post('pager', body, sign(body));
      expect(res.status).toBe(202);
      return (await json(res)).accepted[0] as { incidentId: string; duplicate: boolean };
    };
    const hashed = await post('a b/c X');
    expect(hashed.incidentId).toMatch(/^pager-_[0-9a-f]{32}$/);
    const spelled = await post(hashed.incidentId.slice('pager-'.length));
    const oldSpelling = await post('h4410031cac8c70ab');
    expect(oldSpelling.incidentId).toBe('pager-h4410031cac8c70ab');
    for (const a of [spelled, oldSpelling]) {
      expect(a.duplicate).toBe(false);
      expect(a.incidentId).not.toBe(hashed.incidentId);
    }
    expect((await Job.fromId(intake.incidents, hashed.incidentId))!.data.payload.intake.id).toBe('a b/c X');
  });
});

describe('generic webhook', () => {
  it('maps the body through the JSON paths of the config (HMAC good)', async () => {
    const body = event('PD-1234');
    const res = await intake.post('pager', body, sign(body));
    expect(res.status).toBe(202);
    expect((await json(res)).accepted[0].incidentId).toBe('pager-PD-1234');
    const job = (await Job.fromId(intake.incidents, 'pager-PD-1234'))!;
    expect(job.data).toMatchObject({
      source: 'pager',
      reason: 'HighLatency',
      severity: 'critical',
      summary: 'checkout p99 over 2 s\n\nsince 21:50',
      labels: { service: 'checkout', team: 'shop' },
      payload: { runbookUrl: 'https://runbooks.example/latency', intake: { id: 'PD-1234' }, webhook: JSON.parse(body) },
    });
  });

  it('a resolution (status path = resolvedValue) is recorded against the mapped incident', async () => {
    const body = JSON.stringify({ event: 'resolved', incident: { id: 'PD-1234' } });
    const res = await intake.post('pager', body, sign(body));
    expect(res.status).toBe(202);
    const answer = await json(res);
    expect(answer.accepted).toEqual([]);
    expect(answer.resolved).toEqual([expect.objectContaining({ incidentId: 'pager-PD-1234', source: 'pager', run: 'recorded' })]);
  });

  it('a wrong signature is 401 and queues nothing', async () => {
    const body = event('PD-2');
    const res = await intake.post('pager', body, sign(body, 'not-the-secret'));
    expect(res.status).toBe(401);
    expect((await json(res)).error).toContain('does not match');
    expect((await intake.post('pager', body)).status).toBe(401);
    expect(await Job.fromId(intake.incidents, 'pager-PD-2')).toBeUndefined();
  });

  it('a malformed body is 400, kept as poison with its text; a body without the id is 400', async () => {
    const body = '{"event": "triggered", "incident": ';
    const res = await intake.post('pager', body, sign(body));
    expect(res.status).toBe(400);
    expect((await json(res)).error).toMatch(/^body: not valid JSON/);
    expect((await intake.poison('pager')).find((d) => d.input === body)).toBeDefined();
    const noId = JSON.stringify({ incident: { title: 'x' } });
    const res2 = await intake.post('pager', noId, sign(noId));
    expect(res2.status).toBe(400);
    expect((await json(res2)).error).toBe('mapping.id: $.incident.id found no string or number in the body');
  });

  it('a signed body 5,000 levels deep is 400, kept as poison (item 7)', async () => {
    const body = `{"incident":{"id":"PD-deep","x":${'['.repeat(5_000)}${']'.repeat(5_000)}}}`;
    const res = await intake.post('deep', body, sign(body));
    expect(res.status).toBe(400);
    expect((await json(res)).error).toBe('body: nests objects and arrays more than 64 levels deep');
    const [poison] = (await intake.poison('deep')).slice(-1);
    expect(poison!.reason).toBe('intake/deep: body: nests objects and arrays more than 64 levels deep');
    expect(poison!.input).toMatchObject({ incident: { id: 'PD-deep' } });
    expect(poison!.truncated).toEqual([expect.stringMatching(/nested deeper than 64 levels/)]);
    expect(await Job.fromId(intake.incidents, 'deep-PD-deep')).toBeUndefined();
  });
});

describe('oversized bodies (item 8)', () => {
  const big = event('PD-3', { body: `${'0123456789abcdef'.repeat(256)}${'x'.repeat(6_000)}` });
  const expectKept = async (contentLength: number | undefined) => {
    const poison = (await intake.poison('pager')).filter((d) => d.reason.includes('larger than'));
    const entry = poison.at(-1)!.input as { source: string; contentLength?: number; bodyStart: string };
    expect(entry.source).toBe('pager');
    expect(entry.contentLength).toBe(contentLength);
    expect(entry.bodyStart).toBe(big.slice(0, 4096));
  };

  it('with Content-Length: 413, and the first 4 KiB kept as poison', async () => {
    const res = await intake.post('pager', big, sign(big));
    expect(res.status).toBe(413);
    expect((await json(res)).error).toBe('request body larger than 2048 bytes');
    await expectKept(Buffer.byteLength(big));
  });

  it('chunked: 413, and the same first 4 KiB kept', async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        `${intake.base}/alerts/pager`,
        { method: 'POST', headers: { 'content-type': 'application/json', ...sign(big) } },
        (res) => {
          res.resume();
          resolve(res.statusCode!);
        },
      );
      req.on('error', reject);
      // Several writes without a length: Node sends them chunked.
      for (let i = 0; i < big.length; i += 1000) req.write(big.slice(i, i + 1000));
      req.end();
    });
    expect(status).toBe(413);
    await expectKept(undefined);
  });
});

describe('labels named after Object.prototype (item 9)', () => {
  it('__proto__, constructor and toString are kept in labels and payload.alert', async () => {
    const n = JSON.parse(notification({ fingerprint: 'babe000011112222' }));
    // JSON.parse makes `__proto__` an own key, as it does for the intake.
    const hostile = JSON.parse('{"__proto__":"p","constructor":"c","toString":"t"}');
    const alert = { ...n.alerts[0], labels: { ...n.alerts[0].labels, ...hostile }, annotations: { ...hostile, summary: 's' } };
    const withLabels = JSON.stringify({ ...n, alerts: [alert] });
    expect(withLabels).toContain('"__proto__":"p"');
    const res = await intake.post('am', withLabels, bearer);
    expect(res.status).toBe(202);
    const job = (await Job.fromId(intake.incidents, `am-babe000011112222-${STARTS_MS}`))!;
    const own = (o: object, k: string) => Object.getOwnPropertyDescriptor(o, k)?.value;
    for (const [k, v] of [
      ['__proto__', 'p'],
      ['constructor', 'c'],
      ['toString', 't'],
    ] as const) {
      expect(own(job.data.labels, k), `labels.${k}`).toBe(v);
      expect(own(job.data.payload.alert.labels, k), `payload.alert.labels.${k}`).toBe(v);
      expect(own(job.data.payload.alert.annotations, k), `payload.alert.annotations.${k}`).toBe(v);
    }
  });
});

describe('smaller findings (item 10)', () => {
  it('a group sent again and again lists each joined alert once', async () => {
    const n = JSON.parse(FIRING);
    const alerts = ['a1', 'a2', 'a3', 'a4'].map((s, i) => ({
      ...n.alerts[0],
      fingerprint: `9f00${i}00011112222`,
      annotations: { summary: `pod ${s} crash looping` },
    }));
    const body = JSON.stringify({ ...n, alerts });
    const primary = `am-9f00000011112222-${STARTS_MS}`;
    for (let i = 0; i < 3; i++) expect((await intake.post('grouped', body, bearer)).status).toBe(202);
    const joined = (await ctx.redis.lrange(intakeJoinedKey(ctx.prefix, primary), 0, -1)).map((e) => JoinedAlert.parse(JSON.parse(e)));
    expect(joined.map((j) => j.incidentId)).toEqual([1, 2, 3].map((i) => `am-9f00${i}00011112222-${STARTS_MS}`));
    // A fifth alert of the group, in a later notification that repeats the four: one more entry.
    const more = JSON.stringify({ ...n, alerts: [...alerts, { ...alerts[0], fingerprint: '9f00400011112222' }] });
    expect((await intake.post('grouped', more, bearer)).status).toBe(202);
    expect(await ctx.redis.llen(intakeJoinedKey(ctx.prefix, primary))).toBe(4);
  });

  it('text/plain is 415 (kept as poison); application/json with a charset, +json and no content-type are taken', async () => {
    const body = notification({ fingerprint: 'd00d000011112222' });
    const res = await intake.post('am', body, { ...bearer, 'content-type': 'text/plain;charset=UTF-8' });
    expect(res.status).toBe(415);
    expect(res.headers.get('accept')).toBe('application/json');
    expect((await json(res)).error).toBe('content-type "text/plain;charset=UTF-8" is not JSON: send application/json');
    expect((await intake.poison('am')).at(-1)).toMatchObject({
      reason: 'intake/am: content-type "text/plain;charset=UTF-8" is not JSON: send application/json',
      input: body,
    });
    expect(await Job.fromId(intake.incidents, `am-d00d000011112222-${STARTS_MS}`)).toBeUndefined();
    for (const [fp, type] of [
      ['d00d000011112223', 'application/json; charset=utf-8'],
      ['d00d000011112224', 'application/vnd.alert+json'],
    ] as const)
      expect((await intake.post('am', notification({ fingerprint: fp }), { ...bearer, 'content-type': type })).status, type).toBe(202);
    const untyped = await new Promise<number>((resolve, reject) => {
      const b = notification({ fingerprint: 'd00d000011112225' });
      const req = request(
        `${intake.base}/alerts/am`,
        { method: 'POST', headers: { ...bearer, 'content-length': Buffer.byteLength(b) } },
        (r) => {
          r.resume();
          resolve(r.statusCode!);
        },
      );
      req.on('error', reject);
      req.end(b);
    });
    expect(untyped).toBe(202);
  });
});

describe('Redis unavailable', () => {
  it('answers 503 and never 2xx for an alert that was not queued, and takes it once Redis is back', async () => {
    const redis = await new OwnServer('redis', ctx.dir).start();
    const own = await startIntake(ctx, intakeSection, { env: { ...secrets, REDIS_URL: redis.url }, name: 'intake-own-redis' });
    try {
      expect((await own.post('am', FIRING, bearer)).status).toBe(202);
      await redis.stop();
      const down = notification({ fingerprint: 'bbbb000011112222' });
      const res = await own.post('am', down, bearer);
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('5');
      expect((await json(res)).error).toMatch(/^Redis .*(was not|may not be) stored/);
      // Bad input cannot be kept either: 503 too, so that the sender tries again.
      expect((await own.post('am', '{', bearer)).status).toBe(503);
      await redis.start();
      await waitUntil(async () => (await own.post('am', down, bearer)).status === 202, 30_000, 'the intake takes alerts again');
    } finally {
      await own.close();
      await redis.stop();
    }
  });
});
