import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startClusterTest, wholeOutput, type ClusterTest } from '../helpers/index.js';
import { completion, startOpenAiServer, type ChatBody, type OpenAiServer, type Recording } from '../helpers/openai-server.js';

// The cluster on model.provider openai: coordinator (delegate mode: chat) and specialists (task
// loop) as separate processes, talking to a local Chat Completions server that answers in the
// recorded shape. The key comes from OPENAI_API_KEY and never reaches a log.

const KEY = 'sk-e2e-not-a-real-key-9876543210';
let t: ClusterTest;
let server: OpenAiServer;

const toolNames = (body: ChatBody): string[] => (body.tools ?? []).map((tool) => tool.function.name);
const answered = (body: ChatBody): boolean => body.messages.some((m) => m.role === 'tool');

/** The coordinator delegates to kubernetes, then answers; the specialist reads its pods, then finishes. */
function respond(body: ChatBody): Recording {
  const tools = toolNames(body);
  if (tools.includes('delegate_kubernetes') || (body.tools === undefined && !body.response_format)) {
    return answered(body)
      ? completion({ text: 'checkout pods are crash-looping on an OOM; raise the memory limit.' }, [400, 30])
      : completion({ calls: [['delegate_kubernetes', { task: 'Check the checkout pods.' }]] }, [300, 20]);
  }
  if (tools.includes('finish_task') && answered(body)) {
    const report = { summary: 'checkout pods restart on OOM', findings: [{ title: 'OOMKilled', detail: 'from get_pods' }], evidence: [] };
    return completion({ calls: [['finish_task', report]] }, [500, 60]);
  }
  return completion({ calls: [['demo__get_pods', { service: 'checkout' }]] }, [250, 15]);
}

beforeAll(async () => {
  server = await startOpenAiServer((req) => respond(req.body));
  t = await startClusterTest('openai', (config, ctx) => {
    ctx.env.OPENAI_API_KEY = KEY;
    const model = { provider: 'openai', name: 'gpt-4.1-mini', baseUrl: server.baseUrl };
    config.coordinator.mode = 'delegate';
    config.prices = { 'openai:gpt-4.1-mini': { inputPerMTok: 0.4, outputPerMTok: 1.6 } };
    config.coordinator.model = model;
    for (const s of Object.values(config.specialists as Record<string, Record<string, unknown>>)) s.model = model;
  });
});

afterAll(async () => {
  await t?.close();
  await server?.close();
});

describe('model.provider openai, end to end', () => {
  it('runs an incident on the OpenAI adapter: chat coordinator, task-loop specialist, usage in model.called', async () => {
    const { job, runId } = await t.client.publish({
      id: 'oai-1',
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
    // Usage: the coordinator's two calls and the specialist's two, its one tool call, the cost at the configured price.
    const usage = { inputTokens: 1450, outputTokens: 125, modelCalls: 4, toolCalls: 1, costUsd: 0.00078 };
    expect(result.usage).toEqual(usage);
    expect(result.specialists[0]!.usage).toEqual({ inputTokens: 750, outputTokens: 75, modelCalls: 2, toolCalls: 1, costUsd: 0.00042 });
    const events = await t.client.events.complete(runId);
    expect(events.find((e) => e.type === 'run.completed')?.data.usage).toEqual(usage);
    expect(events.find((e) => e.type === 'agent.completed')?.data.usage).toMatchObject({ modelCalls: 2, toolCalls: 1 });
    const called = events.filter((e) => e.type === 'model.called');
    expect(called.length).toBe(4);
    expect(called.every((e) => (e.data as { model: string }).model === 'gpt-4.1-mini-2025-04-14')).toBe(true);
    expect(called.map((e) => e.data.usage)).toContainEqual({ inputTokens: 500, outputTokens: 60, totalTokens: 560 });
    expect(server.requests.every((r) => r.headers.authorization === `Bearer ${KEY}`)).toBe(true);
    for (const p of t.cluster.processes) expect(wholeOutput(p).join('\n')).not.toContain(KEY);
  });
});
