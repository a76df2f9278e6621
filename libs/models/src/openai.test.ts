import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startOpenAiServer, type OpenAiServer } from '../../../test/helpers/openai-server.js';
import { retryAfterMs } from './openai-errors.js';
import { OpenAiModel } from './openai.js';
import { ModelError } from './types.js';
import type { Message, ModelRequest, ToolDeclaration } from './types.js';

/**
 * The OpenAI adapter against a local server replaying recorded Chat Completions responses
 * (test/fixtures/openai): the last `fixture:<name>` marker of the request picks the recording.
 */

const API_KEY = 'sk-test-not-a-real-key-0123456789abcdef';
const SYSTEM = 'You are the checkout specialist. Use the tools, then call finish_task.';

const STATUS_TOOL: ToolDeclaration = {
  name: 'get_service_status',
  description: 'Current health of a service.',
  parameters: { type: 'object', properties: { service: { type: 'string' }, window_minutes: { type: 'integer' } }, required: ['service'] },
};
const LOGS_TOOL: ToolDeclaration = {
  name: 'search_logs',
  description: 'Searches recent logs.',
  parameters: { type: 'object', properties: { query: { type: 'string' }, limit: { type: 'integer' } }, required: ['query'] },
};

let server: OpenAiServer;

beforeAll(async () => {
  server = await startOpenAiServer();
});
afterAll(async () => {
  await server.close();
});

function request(messages: Message[], extra: Partial<ModelRequest> = {}): ModelRequest {
  return { agent: 'checkout', mode: 'task', system: SYSTEM, messages, tools: [STATUS_TOOL, LOGS_TOOL], ...extra };
}

function ask(fixture: string): Message[] {
  return [{ role: 'user', text: `Investigate. fixture:${fixture}` }];
}

function model(extra: Partial<ConstructorParameters<typeof OpenAiModel>[0]> = {}): OpenAiModel {
  return new OpenAiModel({ apiKey: API_KEY, model: 'gpt-4.1-mini', baseUrl: server.baseUrl, ...extra });
}

async function failure(promise: Promise<unknown>): Promise<ModelError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(ModelError);
    const e = error as ModelError;
    expect(e.message).not.toContain(API_KEY);
    return e;
  }
  throw new Error('expected a ModelError');
}

function last() {
  const r = server.requests.at(-1);
  if (!r) throw new Error('no request');
  return r;
}

describe('OpenAiModel', () => {
  it('answers with text, reads the usage, and sends system, tools and the key only as a bearer token', async () => {
    const m = model();
    expect(m.name).toBe('openai:gpt-4.1-mini');
    const response = await m.generate(request(ask('text')));
    expect(response).toEqual({
      calls: [],
      text: 'The checkout service is healthy; no action needed.',
      usage: { inputTokens: 120, outputTokens: 14, totalTokens: 134 },
      model: 'gpt-4.1-mini-2025-04-14',
    });
    const sent = last();
    expect(sent.url).toBe('/v1/chat/completions');
    expect(sent.headers.authorization).toBe(`Bearer ${API_KEY}`);
    expect(JSON.stringify(sent.body)).not.toContain(API_KEY);
    expect(sent.body.model).toBe('gpt-4.1-mini');
    expect(sent.body.messages[0]).toEqual({ role: 'system', content: SYSTEM });
    expect(sent.body.tools?.map((t) => t.function.name)).toEqual(['get_service_status', 'search_logs']);
    expect(sent.body.tools?.[0]?.function.parameters).toEqual(STATUS_TOOL.parameters);
    expect(sent.body.stream).toBeUndefined();
  });

  it('sends no tools in single mode', async () => {
    await model().generate(request(ask('text'), { mode: 'single' }));
    expect(last().body.tools).toBeUndefined();
  });

  it('turns a tool call into a ToolCall with parsed arguments', async () => {
    const response = await model().generate(request(ask('tool-call')));
    expect(response.calls).toEqual([
      { id: 'call_Qm3vXh8TQ2aZ1Lw7', name: 'get_service_status', args: { service: 'checkout', window_minutes: 15 } },
    ]);
    expect(response.text).toBeUndefined();
    expect(response.usage).toEqual({ inputTokens: 212, outputTokens: 38, totalTokens: 250 });
  });

  it('keeps parallel tool calls in order, and sends them back with their results', async () => {
    const m = model();
    const first = await m.generate(request(ask('parallel-tool-calls')));
    expect(first.calls.map((c) => [c.id, c.name, c.args])).toEqual([
      ['call_8Hk2Lp0sVb1Nq4Rt', 'get_service_status', { service: 'checkout' }],
      ['call_Z9yW4cE7uJ2mK6Pd', 'search_logs', { query: 'level:error service:checkout', limit: 20 }],
    ]);
    const messages: Message[] = [
      ...ask('parallel-tool-calls'),
      { role: 'model', calls: first.calls },
      {
        role: 'tool',
        responses: [
          { id: 'call_8Hk2Lp0sVb1Nq4Rt', name: 'get_service_status', output: 'degraded' },
          { id: 'call_Z9yW4cE7uJ2mK6Pd', name: 'search_logs', output: 'timeout', isError: true },
        ],
      },
      { role: 'user', text: 'Now finish. fixture:finish-task' },
    ];
    const second = await m.generate(request(messages));
    expect(second.calls[0]?.name).toBe('finish_task');
    const sent = last().body.messages;
    expect(sent[2]).toEqual({
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: 'call_8Hk2Lp0sVb1Nq4Rt', type: 'function', function: { name: 'get_service_status', arguments: '{"service":"checkout"}' } },
        {
          id: 'call_Z9yW4cE7uJ2mK6Pd',
          type: 'function',
          function: { name: 'search_logs', arguments: '{"query":"level:error service:checkout","limit":20}' },
        },
      ],
    });
    expect(sent[3]).toEqual({ role: 'tool', tool_call_id: 'call_8Hk2Lp0sVb1Nq4Rt', content: '{"output":"degraded"}' });
    expect(sent[4]).toEqual({ role: 'tool', tool_call_id: 'call_Z9yW4cE7uJ2mK6Pd', content: '{"error":"timeout"}' });
  });

  it('returns malformed tool-call JSON as a call with argsError, and sends {} back as its arguments', async () => {
    const m = model();
    const response = await m.generate(request(ask('malformed-args')));
    expect(response.calls).toHaveLength(1);
    const call = response.calls[0]!;
    expect(call).toMatchObject({ id: 'call_Bd4Jx8Rr2Ty6Gh0K', name: 'get_service_status', args: {} });
    expect(call.argsError).toMatch(/not valid JSON/);
    expect(call.rawArgs).toBe('{"service": "checkout", "window_minutes": 15');
    await m.generate(
      request([
        ...ask('malformed-args'),
        { role: 'model', calls: [call] },
        { role: 'tool', responses: [{ id: call.id, name: call.name, isError: true, output: 'bad arguments' }] },
        { role: 'user', text: 'fixture:text' },
      ]),
    );
    const sent = last().body.messages[2] as { tool_calls: { function: { arguments: string } }[] };
    // Strict servers (DashScope) refuse a replayed `function.arguments` that is not JSON.
    expect(sent.tool_calls[0]?.function.arguments).toBe('{}');
  });

  it('makes a refusal a clear, non-retryable error', async () => {
    const e = await failure(model().generate(request(ask('refusal'))));
    expect(e.retryable).toBe(false);
    expect(e.message).toBe("the model refused: I'm sorry, but I can't help with that request.");
  });

  it('makes finish_reason length and content_filter clear, non-retryable errors', async () => {
    const cut = await failure(model().generate(request(ask('finish-length'))));
    expect(cut.retryable).toBe(false);
    expect(cut.message).toMatch(/output token limit \(finish_reason length\)/);
    const filtered = await failure(model().generate(request(ask('content-filter'))));
    expect(filtered.retryable).toBe(false);
    expect(filtered.message).toMatch(/finish_reason content_filter/);
  });

  it('asks for structured output when the request has a schema, unless turned off', async () => {
    const schema = { type: 'object', properties: { specialists: { type: 'array', items: { type: 'string' } } } };
    const response = await model().generate(request(ask('structured'), { mode: 'single', responseSchema: { name: 'route', schema } }));
    expect(response.text).toBe('{"specialists":["checkout"]}');
    expect(last().body.response_format).toEqual({ type: 'json_schema', json_schema: { name: 'route', schema, strict: false } });
    await model({ structuredOutput: false }).generate(
      request(ask('structured'), { mode: 'single', responseSchema: { name: 'route', schema } }),
    );
    expect(last().body.response_format).toBeUndefined();
  });

  it('makes 429 retryable with the server’s Retry-After, without retrying itself', async () => {
    const before = server.requests.length;
    const e = await failure(model().generate(request(ask('error-429'))));
    expect(server.requests.length - before).toBe(1);
    expect(e).toMatchObject({ retryable: true, status: 429, retryAfterMs: 2000 });
    expect(e.message).toMatch(/^OpenAI API error: HTTP 429 rate_limit_exceeded: Rate limit reached/);
  });

  it('makes 5xx retryable and 400/401 not, naming the provider’s error and never the key', async () => {
    expect(await failure(model().generate(request(ask('error-500'))))).toMatchObject({ retryable: true, status: 500 });
    const auth = await failure(model().generate(request(ask('error-401'))));
    expect(auth).toMatchObject({ retryable: false, status: 401 });
    expect(auth.message).toMatch(/invalid_api_key/);
    const bad = await failure(model().generate(request(ask('error-400'))));
    expect(bad).toMatchObject({ retryable: false, status: 400 });
    expect(bad.message).toMatch(/invalid_function_parameters: Invalid schema/);
  });

  it('makes a refused connection retryable', async () => {
    const closed = await startOpenAiServer();
    const url = closed.baseUrl;
    await closed.close();
    const e = await failure(model({ baseUrl: url }).generate(request(ask('text'))));
    expect(e.retryable).toBe(true);
    expect(e.message).toMatch(/^OpenAI request failed/);
  });

  it('rejects a missing key or model at construction', () => {
    expect(() => new OpenAiModel({ apiKey: '', model: 'x' })).toThrow(/apiKey is required/);
    expect(() => new OpenAiModel({ apiKey: 'k', model: '' })).toThrow(/model is required/);
  });
});

describe('retryAfterMs', () => {
  it('reads retry-after-ms, Retry-After seconds and an HTTP date', () => {
    expect(retryAfterMs(new Headers({ 'retry-after-ms': '250' }))).toBe(250);
    expect(retryAfterMs(new Headers({ 'retry-after': '3' }))).toBe(3000);
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(retryAfterMs(new Headers({ 'retry-after': 'Thu, 01 Jan 2026 00:00:05 GMT' }), now)).toBe(5000);
    expect(retryAfterMs(new Headers({}))).toBeUndefined();
    expect(retryAfterMs(undefined)).toBeUndefined();
  });
});
