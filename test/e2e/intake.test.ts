import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Job } from 'bullmq';
import { runIdFor } from '@bosun/contract';
import { ROOT, freePort, startClusterTest, startService, type ClusterTest } from '../helpers/index.js';

// The alert intake as a process of its own, in front of a whole cluster (gateway, coordinator,
// specialist, fake model): an Alertmanager alert and a generic webhook each become a run that
// completes. The intake's own surface (status codes, mapping, poison, ids, 503 with Redis down)
// is tested without a cluster in test/service/intake.test.ts.

const TOKEN = 'am-token-of-the-test';
const SECRET = 'pager-secret-of-the-test';
const FIRING = readFileSync(join(ROOT, 'test/fixtures/alertmanager/firing.json'), 'utf8');

let t: ClusterTest;
let base: string;

beforeAll(async () => {
  const port = await freePort();
  t = await startClusterTest('intake', (config) => {
    config.intake = {
      port,
      host: '127.0.0.1',
      sources: {
        am: { format: 'alertmanager', auth: { bearer: '${TEST_INTAKE_TOKEN}' } },
        pager: {
          format: 'generic',
          auth: { hmac: { secret: '${TEST_PAGER_SECRET}', header: 'x-signature' } },
          mapping: { id: '$.incident.id', reason: '$.incident.type', summary: '$.incident.title' },
        },
      },
    };
  });
  const intake = t.cluster.add(
    startService('intake', { ...t.env, LOG_LEVEL: 'info', TEST_INTAKE_TOKEN: TOKEN, TEST_PAGER_SECRET: SECRET }),
  );
  await intake.ready();
  base = `http://127.0.0.1:${port}`;
});

afterAll(async () => {
  await t?.close();
});

function post(path: string, body: string, headers: Record<string, string>): Promise<Response> {
  return fetch(`${base}${path}`, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
}

describe('intake in front of a cluster', () => {
  it('a firing Alertmanager alert becomes an incident whose run completes', async () => {
    const res = await post('/alerts/am', FIRING, { authorization: `Bearer ${TOKEN}` });
    expect(res.status).toBe(202);
    const [accepted] = ((await res.json()) as any).accepted;
    const incidentId = `am-4c3a1e0f9b2d7a65-${Date.parse('2026-11-30T21:58:12.345Z')}`;
    expect(accepted.incidentId).toBe(incidentId);
    const job = (await Job.fromId(t.client.incidents, incidentId))!;
    const result = await t.client.result(job, 90_000);
    expect(result).toMatchObject({ incidentId, runId: accepted.runId, status: 'completed' });
    expect(result.runId).toBe(runIdFor(incidentId, job.timestamp));
  });

  it('a signed generic webhook becomes an incident whose run completes', async () => {
    const body = JSON.stringify({ incident: { id: 'PD-1234', type: 'HighLatency', title: 'checkout p99 over 2 s' } });
    const res = await post('/alerts/pager', body, { 'x-signature': `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}` });
    expect(res.status).toBe(202);
    const [accepted] = ((await res.json()) as any).accepted;
    expect(accepted.incidentId).toBe('pager-PD-1234');
    const job = (await Job.fromId(t.client.incidents, 'pager-PD-1234'))!;
    expect((await t.client.result(job, 90_000)).status).toBe('completed');
  });
});
