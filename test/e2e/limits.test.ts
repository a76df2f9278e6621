import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { TRUNCATION_MARKER } from '@bosun/contract';
import {
  OwnServer,
  TestCluster,
  demoConfig,
  openClient,
  openContext,
  runCli,
  writeConfig,
  type Client,
  type TestContext,
} from '../helpers/index.js';

// Events larger than the NATS server's max payload are cut to fit, so a run's events all arrive
// and `bosun watch` ends. The cluster runs against a NATS server of its own whose max payload is
// 16 KiB, far below what an incident may carry. (Input past its limits — another job id, nested
// 10,000 levels, larger than the envelope — is the coordinator's alone:
// test/service/coordinator-input.test.ts; `bosun publish` refusing it: test/service/cli-io.test.ts.)

const MAX_PAYLOAD = 16 * 1024;

let ctx: TestContext;
let nats: OwnServer;
let nc: NatsConnection;
let cluster: TestCluster;
let client: Client;
let env: Record<string, string>;

beforeAll(async () => {
  ctx = await openContext('limits');
  nats = await new OwnServer('nats', ctx.dir, { config: `max_payload: ${MAX_PAYLOAD}\n` }).start();
  nc = await connect({ servers: nats.url });
  env = { ...ctx.env, NATS_URL: nats.url, BOSUN_CONFIG: writeConfig(ctx, demoConfig()) };
  cluster = await TestCluster.start(env, { specialists: 1 });
  client = await openClient({ ...ctx, nats: nc, natsUrl: nats.url });
});

afterAll(async () => {
  await client?.close();
  await cluster?.stop();
  await nc?.close();
  await nats?.stop();
  await ctx?.close();
});

describe('events larger than the NATS max payload', () => {
  it('are cut to fit, so every event of the run arrives, valid and in seq, and bosun watch ends', async () => {
    // Within the incident's limits, and nearly four times what one message may carry here.
    const summary = `checkout is down: ${'S'.repeat(60_000)}`;
    const { job, runId } = await client.publish({
      id: 'wide-1',
      source: 'test',
      reason: 'PodCrashLooping',
      summary,
      labels: { service: 'checkout' },
    });
    const result = await client.result(job);
    expect(result.status).toBe('completed');
    // The run result (a job return value in Redis) keeps everything.
    expect(result.answer).toContain(summary);

    const run = await client.events.complete(runId, 30_000);
    expect(run.map((e) => e.seq)).toEqual(run.map((_, i) => i + 1));
    for (const e of run) expect(Buffer.byteLength(JSON.stringify(e))).toBeLessThanOrEqual(MAX_PAYLOAD);
    const started = run.find((e) => e.type === 'run.started')!;
    expect(started.truncated).toEqual([expect.stringMatching(/^data\.incident\.summary: 60018 characters cut to \d+$/)]);
    const incident = started.data.incident as { id: string; summary: string };
    expect(incident.id).toBe('wide-1');
    expect(incident.summary).toMatch(/^checkout is down: S+… \[TRUNCATED by bosun: 60018 characters, kept \d+\]$/);
    const completed = run.at(-1)!;
    expect(completed.type).toBe('run.completed');
    expect(completed.data).toMatchObject({ status: 'completed', stalled: 0, specialists: [{ name: 'kubernetes', status: 'completed' }] });
    expect(String(completed.data.answer)).toContain(TRUNCATION_MARKER);
    expect(completed.truncated).toEqual([expect.stringMatching(/^data\.answer: \d+ characters cut to \d+$/)]);
    expect(await ctx.redis.hget(`${ctx.prefix}:stats:events`, 'dropped')).toBeNull();

    const watch = await runCli(env, ['watch', runId], undefined, 30_000);
    expect(watch.code, watch.stderr).toBe(0);
    expect(watch.stdout).toMatch(/run\.started/);
    expect(watch.stdout).toMatch(/run\.completed\s+completed/);
  });
});
