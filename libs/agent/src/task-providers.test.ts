import { afterEach, describe, expect, it } from 'vitest';
import {
  Incident,
  STALL_MARKER,
  parseWith,
  taskIdFor,
  type Catalog,
  type DeadLetter,
  type TaskJob,
  type ToolCallJob,
} from '@bosun/contract';
import { createLogger, type ModelPrice } from '@bosun/config';
import { GeminiModel, OpenAiModel, type Model } from '@bosun/models';
import { MemoryCheckpointStore, MemoryEventSink, type DeadLetterInput, type ToolClient } from '@bosun/transport';

import { startGeminiServer, type GeminiServer } from '../../../test/helpers/gemini-server.js';
import { openAiFixture, startOpenAiServer, type OpenAiServer, type Recording } from '../../../test/helpers/openai-server.js';
import { overBudget } from './budget.js';
import { runTask, type TaskAgentDeps, type TaskAgentSpec } from './task.js';

/**
 * The task loop on the real adapters against recorded answers (test/fixtures/README.md): a
 * Gemini answer cut at MAX_TOKENS, DashScope's strict `function.arguments`, and Gemini 3's
 * thinking tokens in the task's usage, cost and budget.
 */

const RUN_ID = 'r0123456789abcdef0d5c';
const TASK_ID = taskIdFor(RUN_ID, 0, 'checkout');
const REPORT = { type: 'object', required: ['summary'], properties: { summary: { type: 'string' }, severity: { type: 'string' } } };
const spec: TaskAgentSpec = { name: 'checkout', tools: ['ops__*'], outputSchema: REPORT, maxToolRounds: 5, maxInvalidOutputs: 1 };

let servers: (OpenAiServer | GeminiServer)[] = [];
afterEach(async () => {
  await Promise.all(servers.map((s) => s.close()));
  servers = [];
});

class Tools implements ToolClient {
  readonly calls: ToolCallJob[] = [];
  async catalog(): Promise<Catalog> {
    const tool = (remoteName: string) => ({
      name: `ops__${remoteName}`,
      server: 'ops',
      remoteName,
      description: remoteName,
      inputSchema: { type: 'object' },
      annotations: { readOnlyHint: true },
    });
    return { v: 1, updatedAt: '2026-01-01T00:00:00.000Z', tools: [tool('get_service_status'), tool('search_logs')], unavailable: {} };
  }
  async call(call: ToolCallJob) {
    this.calls.push(call);
    return { v: 1 as const, key: call.key, tool: call.tool, status: 'ok' as const, isError: false, text: 'ok', durationMs: 1 };
  }
}

/** The recording with its calls renamed to the catalog's names (`ops__…`). */
function renamed(text: string): string {
  return text.replace(/"name": ?"(get_service_status|search_logs)"/g, '"name":"ops__$1"');
}

async function runWith(model: Model, extra: Partial<TaskAgentDeps> = {}, task: Partial<TaskAgentSpec> = {}) {
  const tools = new Tools();
  const events = new MemoryEventSink();
  const deadLetters: DeadLetterInput[] = [];
  const incident = parseWith(Incident, { id: 'inc-p', source: 'test', reason: 'HighErrorRate', summary: 'checkout errors' }, 'incident');
  const job: TaskJob = { v: 1, runId: RUN_ID, incidentId: incident.id, taskId: TASK_ID, agent: 'checkout', task: 'Investigate.', incident };
  const deps: TaskAgentDeps = {
    model,
    tools,
    checkpoints: new MemoryCheckpointStore(),
    events,
    deadLetters: {
      add: async (input: DeadLetterInput): Promise<DeadLetter> => {
        deadLetters.push(input);
        return { v: 1, marker: STALL_MARKER, at: new Date(0).toISOString(), ...input };
      },
    },
    log: createLogger({ service: 't', level: 'silent' }),
    ...extra,
  };
  const result = await runTask(job, { ...spec, ...task }, deps, 1);
  return { result, tools, events, deadLetters };
}

describe('the task loop on recorded provider answers', () => {
  it('a Gemini answer cut off at MAX_TOKENS ends the task INCOMPLETE failure naming the output limit, not a stall', async () => {
    const server = await startGeminiServer(() => 'max-tokens');
    servers.push(server);
    const h = await runWith(new GeminiModel({ apiKey: 'AIza-test', baseUrl: server.baseUrl }));
    expect(h.result.status).toBe('failed');
    expect(h.result.error).toBe('model call failed: Gemini cut the answer off at the output token limit (finishReason MAX_TOKENS)');
    expect(h.deadLetters.map((d) => d.kind)).toEqual(['failure']);
    expect(h.events.events.map((e) => e.type)).not.toContain('agent.stalled');
  });

  it("DashScope's strict function.arguments: the correction turn replays {} and puts the raw text in the tool result", async () => {
    // Like Qwen on DashScope: a replayed assistant call whose arguments are not JSON is a 400.
    const server = await startOpenAiServer((req, i): Recording => {
      if (i === 0) return JSON.parse(renamed(JSON.stringify(openAiFixture('malformed-args')))) as Recording;
      const replayed = req.body.messages.flatMap((m) => (m.tool_calls ?? []) as { function: { arguments: string } }[]);
      const strict = replayed.every((c) => {
        try {
          return typeof JSON.parse(c.function.arguments) === 'object';
        } catch {
          return false;
        }
      });
      return strict ? openAiFixture('finish-task') : openAiFixture('dashscope-error-400');
    });
    servers.push(server);
    const h = await runWith(new OpenAiModel({ apiKey: 'sk-test', model: 'qwen-plus', baseUrl: server.baseUrl }));
    expect(h.result.status).toBe('completed');
    const correction = server.requests[1]!.body.messages.find((m) => m.role === 'tool');
    expect(correction?.content).toContain('the arguments are not valid JSON');
    expect(correction?.content).toContain('You sent as arguments: {\\"service\\": \\"checkout\\", \\"window_minutes\\": 15');
  });

  it('Gemini 3 thinking is billed: two gemini-3-flash turns cost $0.001941 at $0.50/$3.00, and the output budget counts 520', async () => {
    const server = await startGeminiServer((i) => (i === 0 ? 'gemini3-flash-call' : 'gemini3-flash-text'));
    servers.push(server);
    const price: ModelPrice = { inputPerMTok: 0.5, outputPerMTok: 3 };
    const h = await runWith(new GeminiModel({ apiKey: 'AIza-test', model: 'gemini-3-flash-preview', baseUrl: server.baseUrl }), { price });
    // The second turn answers in text without finish_task: a stall, but both turns were spent and counted.
    expect(h.result.usage).toMatchObject({
      inputTokens: 762,
      outputTokens: 520,
      reasoningTokens: 425,
      cachedInputTokens: 256,
      modelCalls: 2,
      costUsd: 0.001941,
    });
    expect(overBudget(h.result.usage!, { outputTokens: 500 }, { modelCall: true })).toMatch(/limit of 500 output tokens \(520 used\)/);
  });

  it('prices cached input at the cached rate when the price gives one', async () => {
    const server = await startGeminiServer((i) => (i === 0 ? 'gemini3-flash-call' : 'gemini3-flash-text'));
    servers.push(server);
    const price: ModelPrice = { inputPerMTok: 0.5, outputPerMTok: 3, cachedInputPerMTok: 0.05 };
    const h = await runWith(new GeminiModel({ apiKey: 'AIza-test', model: 'gemini-3-flash-preview', baseUrl: server.baseUrl }), { price });
    // (762 − 256) × 0.50 + 256 × 0.05 + 520 × 3.00, per million.
    expect(h.result.usage?.costUsd).toBe(0.001826);
  });
});
