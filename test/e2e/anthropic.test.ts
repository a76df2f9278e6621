import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startClusterTest, type ClusterTest } from '../helpers/index.js';
import {
  anthropicFixture,
  message,
  startAnthropicServer,
  textOf,
  type AnthropicBody,
  type AnthropicServer,
  type Recording,
} from '../helpers/anthropic-server.js';

// The cluster on model.provider anthropic: coordinator (delegate mode: chat) and specialists (task
// loop) as separate processes, talking to a local Messages API server that answers in the
// recorded shape — once with 529 overloaded_error, which the cluster retries. The key comes from
// ANTHROPIC_API_KEY and never reaches a log.

const KEY = 'sk-ant-e2e-not-a-real-key-9876543210';
let t: ClusterTest;
let server: AnthropicServer;
let overloaded = false;

const toolNames = (body: AnthropicBody): string[] => (body.tools ?? []).map((tool) => tool.name);
const answered = (body: AnthropicBody): boolean =>
  body.messages.some((m) => Array.isArray(m.content) && m.content.some((b) => b.type === 'tool_result'));

/** The coordinator delegates to kubernetes, then answers; the specialist reads its pods (after one 529), then finishes. */
function respond(body: AnthropicBody): Recording {
  const tools = toolNames(body);
  if (
    tools.includes('delegate_kubernetes') ||
    (body.tools === undefined && textOf(body.messages[0]!.content).startsWith('A new incident'))
  ) {
    return answered(body)
      ? message({ text: 'checkout pods are crash-looping on an OOM; raise the memory limit.' }, [400, 30])
      : message({ calls: [['delegate_kubernetes', { task: 'Check the checkout pods.' }]] }, [300, 20]);
  }
  if (tools.includes('finish_task') && answered(body)) {
    const report = { summary: 'checkout pods restart on OOM', findings: [{ title: 'OOMKilled', detail: 'from get_pods' }], evidence: [] };
    return message({ calls: [['finish_task', report]] }, [100, 60, 400]);
  }
  if (!overloaded) {
    overloaded = true;
    return anthropicFixture('error-529');
  }
  return message({ calls: [['demo__get_pods', { service: 'checkout' }]] }, [250, 15]);
}

beforeAll(async () => {
  server = await startAnthropicServer((req) => respond(req.body));
  t = await startClusterTest('anthropic', (config, ctx) => {
    ctx.env.ANTHROPIC_API_KEY = KEY;
    ctx.env.LOG_LEVEL = 'info';
    const model = { provider: 'anthropic', name: 'claude-sonnet-4-5', baseUrl: server.baseUrl, retry: { attempts: 3, baseDelayMs: 50 } };
    config.coordinator.mode = 'delegate';
    config.prices = {
      'anthropic:claude-sonnet-4-5': { inputPerMTok: 3, outputPerMTok: 15, cachedInputPerMTok: 0.3, cacheWritePerMTok: 3.75 },
    };
    config.coordinator.model = model;
    for (const s of Object.values(config.specialists as Record<string, Record<string, unknown>>)) s.model = model;
  });
});

afterAll(async () => {
  await t?.close();
  await server?.close();
});

describe('model.provider anthropic, end to end', () => {
  it('runs an incident on the Anthropic adapter: retried 529, cache reads priced apart, the key only in headers', async () => {
    const { job, runId } = await t.client.publish({
      id: 'ant-1',
      source: 'test',
      reason: 'PodCrashLooping',
      summary: 'checkout crashlooping',
      labels: { service: 'checkout' },
    });
    const result = await t.client.result(job, 120_000);
    expect(result).toMatchObject({ runId, status: 'completed' });
    expect(result.answer).toContain('raise the memory limit');
    expect(result.specialists).toEqual([
      expect.objectContaining({
        name: 'kubernetes',
        status: 'completed',
        output: expect.objectContaining({ summary: 'checkout pods restart on OOM' }),
      }),
    ]);
    // The specialist: 250 + 15, then 100 new + 400 cached + 60. Cost: (250 + 100) × 3 + 400 × 0.3 + 75 × 15, per million.
    expect(result.specialists[0]!.usage).toEqual({
      inputTokens: 750,
      outputTokens: 75,
      modelCalls: 2,
      toolCalls: 1,
      costUsd: 0.002295,
      cachedInputTokens: 400,
    });
    const events = await t.client.events.complete(runId);
    expect(events.filter((e) => e.type === 'model.called').every((e) => e.data.model === 'claude-sonnet-4-5-20250929')).toBe(true);
    // Prompt caching on the stable prefix, and the 529 answered by a retry.
    const specialistRequests = server.requests.filter((r) => toolNames(r.body).includes('finish_task'));
    expect(specialistRequests.length).toBe(3);
    expect(specialistRequests.every((r) => (r.body.system as { cache_control?: unknown }[])[0]?.cache_control !== undefined)).toBe(true);
    expect(server.requests.every((r) => JSON.stringify(r.headers).includes(KEY) && !JSON.stringify(r.body).includes(KEY))).toBe(true);
    for (const p of t.cluster.processes) expect(p.lines.join('\n')).not.toContain(KEY);
  });
});
