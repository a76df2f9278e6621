import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { anthropicFixture, startAnthropicServer, type AnthropicServer } from '../../../test/helpers/anthropic-server.js';
import { AnthropicModel } from './anthropic.js';
import { ModelError } from './types.js';
import type { Message, ModelRequest, ToolDeclaration } from './types.js';

/**
 * The Anthropic adapter against a local server answering in the Messages API's recorded shapes
 * (test/fixtures/anthropic; where each was seen: test/fixtures/README.md).
 */

const API_KEY = 'sk-ant-test-not-a-real-key-0123456789';
const SYSTEM = 'You are the checkout specialist. Use the tools, then call finish_task.';
const TOOLS: ToolDeclaration[] = [
  { name: 'get_service_status', description: 'Health.', parameters: { type: 'object', properties: { service: { type: 'string' } } } },
  { name: 'search_logs', description: 'Logs.', parameters: { type: 'object', properties: { query: { type: 'string' } } } },
];

let server: AnthropicServer;
beforeAll(async () => {
  server = await startAnthropicServer((req) => {
    // A second request after a pause_turn: the continuation finishes the turn.
    const last = req.body.messages.at(-1);
    if (last?.role === 'assistant') return anthropicFixture('text');
    return undefined;
  });
});
afterAll(async () => {
  await server.close();
});

const model = (extra: Partial<ConstructorParameters<typeof AnthropicModel>[0]> = {}) =>
  new AnthropicModel({ apiKey: API_KEY, baseUrl: server.baseUrl, ...extra });
const request = (messages: Message[], extra: Partial<ModelRequest> = {}): ModelRequest => ({
  agent: 'checkout',
  mode: 'task',
  system: SYSTEM,
  messages,
  tools: TOOLS,
  ...extra,
});
const ask = (fixture: string): Message[] => [{ role: 'user', text: `Investigate. fixture:${fixture}` }];
const last = () => {
  const r = server.requests.at(-1);
  if (!r) throw new Error('no request');
  return r;
};

async function failure(promise: Promise<unknown>): Promise<ModelError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(ModelError);
    expect((error as Error).message).not.toContain(API_KEY);
    return error as ModelError;
  }
  throw new Error('expected a ModelError');
}

describe('AnthropicModel', () => {
  it('answers with text; sends system and tools with cache breakpoints, max_tokens, the key only in a header', async () => {
    const m = model();
    expect(m.name).toBe('anthropic:claude-sonnet-4-5');
    expect(m.contextTokens).toBe(200_000);
    const response = await m.generate(request(ask('text')));
    expect(response).toEqual({
      calls: [],
      text: 'The checkout service is healthy; no action needed.',
      usage: { inputTokens: 120, outputTokens: 14, totalTokens: 134 },
      model: 'claude-sonnet-4-5-20250929',
    });
    const sent = last();
    expect(sent.url).toBe('/v1/messages');
    expect(JSON.stringify(sent.headers)).toContain(API_KEY);
    expect(JSON.stringify(sent.body)).not.toContain(API_KEY);
    expect(sent.body.max_tokens).toBe(8192);
    expect(sent.body.system).toEqual([{ type: 'text', text: SYSTEM, cache_control: { type: 'ephemeral' } }]);
    expect(sent.body.tools?.map((t) => [t.name, t.cache_control])).toEqual([
      ['get_service_status', undefined],
      ['search_logs', { type: 'ephemeral' }],
    ]);
    expect(sent.body.stream).toBeUndefined();
  });

  it('keeps parallel tool_use blocks in order and answers each with its tool_result, in one user turn', async () => {
    const m = model();
    const first = await m.generate(request(ask('tool-use-parallel')));
    expect(first.text).toBe("I'll check the service status and the error logs at the same time.");
    expect(first.calls).toEqual([
      { id: 'toolu_01Ak3nZRU7hLMPbZqNjYE7qp', name: 'get_service_status', args: { service: 'checkout' } },
      { id: 'toolu_01GKTmLC6p74jArCZhsHVsX5', name: 'search_logs', args: { query: 'level:error service:checkout', limit: 20 } },
    ]);
    // Cache writes are input, priced apart.
    expect(first.usage).toEqual({ inputTokens: 1467, outputTokens: 121, totalTokens: 1588, cacheWriteTokens: 1024 });
    await m.generate(
      request([
        ...ask('tool-use-parallel'),
        { role: 'model', text: first.text!, calls: first.calls },
        {
          role: 'tool',
          responses: [
            { id: 'toolu_01Ak3nZRU7hLMPbZqNjYE7qp', name: 'get_service_status', output: { status: 'degraded' } },
            { id: 'toolu_01GKTmLC6p74jArCZhsHVsX5', name: 'search_logs', output: 'timeout', isError: true },
          ],
        },
        { role: 'user', text: 'Now finish. fixture:finish-task' },
      ]),
    );
    const messages = last().body.messages;
    expect(messages.map((x) => x.role)).toEqual(['user', 'assistant', 'user']);
    expect(messages[1]?.content).toEqual([
      { type: 'text', text: "I'll check the service status and the error logs at the same time." },
      { type: 'tool_use', id: 'toolu_01Ak3nZRU7hLMPbZqNjYE7qp', name: 'get_service_status', input: { service: 'checkout' } },
      {
        type: 'tool_use',
        id: 'toolu_01GKTmLC6p74jArCZhsHVsX5',
        name: 'search_logs',
        input: { query: 'level:error service:checkout', limit: 20 },
      },
    ]);
    expect(messages[2]?.content).toEqual([
      { type: 'tool_result', tool_use_id: 'toolu_01Ak3nZRU7hLMPbZqNjYE7qp', content: '{"status":"degraded"}' },
      { type: 'tool_result', tool_use_id: 'toolu_01GKTmLC6p74jArCZhsHVsX5', content: 'timeout', is_error: true },
      // The conversation's breakpoint: the next turn reads all of this from the cache.
      { type: 'text', text: 'Now finish. fixture:finish-task', cache_control: { type: 'ephemeral' } },
    ]);
  });

  it('moves the conversation breakpoint to the end of each request; what the turn before sent stays byte-identical', async () => {
    const m = model();
    const turn1: Message[] = ask('tool-use-parallel');
    const first = await m.generate(request(turn1));
    const body1 = last().body;
    const turn2: Message[] = [
      ...turn1,
      { role: 'model', text: first.text!, calls: first.calls },
      {
        role: 'tool',
        responses: first.calls.map((c) => ({ id: c.id, name: c.name, output: { ok: true } })),
      },
    ];
    await m.generate(request(turn2));
    const body2 = last().body;
    const blocks = (b: typeof body1) => b.messages.flatMap((x) => (Array.isArray(x.content) ? x.content : []));
    // One breakpoint in the conversation, on its last block.
    for (const b of [body1, body2]) {
      const marked = blocks(b).map((x) => x.cache_control !== undefined);
      expect(marked.filter(Boolean)).toHaveLength(1);
      expect(marked.at(-1)).toBe(true);
    }
    // The prefix a provider caches (tools, system, turn 1's blocks) is the same bytes in turn 2,
    // the breakpoints aside (they mark where a cache entry ends, not what it holds).
    const bare = (x: unknown) => JSON.stringify(x, (k, v: unknown) => (k === 'cache_control' ? undefined : v));
    expect(bare(body2.tools)).toBe(bare(body1.tools));
    expect(bare(body2.system)).toBe(bare(body1.system));
    const n = blocks(body1).length;
    expect(bare(blocks(body2).slice(0, n))).toBe(bare(blocks(body1)));
  });

  it('keeps thinking out of the answer and sends the signed block back first in that assistant turn', async () => {
    const m = model({ thinkingBudgetTokens: 2048 });
    const first = await m.generate(request(ask('thinking-tool-use')));
    expect(first.text).toBe('Let me check the service first.');
    expect(first.reasoning).toEqual([
      {
        kind: 'thinking',
        text: "The incident says checkout is slow. I have a status tool; I should check the service's health before guessing at a cause.",
        signature: expect.stringMatching(/^EskFCkYIBhgCKkBWb6bE/),
      },
    ]);
    expect(last().body.thinking).toEqual({ type: 'enabled', budget_tokens: 2048 });
    await m.generate(
      request([
        ...ask('thinking-tool-use'),
        { role: 'model', text: first.text!, calls: first.calls, reasoning: first.reasoning! },
        { role: 'tool', responses: [{ id: first.calls[0]!.id, name: 'get_service_status', output: 'degraded' }] },
        { role: 'user', text: 'fixture:text' },
      ]),
    );
    const assistant = last().body.messages[1]!.content as { type: string; signature?: string }[];
    expect(assistant.map((b) => b.type)).toEqual(['thinking', 'text', 'tool_use']);
    expect(assistant[0]?.signature).toBe(first.reasoning![0]!.signature);
  });

  it('reports cache reads apart: 3 new input tokens and 1,111 read from the cache', async () => {
    const response = await model().generate(request(ask('cache-read')));
    expect(response.usage).toEqual({ inputTokens: 1114, outputTokens: 406, totalTokens: 1520, cachedInputTokens: 1111 });
  });

  it('ends max_tokens, refusal and an endless pause_turn honestly; continues a pause_turn once', async () => {
    expect(await failure(model().generate(request(ask('max-tokens'))))).toMatchObject({ retryable: false, reason: 'output_limit' });
    const refused = await failure(model().generate(request(ask('refusal'))));
    expect(refused).toMatchObject({ retryable: false, reason: 'refused' });
    expect(refused.message).toContain('blocked under Anthropic');
    const before = server.requests.length;
    const resumed = await model().generate(request(ask('pause-turn')));
    expect(server.requests.length - before).toBe(2);
    expect(resumed.text).toBe('The checkout service is healthy; no action needed.');
    // The paused content went back as the assistant's turn; both calls are billed.
    expect(last().body.messages.at(-1)).toEqual({
      role: 'assistant',
      content: [{ type: 'text', text: 'Looking through the runbooks now.' }],
    });
    expect(resumed.usage).toEqual({ inputTokens: 320, outputTokens: 23, totalTokens: 343 });
    const stuck = await failure(model({ maxPauseContinuations: 0 }).generate(request(ask('pause-turn'))));
    expect(stuck.message).toContain('pause_turn');
  });

  it('maps 529 overloaded_error and 429 rate_limit_error (with retry-after) to retryable errors', async () => {
    const overloaded = await failure(model().generate(request(ask('error-529'))));
    expect(overloaded).toMatchObject({ retryable: true, status: 529 });
    expect(overloaded.message).toBe('Anthropic API error: HTTP 529 overloaded_error: Overloaded');
    const limited = await failure(model().generate(request(ask('error-429'))));
    expect(limited).toMatchObject({ retryable: true, status: 429, retryAfterMs: 7000 });
    expect(limited.message).toContain('rate_limit_error: This request would exceed');
  });

  it('recognises a too-long prompt as context_length; other 4xx are final', async () => {
    const tooLong = await failure(model().generate(request(ask('error-prompt-too-long'))));
    expect(tooLong).toMatchObject({ retryable: false, status: 400, reason: 'context_length' });
    expect(tooLong.message).toContain('prompt is too long: 208310 tokens > 200000 maximum');
    const denied = await failure(model().generate(request(ask('error-401'))));
    expect(denied).toMatchObject({ retryable: false, status: 401 });
    expect(denied.reason).toBeUndefined();
  });

  it('sends no tools in single mode and no cache breakpoints with promptCaching off', async () => {
    await model({ promptCaching: false }).generate(request(ask('text'), { mode: 'single' }));
    expect(last().body.tools).toBeUndefined();
    expect(last().body.system).toEqual([{ type: 'text', text: SYSTEM }]);
  });

  it('checks its options', () => {
    expect(() => new AnthropicModel({ apiKey: '' })).toThrow(/apiKey is required/);
    expect(() => new AnthropicModel({ apiKey: 'k', thinkingBudgetTokens: 9000 })).toThrow(/below maxOutputTokens/);
  });
});
