import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Job } from 'bullmq';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { INCIDENT_LIMITS, TRUNCATION_MARKER } from '@bosun/contract';
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

// What the cluster does with input and output past its limits: an incident under another job id,
// nested 10,000 levels or larger than the envelope allows is a counted poison dead letter (and
// `bosun publish` refuses it); events larger than the NATS server's max payload are cut to fit,
// so a run's events all arrive and `bosun watch` ends. The cluster runs against a NATS server of
// its own whose max payload is 16 KiB, far below what an incident may carry.

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

const poisonCount = async (): Promise<number> => Number((await ctx.redis.hget(`${ctx.prefix}:stats:degraded`, '-:poison')) ?? 0);

/** The failed reason of a job that must fail. */
async function failure(job: Job): Promise<string> {
  try {
    await job.waitUntilFinished(client.queueEvents, 30_000);
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error(`job ${job.id} completed; it should have been rejected`);
}

/**
 * Adds a job whose stored data is `text` as it stands: JSON nested too deep for JSON.stringify,
 * as another client (or a hand-written file) may send it. The job is added delayed, its data
 * replaced, then promoted.
 */
async function addRaw(id: string, text: string): Promise<Job> {
  const job = await client.incidents.add('incident', { id }, { jobId: id, delay: 3_600_000 });
  await ctx.redis.hset(`${ctx.prefix}:incidents:${id}`, 'data', text);
  await job.promote();
  return job;
}

const deep = (levels: number) => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;

describe('the incident id and the job id', () => {
  it('rejects an incident whose job id is not its id as poison, naming both ids', async () => {
    const data = { id: 'mm-data', source: 'test', reason: 'PodCrashLooping', summary: 'x', labels: { service: 'checkout' } };
    const job = await client.incidents.add('incident', data, { jobId: 'mm-job' });
    const reason = await failure(job);
    expect(reason).toBe('job id "mm-job" does not match the incident\'s id "mm-data": publish an incident with its id as the job id');
    const entry = (await client.deadLetters()).find((d) => d.kind === 'poison' && d.incidentId === 'mm-job');
    expect(entry).toMatchObject({ reason, input: data });
    expect(entry?.truncated).toBeUndefined();
  });

  it('runs the job that carries its own id, and rejects a second job with the same incident id instead of failing both', async () => {
    const data = { id: 'twin-a', source: 'test', reason: 'PodCrashLooping', summary: 'x', labels: { service: 'checkout' } };
    const [a, b] = await Promise.all([
      client.incidents.add('incident', data, { jobId: 'twin-a' }),
      client.incidents.add('incident', data, { jobId: 'twin-b' }),
    ]);
    const [ra, rb] = await Promise.all([client.result(a), failure(b)]);
    expect(ra).toMatchObject({ incidentId: 'twin-a', status: 'completed' });
    expect(rb).toContain('job id "twin-b" does not match the incident\'s id "twin-a"');
    expect((await client.deadLetters()).filter((d) => d.kind === 'poison' && d.incidentId === 'twin-b')).toHaveLength(1);
  });
});

describe('input nested 10,000 levels deep', () => {
  it('becomes a poison dead letter with a bounded copy of the input, and is counted', async () => {
    const before = await poisonCount();
    const head = '"source":"test","reason":"PodCrashLooping","summary":"deep"';
    const payload = await addRaw('deep-payload', `{"id":"deep-payload",${head},"payload":${deep(10_000)}}`);
    const labels = await addRaw('deep-labels', `{"id":"deep-labels",${head},"labels":{"service":${deep(10_000)}}}`);
    expect(await failure(payload)).toBe(
      `invalid incident: payload: must nest objects and arrays at most ${INCIDENT_LIMITS.payloadDepth} levels deep`,
    );
    expect(await failure(labels)).toBe('invalid incident: labels.service: Invalid input: expected string, received object');
    const entries = (await client.deadLetters()).filter((d) => d.kind === 'poison' && d.incidentId?.startsWith('deep-'));
    expect(entries.map((d) => d.incidentId).sort()).toEqual(['deep-labels', 'deep-payload']);
    for (const d of entries) {
      expect((d.input as { id: string }).id).toBe(d.incidentId);
      expect(JSON.stringify(d.input)).toContain(`${TRUNCATION_MARKER}: nested deeper than 64 levels]`);
      expect(d.truncated).toEqual([expect.stringMatching(/: nested deeper than 64 levels$/)]);
    }
    expect(await poisonCount()).toBe(before + 2);
    // The coordinator lives on and takes the next incident.
    const { job } = await client.publish({
      id: 'after-deep',
      source: 'test',
      reason: 'PodCrashLooping',
      summary: 'x',
      labels: { service: 'checkout' },
    });
    expect((await client.result(job)).status).toBe('completed');
  });
});

describe('incident size', () => {
  it('rejects a 5 MB summary as poison naming the field and the limit, and bosun publish refuses it and a deep one up front', async () => {
    const before = await poisonCount();
    const huge = { id: 'huge-summary', source: 'test', reason: 'PodCrashLooping', summary: 's'.repeat(5 * 1024 * 1024) };
    const job = await client.incidents.add('incident', huge, { jobId: huge.id });
    expect(await failure(job)).toBe(`invalid incident: summary: must be at most ${INCIDENT_LIMITS.summaryChars} characters`);
    const entry = (await client.deadLetters()).find((d) => d.kind === 'poison' && d.incidentId === huge.id);
    expect((entry?.input as { summary: string }).summary).toMatch(/^s+… \[TRUNCATED by bosun: 5242880 characters, kept \d+\]$/);
    expect(entry?.truncated).toEqual([expect.stringMatching(/^input\.summary: 5242880 characters cut to \d+$/)]);
    expect(await poisonCount()).toBe(before + 1);

    const big = join(ctx.dir, 'big.json');
    writeFileSync(big, JSON.stringify({ ...huge, id: 'cli-huge' }));
    const deepFile = join(ctx.dir, 'deep.json');
    writeFileSync(deepFile, `{"id":"cli-deep","source":"test","reason":"PodCrashLooping","summary":"x","payload":${deep(10_000)}}`);
    const r1 = await runCli(env, ['publish', big]);
    expect(r1.code).toBe(2);
    expect(r1.stderr).toContain(`invalid incident: summary: must be at most ${INCIDENT_LIMITS.summaryChars} characters`);
    const r2 = await runCli(env, ['publish', deepFile]);
    expect(r2.code).toBe(2);
    expect(r2.stderr).toContain(
      `invalid incident: payload: must nest objects and arrays at most ${INCIDENT_LIMITS.payloadDepth} levels deep`,
    );
    expect(r2.stderr).not.toMatch(/call stack/);
    expect(await client.incidents.getJob('cli-huge')).toBeUndefined();
    expect(await client.incidents.getJob('cli-deep')).toBeUndefined();
  });
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
