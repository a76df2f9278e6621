import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startOpenAiServer, type OpenAiServer } from '../../../test/helpers/openai-server.js';
import { OpenAiModel } from './openai.js';
import { ModelError } from './types.js';
import type { Message, ModelRequest, ToolDeclaration } from './types.js';

/**
 * The shapes OpenAI-compatible servers really send (test/fixtures/README.md says where each was
 * recorded): Mistral's calls without `type`, llama.cpp's arguments as an object, Gemini's
 * OpenAI-compatible endpoint (`id: ""`, `extra_content.google.thought_signature`), DeepSeek's
 * `reasoning_content`, Qwen's `<think>` block, reasoning and cached tokens in `usage`, and the
 * context-length error.
 */

const TOOLS: ToolDeclaration[] = [
  { name: 'get_service_status', description: 'Health.', parameters: { type: 'object', properties: { service: { type: 'string' } } } },
  { name: 'search_logs', description: 'Logs.', parameters: { type: 'object', properties: { query: { type: 'string' } } } },
];

let server: OpenAiServer;
beforeAll(async () => {
  server = await startOpenAiServer();
});
afterAll(async () => {
  await server.close();
});

const model = () => new OpenAiModel({ apiKey: 'sk-shapes-test-key-000000', model: 'm', baseUrl: server.baseUrl });
const request = (messages: Message[]): ModelRequest => ({ agent: 'checkout', mode: 'task', system: 'S', messages, tools: TOOLS });
const ask = (fixture: string): Message[] => [{ role: 'user', text: `Investigate. fixture:${fixture}` }];
const lastBody = () => {
  const r = server.requests.at(-1);
  if (!r) throw new Error('no request');
  return r.body;
};

async function failure(promise: Promise<unknown>): Promise<ModelError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(ModelError);
    return error as ModelError;
  }
  throw new Error('expected a ModelError');
}

describe('OpenAiModel against the shapes real servers send', () => {
  it('takes a Mistral tool call without `type` (and without `content`) as a function call', async () => {
    const response = await model().generate(request(ask('mistral-tool-call')));
    expect(response.calls).toEqual([{ id: 'gSIMJiOkT', name: 'get_service_status', args: { service: 'checkout' } }]);
    expect(response.text).toBeUndefined();
  });

  it('takes llama.cpp arguments sent as a JSON object as the parsed arguments', async () => {
    const response = await model().generate(request(ask('llamacpp-args-object')));
    expect(response.calls).toEqual([
      { id: 'nV4bzmZ0J3dYqGLh2kTfS8wXcE1aUo6p', name: 'get_service_status', args: { service: 'checkout', window_minutes: 15 } },
    ]);
  });

  it("keeps Gemini's empty ids and sends extra_content.google.thought_signature back unchanged", async () => {
    const m = model();
    const first = await m.generate(request(ask('gemini-compat-tool-calls')));
    expect(first.calls.map((c) => [c.id, c.name, c.signature])).toEqual([
      ['', 'get_service_status', 'EjQKMgEMOdbHO0Gd+c9Mxk4ELwPGbpCEcp2mFfYYLix2UVtBH3fL8GECc4+JITVnHF4qZDsA'],
      ['', 'search_logs', undefined],
    ]);
    await m.generate(
      request([
        ...ask('gemini-compat-tool-calls'),
        { role: 'model', calls: first.calls },
        {
          role: 'tool',
          responses: first.calls.map((c) => ({ id: c.id, name: c.name, output: 'ok' })),
        },
        { role: 'user', text: 'fixture:text' },
      ]),
    );
    const assistant = lastBody().messages[2] as { tool_calls: Record<string, unknown>[] };
    expect(assistant.tool_calls[0]).toEqual({
      id: '',
      type: 'function',
      function: { name: 'get_service_status', arguments: '{"service":"checkout"}' },
      extra_content: { google: { thought_signature: 'EjQKMgEMOdbHO0Gd+c9Mxk4ELwPGbpCEcp2mFfYYLix2UVtBH3fL8GECc4+JITVnHF4qZDsA' } },
    });
    expect(assistant.tool_calls[1]).not.toHaveProperty('extra_content');
  });

  it("keeps DeepSeek's reasoning_content out of the answer, and sends it back with that tool-call turn only", async () => {
    const m = model();
    const first = await m.generate(request(ask('deepseek-tool-call')));
    expect(first.text).toBeUndefined();
    expect(first.reasoning).toEqual([
      { kind: 'reasoning_content', text: "The user asks about the checkout service. I'll check its status first." },
    ]);
    expect(first.usage).toEqual({ inputTokens: 374, outputTokens: 60, totalTokens: 434, reasoningTokens: 16 });
    const answer = await m.generate(request(ask('deepseek-reasoner-text')));
    expect(answer.text).toBe('The checkout service is healthy; no action needed.');
    await m.generate(
      request([
        ...ask('deepseek-tool-call'),
        { role: 'model', calls: first.calls, reasoning: first.reasoning! },
        { role: 'tool', responses: [{ id: first.calls[0]!.id, name: 'get_service_status', output: 'healthy' }] },
        { role: 'model', text: answer.text!, reasoning: answer.reasoning! },
        { role: 'user', text: 'And now? fixture:text' },
      ]),
    );
    const sent = lastBody().messages;
    expect(sent[2]).toMatchObject({
      role: 'assistant',
      reasoning_content: "The user asks about the checkout service. I'll check its status first.",
    });
    // A final answer's reasoning is not sent back (DeepSeek refuses it there).
    expect(sent[4]).toEqual({ role: 'assistant', content: 'The checkout service is healthy; no action needed.' });
  });

  it('takes a <think> block out of the answer', async () => {
    const response = await model().generate(request(ask('qwen-think')));
    expect(response.text).toBe('The checkout service is degraded: its database pool is exhausted.');
    expect(response.reasoning).toEqual([
      { kind: 'think', text: 'The status tool said degraded and the logs show pool timeouts. So the database pool is the cause.' },
    ]);
  });

  it('reports reasoning and cached input tokens apart, counted once in the billed totals', async () => {
    expect((await model().generate(request(ask('reasoning-tokens')))).usage).toEqual({
      inputTokens: 577,
      outputTokens: 2320,
      totalTokens: 2897,
      reasoningTokens: 1792,
    });
    expect((await model().generate(request(ask('cached-tokens')))).usage).toEqual({
      inputTokens: 2006,
      outputTokens: 12,
      totalTokens: 2018,
      cachedInputTokens: 1920,
    });
  });

  it('recognises the context-length error (reason context_length), and a cut-off answer (output_limit)', async () => {
    const tooLong = await failure(model().generate(request(ask('error-context-length'))));
    expect(tooLong).toMatchObject({ status: 400, retryable: false, reason: 'context_length' });
    expect(tooLong.message).toContain('context_length_exceeded');
    const cut = await failure(model().generate(request(ask('finish-length'))));
    expect(cut).toMatchObject({ retryable: false, reason: 'output_limit' });
    const other = await failure(model().generate(request(ask('dashscope-error-400'))));
    expect(other.reason).toBeUndefined();
    expect(other.message).toContain('invalid_parameter_error');
  });
});
