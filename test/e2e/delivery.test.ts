import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Job, Queue } from 'bullmq';
import { DELIVERIES_QUEUE, RunResult, deliveryJobId } from '@bosun/contract';
import { freePort, runCli, startClusterTest, startService, waitUntil, type ClusterTest, type ServiceProcess } from '../helpers/index.js';

// Deliveries of run results, end to end: the whole cluster, the intake process delivering (its
// `delivery` section only), and a local receiver that checks every signature and dedupes by
// Idempotency-Key, as a real receiver would.

const SECRET = 'delivery-secret-of-the-test';

interface Received {
  path: string;
  key: string;
  attempt: string;
  body: string;
  signatureOk: boolean;
}

/** A receiver of deliveries: records every request; `behave` decides each answer (null: never answer). */
class Receiver {
  readonly requests: Received[] = [];
  /** Keys seen for the first time and answered 2xx: what the receiver acted on. */
  readonly processed = new Map<string, Received>();
  private server: Server | undefined;
  port = 0;

  constructor(private readonly behave: (r: Received, n: number) => number | null) {}

  async start(port = 0): Promise<this> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(port, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  url(path: string): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    const r: Received = {
      path: req.url ?? '',
      key: String(req.headers['idempotency-key']),
      attempt: String(req.headers['bosun-delivery-attempt']),
      body,
      signatureOk: verify(String(req.headers['bosun-signature'] ?? ''), body),
    };
    this.requests.push(r);
    const status = this.behave(r, this.requests.filter((x) => x.path === r.path).length);
    if (status === null) return; // held: the sender dies waiting
    // Slack's incoming webhooks are not signed; every other sink is, and an unsigned request is not acted on.
    const trusted = r.signatureOk || r.path === '/slack';
    if (status < 300 && trusted && !this.processed.has(r.key)) this.processed.set(r.key, r);
    res.writeHead(status).end();
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((r) => this.server?.close(r));
  }
}

/** What a receiver does with `Bosun-Signature: t=<t>,v1=<hex>` (docs/intake-and-delivery.md#verifying-a-delivery). */
function verify(header: string, body: string): boolean {
  const t = /(?:^|,)t=(\d+)/.exec(header)?.[1];
  const v1 = /(?:^|,)v1=([0-9a-f]{64})/.exec(header)?.[1];
  if (!t || !v1) return false;
  if (Math.abs(Date.now() / 1000 - Number(t)) > 300) return false;
  const expected = createHmac('sha256', SECRET).update(`${t}.${body}`).digest();
  return timingSafeEqual(expected, Buffer.from(v1, 'hex'));
}

let t: ClusterTest;
let receiver: Receiver;
let deliverer: ServiceProcess;
let deliveries: Queue;
let gonePort: number;
let delivererEnv: Record<string, string>;
let holdSlow = true;

beforeAll(async () => {
  receiver = await new Receiver((r, n) => {
    if (r.path === '/flaky') return n <= 2 ? 500 : 200;
    if (r.path === '/slow' && holdSlow) return null;
    return 200;
  }).start();
  gonePort = await freePort();
  const hook = (url: string) => ({ type: 'webhook', url, secret: '${TEST_DELIVERY_SECRET}' });
  t = await startClusterTest('delivery', (config) => {
    delete config.intake;
    // A delivering process killed mid-request is noticed within a few seconds.
    config.workers = { lockDurationMs: 3_000, stalledIntervalMs: 1_000, maxStalledCount: 2 };
    config.delivery = {
      attempts: 4,
      backoffMs: 200,
      sinks: {
        hook: hook('${TEST_HOOK_URL}'),
        slack: { type: 'slack', url: receiver.url('/slack'), answerLines: 3, runUrl: 'https://console.example/runs/{runId}' },
        flaky: hook(receiver.url('/flaky')),
        slow: hook(receiver.url('/slow')),
        gone: hook(`http://127.0.0.1:${gonePort}/gone`),
        approvals: hook(receiver.url('/approvals')),
      },
      announceApprovals: ['approvals'],
      approvalScanMs: 300,
      routes: [
        { reason: ['Flaky'], sinks: ['flaky'] },
        { reason: ['Slow'], sinks: ['slow'] },
        { reason: ['Gone'], sinks: ['gone'] },
      ],
      defaultSinks: ['hook', 'slack'],
    };
  });
  delivererEnv = { ...t.env, TEST_DELIVERY_SECRET: SECRET, TEST_HOOK_URL: receiver.url('/hook') };
  deliverer = t.cluster.add(startService('intake', delivererEnv, { name: 'deliverer' }));
  await deliverer.ready();
  deliveries = new Queue(DELIVERIES_QUEUE, { connection: t.ctx.redis, prefix: t.ctx.prefix });
});

afterAll(async () => {
  await deliveries?.close();
  await t?.close();
  await receiver?.close();
});

async function run(id: string, reason: string, payload?: unknown): Promise<RunResult> {
  const { job } = await t.client.publish({
    id,
    source: 'test',
    reason,
    summary: `${reason} on checkout`,
    labels: { service: 'checkout' },
    payload,
  });
  return t.client.result(job, 90_000);
}

const waitFor = (what: string, check: () => boolean | Promise<boolean>, ms = 45_000) => waitUntil(check, ms, what, 50);

describe('delivery', () => {
  it('a signed webhook carries the run result v1; Slack gets the status, the answer and links', async () => {
    const result = await run('del-1', 'PodCrashLooping');
    const hookKey = `${result.runId}.hook`;
    await waitFor('both sinks got the answer', () => receiver.processed.has(hookKey) && receiver.processed.has(`${result.runId}.slack`));
    const hook = receiver.processed.get(hookKey)!;
    expect(hook.signatureOk).toBe(true);
    expect(RunResult.parse(JSON.parse(hook.body))).toEqual(result);
    const text = JSON.parse(receiver.processed.get(`${result.runId}.slack`)!.body).text as string;
    expect(text).toContain('incident `del-1` (PodCrashLooping, warning): *completed*');
    expect(text).toContain(result.answer.split('\n').find((l) => l.trim() !== '')!);
    expect(text).toContain(`<https://console.example/runs/${result.runId}|run page>`);
    expect(text).not.toContain('Not checked');
  });

  it('a partial run says plainly what was not checked', async () => {
    const result = await run('del-partial', 'ErrorRateHigh', { fake: { stall: ['database'] } });
    expect(result.status).toBe('partial');
    await waitFor('slack got the partial answer', () => receiver.processed.has(`${result.runId}.slack`));
    const text = JSON.parse(receiver.processed.get(`${result.runId}.slack`)!.body).text as string;
    expect(text).toContain('*PARTIAL — not everything was checked*');
    expect(text).toContain('*Not checked (INCOMPLETE):* database (stalled)');
  });

  it('retries after the receiver answers 500 twice, and the receiver acts once', async () => {
    const result = await run('del-flaky', 'Flaky');
    const key = `${result.runId}.flaky`;
    await waitFor('the flaky receiver got it', () => receiver.processed.has(key));
    const tries = receiver.requests.filter((r) => r.key === key);
    expect(tries.map((r) => r.attempt)).toEqual(['1', '2', '3']);
    expect(tries.every((r) => r.signatureOk)).toBe(true);
    const job = (await Job.fromId(deliveries, deliveryJobId(result.runId, 'flaky')))!;
    await waitFor('the delivery job completed', async () => (await job.getState()) === 'completed');
  });

  it('sees each answer once across a SIGKILL of the delivering process', async () => {
    const { job } = await t.client.publish({
      id: 'del-slow',
      source: 'test',
      reason: 'Slow',
      summary: 'slow',
      labels: { service: 'checkout' },
    });
    await waitFor('the slow receiver holds the first request', () => receiver.requests.some((r) => r.path === '/slow'));
    deliverer.kill('SIGKILL');
    holdSlow = false;
    const result = await t.client.result(job, 90_000);
    deliverer = t.cluster.add(startService('intake', delivererEnv, { name: 'deliverer-2' }));
    await deliverer.ready();
    const key = `${result.runId}.slow`;
    await waitFor('the answer is delivered after the crash', () => receiver.processed.has(key), 90_000);
    const delivery = (await Job.fromId(deliveries, deliveryJobId(result.runId, 'slow')))!;
    await waitFor('the delivery job completed', async () => (await delivery.getState()) === 'completed');
    const tries = receiver.requests.filter((r) => r.key === key);
    // Sent again after the crash, under the same key; the receiver acted on it once.
    expect(tries.length).toBeGreaterThanOrEqual(2);
    expect(tries.every((r) => r.signatureOk)).toBe(true);
    expect([...receiver.processed.keys()].filter((k) => k === key)).toHaveLength(1);
  });

  it('a receiver down for good → a delivery dead letter; bosun dlq retry delivers it', async () => {
    const result = await run('del-gone', 'Gone');
    let entry: any;
    await waitFor('a delivery dead letter', async () => {
      entry = (await t.client.deadLetters(result.runId)).find((d) => d.kind === 'delivery');
      return entry !== undefined;
    });
    expect(entry).toMatchObject({ incidentId: 'del-gone', attempts: 4, input: { key: `${result.runId}.gone`, sink: 'gone' } });
    expect(entry.reason).toContain(`to sink gone failed after 4 attempt(s)`);
    const gone = await new Receiver(() => 200).start(gonePort);
    try {
      const id = `delivery-${deliveryJobId(result.runId, 'gone')}`;
      const retry = await runCli(t.env, ['dlq', 'retry', id]);
      expect(retry.stderr).toContain(`delivering the answer of run ${result.runId} again as ${deliveryJobId(result.runId, 'gone')}-retry1`);
      expect(retry.code).toBe(0);
      await waitFor('the retried delivery arrived', () => gone.processed.has(`${result.runId}.gone`));
      expect(RunResult.parse(JSON.parse(gone.processed.get(`${result.runId}.gone`)!.body)).runId).toBe(result.runId);
    } finally {
      await gone.close();
    }
  });

  it('announces a pending approval, signed, with the commands that decide it', async () => {
    const calls = [
      { tool: 'demo__get_pods', args: { service: 'checkout' } },
      { tool: 'demo__rollback_deployment', args: { service: 'checkout', toVersion: 'v41' } },
    ];
    const { job, runId } = await t.client.publish({
      id: 'del-approval',
      source: 'test',
      reason: 'PodCrashLooping',
      summary: 'roll back',
      labels: { service: 'checkout' },
      payload: { fake: { calls: { kubernetes: calls } } },
    });
    let announced: Received | undefined;
    await waitFor('the approval is announced', () => {
      announced = [...receiver.processed.values()].find((r) => r.path === '/approvals' && JSON.parse(r.body).approval.runId === runId);
      return announced !== undefined;
    });
    const body = JSON.parse(announced!.body);
    expect(announced!.signatureOk).toBe(true);
    expect(body).toMatchObject({ v: 1, type: 'approval.requested', approval: { runId, agent: 'kubernetes', status: 'pending' } });
    const id = body.approval.id as string;
    expect(announced!.key).toBe(`${id}.approvals`);
    expect(body.commands.approve).toBe(`npx bosun approve ${id}`);
    const deny = await runCli(t.env, ['deny', id, '--reason', 'not in the test']);
    expect(deny.code, deny.stderr).toBe(0);
    const result = await t.client.result(job, 90_000);
    expect(result.runId).toBe(runId);
    // Announced once, whatever the number of scans.
    expect(receiver.requests.filter((r) => r.key === `${id}.approvals`)).toHaveLength(1);
  });
});
