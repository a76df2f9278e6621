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
import { openContext, waitUntil, type TestContext } from '../helpers/index.js';
import { AlertmanagerProcess, alertmanagerVersion, type GettableAlert } from '../helpers/alertmanager.js';
import { startIntake, type IntakeUnderTest } from '../helpers/intake.js';

// The intake behind a real Prometheus Alertmanager (Debian's prometheus-alertmanager, 0.25 on
// Debian 12), with short group and repeat intervals so that it sends its repeats within seconds:
// ids are Alertmanager's own fingerprints, a group sent again and again lists each joined alert
// once (issue 19, item 10), its resolved notification cancels the run with the documented
// reason, and its 413 keeps the body's first bytes although it sends Content-Length (item 8).

const TOKEN = 'am-real-token';
const ALERTNAME = 'BosunRealCrashLoop';

let ctx: TestContext;
let intake: IntakeUnderTest;
let am: AlertmanagerProcess;

const webhooksTaken = (source: string) =>
  intake.process.lines.filter((l) => l.includes('"msg":"webhook taken"') && l.includes(`"source":"${source}"`)).length;

beforeAll(async () => {
  ctx = await openContext('intake-am');
  intake = await startIntake(ctx, {
    sources: {
      alertmanager: {
        format: 'alertmanager',
        auth: { bearer: TOKEN },
        onResolved: 'cancel',
        group: { by: ['alertname'], windowMs: 120_000 },
      },
      small: { format: 'alertmanager', auth: { bearer: TOKEN }, maxBodyBytes: 256 },
    },
  });
  const receiver = (name: string, path: string) => ({
    name,
    webhook_configs: [
      {
        url: `${intake.base}/alerts/${path}`,
        send_resolved: true,
        max_alerts: 0,
        http_config: { authorization: { type: 'Bearer', credentials: TOKEN } },
      },
    ],
  });
  am = await new AlertmanagerProcess(ctx.dir, {
    route: {
      receiver: 'bosun',
      group_by: ['alertname'],
      group_wait: '200ms',
      group_interval: '1s',
      repeat_interval: '1s',
      routes: [{ matchers: ['target="small"'], receiver: 'small' }],
    },
    receivers: [receiver('bosun', 'alertmanager'), receiver('small', 'small')],
  }).start();
});

afterAll(async () => {
  await am?.stop();
  await intake?.close();
  await ctx?.close();
});

describe(`a real Alertmanager (${alertmanagerVersion()})`, () => {
  const startsAt = new Date(Date.now() - 60_000).toISOString();
  const pods = ['p1', 'p2', 'p3', 'p4'];
  const alerts = (endsAt?: string) =>
    pods.map((pod) => ({
      labels: { alertname: ALERTNAME, pod, severity: 'critical' },
      annotations: { summary: `${pod} is crash looping` },
      startsAt,
      ...(endsAt ? { endsAt } : {}),
    }));

  it('its fingerprints are the ids; its repeats run once and list each joined alert once; its resolution cancels', async () => {
    await am.post(alerts());
    let held: GettableAlert[] = [];
    await waitUntil(
      async () => (held = (await am.alerts()).filter((a) => a.labels.alertname === ALERTNAME)).length === 4,
      10_000,
      'alertmanager holds the 4 alerts',
    );
    const ids = held.map((a) => `am-${a.fingerprint}-${Date.parse(a.startsAt)}`);
    expect(held.every((a) => /^[0-9a-f]{16}$/.test(a.fingerprint))).toBe(true);
    // The first notification and at least two repeats of the same group.
    await waitUntil(
      () => webhooksTaken('alertmanager') >= 3,
      20_000,
      () => `3 notifications taken; ${am.log.slice(-2000)}`,
    );

    const jobs = (await Promise.all(ids.map((id) => Job.fromId(intake.incidents, id)))).filter((j) => j !== undefined);
    expect(jobs).toHaveLength(1);
    const primary = String(jobs[0]!.id);
    const joined = (await ctx.redis.lrange(intakeJoinedKey(ctx.prefix, primary), 0, -1)).map((e) => JoinedAlert.parse(JSON.parse(e)));
    expect(joined.map((j) => j.incidentId).sort()).toEqual(ids.filter((id) => id !== primary).sort());

    const endsAt = new Date().toISOString();
    await am.post(alerts(endsAt));
    const resolvedKey = intakeResolvedKey(ctx.prefix, primary);
    await waitUntil(
      async () => (await ctx.redis.get(resolvedKey)) !== null,
      15_000,
      () => `the resolution of ${primary}; ${am.log.slice(-2000)}`,
    );
    const resolution = IntakeResolution.parse(JSON.parse((await ctx.redis.get(resolvedKey))!));
    expect(resolution).toMatchObject({ incidentId: primary, source: 'alertmanager', run: 'cancelled' });
    const cancel = RunCancellation.parse(
      JSON.parse((await ctx.redis.get(runCancelKey(ctx.prefix, runIdFor(primary, jobs[0]!.timestamp))))!),
    );
    expect(cancel.by).toBe('intake/alertmanager');
    expect(cancel.reason).toBe(`the alert was resolved (ends at ${resolution.endsAt})`);
    expect(Date.parse(resolution.endsAt!)).toBe(Date.parse(endsAt));
  });

  it('a notification past maxBodyBytes is 413, and its first bytes are kept although Alertmanager sends Content-Length', async () => {
    await am.post([{ labels: { alertname: 'BosunRealTooLarge', target: 'small' }, annotations: { summary: 'x'.repeat(300) } }]);
    let poison: Awaited<ReturnType<IntakeUnderTest['poison']>> = [];
    await waitUntil(
      async () => (poison = await intake.poison('small')).length > 0,
      15_000,
      () => `a poison entry; ${am.log.slice(-2000)}`,
    );
    const entry = poison[0]!;
    expect(entry.reason).toBe('intake/small: request body larger than 256 bytes');
    const input = entry.input as { contentLength: number; bodyStart: string };
    expect(input.contentLength).toBeGreaterThan(256);
    expect(input.bodyStart).toHaveLength(Math.min(4096, input.contentLength));
    expect(JSON.parse(input.bodyStart)).toMatchObject({ receiver: 'small', version: '4', status: 'firing' });
  });
});
