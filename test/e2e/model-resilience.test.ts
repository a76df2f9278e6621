import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startClusterTest, type ClusterTest } from '../helpers/index.js';
import { completion, startOpenAiServer, type ChatBody, type OpenAiServer, type Recording } from '../helpers/openai-server.js';

// Model calls that survive throttling and outages, with real processes: three specialist
// processes share one cluster-wide rate limit in Redis against a local Chat Completions server
// that answers 429 beyond its own rate; and a primary model that fails every call gives way to
// its fallback.

const LIMIT = 3; // requests per second: configured in Bosun, and the server's own limit
// The server answers 429 beyond this many requests in any second (by when it received them).
const SERVER_LIMIT = LIMIT;
let t: ClusterTest;
let server: OpenAiServer;
const served: { at: number; status: number; model: string }[] = [];

const answered = (body: ChatBody): boolean => body.messages.some((m) => m.role === 'tool');

function respond(body: ChatBody, at: number): Recording {
  if (body.model === 'broken-model') return { status: 500, body: { error: { message: 'The server had an error', type: 'server_error' } } };
  const lastSecond = served.filter((s) => s.model === body.model && s.status === 200 && at - s.at < 1_000).length;
  if (lastSecond >= SERVER_LIMIT) {
    return {
      status: 429,
      headers: { 'retry-after': '1' },
      body: { error: { message: 'Rate limit reached', code: 'rate_limit_exceeded' } },
    };
  }
  if (answered(body)) {
    const report = { summary: 'checked', findings: [{ title: 'pods', detail: 'ok' }], evidence: [] };
    return completion({ calls: [['finish_task', report]] });
  }
  return completion({ calls: [['demo__get_pods', { service: 'checkout' }]] });
}

beforeAll(async () => {
  server = await startOpenAiServer((req) => {
    const answer = respond(req.body, req.at);
    served.push({ at: req.at, status: answer.status, model: req.body.model });
    return answer;
  });
  t = await startClusterTest(
    'model-resilience',
    (config, ctx) => {
      ctx.env.OPENAI_API_KEY = 'sk-resilience-test';
      const limited = { provider: 'openai', name: 'gpt-4.1-mini', baseUrl: server.baseUrl, retry: { attempts: 6, baseDelayMs: 200 } };
      config.specialists.kubernetes.model = limited;
      config.specialists.database.model = {
        provider: 'openai',
        name: 'broken-model',
        baseUrl: server.baseUrl,
        retry: { attempts: 2, baseDelayMs: 50 },
        fallback: limited,
      };
      config.rateLimits = { 'openai:gpt-4.1-mini': { requests: LIMIT, windowMs: 1_000 } };
      // The fallback's calls are priced at the fallback's price (the broken primary's would be 0).
      config.prices = { 'openai:gpt-4.1-mini': { inputPerMTok: 1_000, outputPerMTok: 0 } };
    },
    { specialists: 3 },
  );
});

afterAll(async () => {
  await t?.close();
  await server?.close();
});

/** The most requests of `model` the server saw within any `windowMs`. */
function peak(model: string, windowMs: number): number {
  const times = served.filter((s) => s.model === model).map((s) => s.at);
  return Math.max(0, ...times.map((start) => times.filter((x) => x >= start && x < start + windowMs).length));
}

describe('model calls under a cluster-wide rate limit, and a fallback', () => {
  it('runs 8 incidents through 3 specialist processes without a request over the configured rate; none lost', async () => {
    const published = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        t.client.publish({ id: `rl-${i}`, source: 'test', reason: 'PodCrashLooping', summary: 'x', labels: { service: 'checkout' } }),
      ),
    );
    const results = await Promise.all(published.map((p) => t.client.result(p.job, 120_000)));
    expect(results.map((r) => r.status)).toEqual(results.map(() => 'completed'));
    const limited = served.filter((s) => s.model === 'gpt-4.1-mini');
    const t0 = limited[0]?.at ?? 0;
    process.stdout.write(`[rate-limit] served: ${limited.map((s) => `${s.at - t0}:${s.status}`).join(' ')}\n`);
    expect(limited.filter((s) => s.status === 429)).toEqual([]);
    expect(limited.length).toBe(16);
    // The server never saw more than the configured rate, in any second.
    expect(peak('gpt-4.1-mini', 1_000)).toBeLessThanOrEqual(LIMIT);
    expect(limited.at(-1)!.at - t0).toBeGreaterThanOrEqual(Math.floor(16 / LIMIT) * 1_000 - 500);
    process.stdout.write(
      `[rate-limit] 16 requests over ${limited.at(-1)!.at - limited[0]!.at} ms, peak ${peak('gpt-4.1-mini', 1_000)}/s\n`,
    );
  });

  it('completes a run on the fallback when the primary fails every call; events and the result say so', async () => {
    const { job, runId } = await t.client.publish({ id: 'fb-1', source: 'test', reason: 'HighLatency', summary: 'slow' });
    const result = await t.client.result(job, 120_000);
    expect(result.status).toBe('completed');
    expect(result.specialists[0]).toMatchObject({ name: 'database', status: 'completed' });
    expect(result.specialists[0]!.usage).toMatchObject({ fallbacks: 2, modelCalls: 2, inputTokens: 200, costUsd: 0.2 });
    expect(result.usage?.fallbacks).toBe(2);
    const called = (await t.client.events.complete(runId)).filter((e) => e.type === 'model.called' && e.agent === 'database');
    expect(called).toHaveLength(2);
    for (const e of called) {
      expect(e.data.fallback).toEqual({
        from: 'openai:broken-model',
        to: 'openai:gpt-4.1-mini',
        reason: 'openai:broken-model failed 2 times, the last: OpenAI API error: HTTP 500 server_error: The server had an error',
      });
    }
    expect(served.filter((s) => s.model === 'broken-model').length).toBe(4);
  });
});
