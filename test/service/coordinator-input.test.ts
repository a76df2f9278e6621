import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Job } from 'bullmq';
import { INCIDENT_LIMITS, RunResult, TRUNCATION_MARKER } from '@bosun/contract';
import { openClient, startServiceTest, type Client, type ServiceTest } from '../helpers/index.js';

// What the coordinator process does with incidents it cannot run, alone (no gateway, no
// specialist): a malformed incident, one under another job id, one nested 10,000 levels, or one
// larger than the envelope allows is rejected without retry as a counted poison dead letter that
// keeps (a bounded copy of) its data, and the coordinator goes on with the next incident. These
// checks ran in test/e2e/route.test.ts and test/e2e/limits.test.ts with a whole cluster; the rules
// themselves are unit-tested in libs/agent/src/run.test.ts ("rejects a job with another name, an
// invalid incident and a job id other than the incident id, as poison"),
// libs/contract/src/json-bounds.test.ts and libs/transport/src/stores/dead-letters.test.ts.

let s: ServiceTest;
let client: Client;

/** An incident the coordinator answers at once, alone: the only specialist it names does not exist. */
const answered = (id: string) => ({
  id,
  source: 'test',
  reason: 'PodCrashLooping',
  summary: 'x',
  payload: { fake: { route: ['nobody'] } },
});

beforeAll(async () => {
  s = await startServiceTest('coordinator-input', 'coordinator');
  client = await openClient(s.ctx);
});

afterAll(async () => {
  await client?.close();
  await s?.close();
});

const poisonCount = async (): Promise<number> => Number((await s.ctx.redis.hget(`${s.ctx.prefix}:stats:degraded`, '-:poison')) ?? 0);

/** The failed reason of a job that must fail. */
async function failure(job: Job): Promise<string> {
  try {
    await job.waitUntilFinished(client.queueEvents, 30_000);
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error(`job ${job.id} completed; it should have been rejected`);
}

/** The coordinator still takes work: an incident published now gets its answer. */
async function stillAnswers(id: string): Promise<void> {
  const { job } = await client.publish(answered(id));
  const result = RunResult.parse(await job.waitUntilFinished(client.queueEvents, 30_000));
  expect(result).toMatchObject({ incidentId: id, status: 'partial' });
  expect(s.service.running).toBe(true);
}

/**
 * Adds a job whose stored data is `text` as it stands: JSON nested too deep for JSON.stringify,
 * as another client (or a hand-written file) may send it. The job is added delayed, its data
 * replaced, then promoted.
 */
async function addRaw(id: string, text: string): Promise<Job> {
  const job = await client.incidents.add('incident', { id }, { jobId: id, delay: 3_600_000 });
  await s.ctx.redis.hset(`${s.ctx.prefix}:incidents:${id}`, 'data', text);
  await job.promote();
  return job;
}

const deep = (levels: number) => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;

describe('a malformed incident', () => {
  it('is rejected with an error naming the fields, its data kept in the dead-letter queue; the coordinator goes on', async () => {
    const bad = { id: 'bad id with spaces', source: 'test', summary: 42 };
    const job = await client.incidents.add('incident', bad, { jobId: 'poison-1' });
    expect(await failure(job)).toMatch(/invalid incident: id: .*reason: .*summary: /);
    const entry = (await client.deadLetters()).find((d) => d.kind === 'poison' && d.incidentId === 'poison-1');
    expect(entry?.input).toEqual(bad);
    expect(entry?.reason).toMatch(/id: must be 1 to 128 characters/);
    await stillAnswers('after-poison');
  });
});

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
    const data = answered('twin-a');
    const [a, b] = await Promise.all([
      client.incidents.add('incident', data, { jobId: 'twin-a' }),
      client.incidents.add('incident', data, { jobId: 'twin-b' }),
    ]);
    const [ra, rb] = await Promise.all([client.result(a, 30_000), failure(b)]);
    expect(ra).toMatchObject({ incidentId: 'twin-a', status: 'partial' });
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
    await stillAnswers('after-deep');
  });
});

describe('incident size', () => {
  it('rejects a 5 MB summary as poison naming the field and the limit, with a bounded copy', async () => {
    const before = await poisonCount();
    const huge = { id: 'huge-summary', source: 'test', reason: 'PodCrashLooping', summary: 's'.repeat(5 * 1024 * 1024) };
    const job = await client.incidents.add('incident', huge, { jobId: huge.id });
    expect(await failure(job)).toBe(`invalid incident: summary: must be at most ${INCIDENT_LIMITS.summaryChars} characters`);
    const entry = (await client.deadLetters()).find((d) => d.kind === 'poison' && d.incidentId === huge.id);
    expect((entry?.input as { summary: string }).summary).toMatch(/^s+… \[TRUNCATED by bosun: 5242880 characters, kept \d+\]$/);
    expect(entry?.truncated).toEqual([expect.stringMatching(/^input\.summary: 5242880 characters cut to \d+$/)]);
    expect(await poisonCount()).toBe(before + 1);
  });
});
