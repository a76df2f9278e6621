import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, Server } from 'node:http';
import type { AddressInfo } from 'node:net';

import { describe, it, expect, beforeAll, afterAll } from 'vitest';

import { GeminiModel } from './gemini.js';
import { ModelError } from './types.js';
import type { Message, ModelRequest, ToolDeclaration } from './types.js';

/**
 * A local stand-in for the Gemini REST API. It answers `POST /v1beta/models/<model>:generateContent`
 * with the recorded response named by the last `fixture:<name>` marker found in the request's text
 * parts, and records every request so the tests can check what the adapter sent.
 */

const FIXTURES = new URL('../../../test/fixtures/gemini/', import.meta.url);
const API_KEY = 'AIzaSyTEST-not-a-real-key-0123456789abcd';
const SYSTEM = 'You are the checkout specialist. Use the tools, then call finish_task.';

interface Recorded {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  raw: string;
  body: GeminiBody;
}

/** The parts of the Gemini request body the tests look at. */
interface GeminiBody {
  contents: { role?: string; parts: Record<string, unknown>[] }[];
  systemInstruction?: { role?: string; parts: { text?: string }[] };
  tools?: { functionDeclarations: Record<string, unknown>[] }[];
  generationConfig?: Record<string, unknown>;
}

const STATUS_TOOL: ToolDeclaration = {
  name: 'get_service_status',
  description: 'Current health of a service.',
  parameters: {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'object',
    properties: {
      service: { type: 'string', enum: ['checkout', 'payments', 'search'] },
      window_minutes: { type: 'integer', minimum: 1, maximum: 1440, default: 15 },
      labels: { type: 'object', additionalProperties: { type: 'string' } },
    },
    required: ['service'],
    additionalProperties: false,
  },
};

const LOGS_TOOL: ToolDeclaration = {
  name: 'search_logs',
  description: 'Searches recent logs.',
  parameters: {
    type: 'object',
    properties: {
      query: { type: 'string', minLength: 1 },
      limit: { anyOf: [{ type: 'integer' }, { type: 'null' }] },
    },
    required: ['query'],
  },
};

const requests: Recorded[] = [];
const timers = new Set<NodeJS.Timeout>();
let server: Server;
let baseUrl: string;

function fixture(name: string): { status: number; body: string } {
  const body = readFileSync(new URL(`${name}.json`, FIXTURES), 'utf8');
  const parsed = JSON.parse(body) as { error?: { code?: number } };
  return { status: parsed.error?.code ?? 200, body };
}

/** The last `fixture:<name>` marker in the text parts of the request. */
function marker(body: GeminiBody): string | undefined {
  for (const content of [...body.contents].reverse()) {
    for (const part of [...content.parts].reverse()) {
      const found = typeof part['text'] === 'string' ? /fixture:([\w-]+)/.exec(part['text']) : null;
      if (found?.[1] !== undefined) return found[1];
    }
  }
  return undefined;
}

function lastRequest(): Recorded {
  const last = requests.at(-1);
  if (last === undefined) throw new Error('no request recorded');
  return last;
}

function request(messages: Message[], extra: Partial<ModelRequest> = {}): ModelRequest {
  return { agent: 'checkout-specialist', mode: 'task', system: SYSTEM, messages, tools: [STATUS_TOOL, LOGS_TOOL], ...extra };
}

function model(extra: Partial<ConstructorParameters<typeof GeminiModel>[0]> = {}): GeminiModel {
  return new GeminiModel({ apiKey: API_KEY, baseUrl, ...extra });
}

async function failure(promise: Promise<unknown>): Promise<ModelError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(ModelError);
    return error as ModelError;
  }
  throw new Error('expected a ModelError');
}

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const body = JSON.parse(raw) as GeminiBody;
      requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, raw, body });

      if (req.method !== 'POST' || !/^\/v1beta\/models\/[\w.-]+:generateContent$/.test(req.url ?? '')) {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { code: 404, message: `no route ${req.url}`, status: 'NOT_FOUND' } }));
        return;
      }
      const name = marker(body) ?? 'text';
      if (name === 'slow') {
        const timer = setTimeout(() => {
          timers.delete(timer);
          if (!res.destroyed) {
            res.writeHead(200, { 'content-type': 'application/json' });
            res.end(fixture('text').body);
          }
        }, 5_000);
        timers.add(timer);
        return;
      }
      if (name === 'proxy-502') {
        res.writeHead(502, { 'content-type': 'text/html' });
        res.end('<html><body>502 Bad Gateway</body></html>');
        return;
      }
      const { status, body: answer } = fixture(name);
      res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8' });
      res.end(answer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  for (const timer of timers) clearTimeout(timer);
  server.closeAllConnections();
  await new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
});

describe('GeminiModel', () => {
  it('is named after its model', () => {
    expect(model().name).toBe('gemini:gemini-2.5-flash');
    expect(model({ model: 'gemini-2.5-pro' }).name).toBe('gemini:gemini-2.5-pro');
  });

  it("sends a call's thought signature back with it in the next request", async () => {
    await model().generate(
      request([
        { role: 'user', text: 'go fixture:text' },
        { role: 'model', calls: [{ id: 'call_0', name: 'get_service_status', args: { service: 'checkout' }, signature: 'SIG-123' }] },
        { role: 'tool', responses: [{ id: 'call_0', name: 'get_service_status', output: { ok: true } }] },
      ]),
    );
    const parts = lastRequest().body.contents[1]?.parts as Record<string, unknown>[];
    expect(parts[0]).toMatchObject({ functionCall: { name: 'get_service_status' }, thoughtSignature: 'SIG-123' });
  });

  it('maps a function-call response and sends system, tools and the key header', async () => {
    const response = await model({ temperature: 0.2 }).generate(
      request([{ role: 'user', text: 'Checkout is failing, investigate. fixture:function-call' }]),
    );

    expect(response).toEqual({
      calls: [
        {
          id: 'call_0',
          name: 'get_service_status',
          args: { service: 'checkout', window_minutes: 15 },
          // Kept, so that it can be sent back with the call (Gemini 3 requires it).
          signature: 'CrkCAdHtim9Gk2mV1sVd2b3Jx0m8e8yqv6QmZb0x3c1uFhQ0s2v6oNnX4yA7kq9WmFfG0Qb8yJrTQ9lH3m1pXWcA5sF8KqZ2n7dU4vR6tYbE',
        },
        { id: 'call_1', name: 'search_logs', args: { query: 'level:error service:checkout', limit: 20 } },
      ],
      // Thinking is billed as output: 46 candidates + 78 thoughts.
      usage: { inputTokens: 187, outputTokens: 124, totalTokens: 311, reasoningTokens: 78 },
      model: 'gemini-2.5-flash',
    });

    const sent = lastRequest();
    expect(sent.method).toBe('POST');
    expect(sent.url).toBe('/v1beta/models/gemini-2.5-flash:generateContent');
    expect(sent.body.systemInstruction?.parts).toEqual([{ text: SYSTEM }]);
    expect(sent.body.contents).toEqual([{ role: 'user', parts: [{ text: 'Checkout is failing, investigate. fixture:function-call' }] }]);
    expect(sent.body.tools).toEqual([
      {
        functionDeclarations: [
          { name: STATUS_TOOL.name, description: STATUS_TOOL.description, parametersJsonSchema: STATUS_TOOL.parameters },
          { name: LOGS_TOOL.name, description: LOGS_TOOL.description, parametersJsonSchema: LOGS_TOOL.parameters },
        ],
      },
    ]);
    expect(sent.body.generationConfig).toEqual({ temperature: 0.2 });

    // The SDK (2.32) sends the key in the x-goog-api-key header, and nowhere else.
    expect(sent.headers['x-goog-api-key']).toBe(API_KEY);
    expect(sent.url).not.toContain('key=');
    expect(sent.url).not.toContain(API_KEY);
    expect(sent.raw).not.toContain(API_KEY);
    const otherHeaders = Object.entries(sent.headers).filter(([name]) => name !== 'x-goog-api-key');
    expect(JSON.stringify(otherHeaders)).not.toContain(API_KEY);
  });

  it('keeps the function-call id Gemini gives, and numbers its own ids after the earlier calls', async () => {
    const withId = await model().generate(request([{ role: 'user', text: 'Wrap up. fixture:function-call-with-id' }]));
    expect(withId.calls).toEqual([
      {
        id: 'fc_8k2mq7zv41',
        name: 'finish_task',
        args: { summary: 'checkout error rate back to baseline after rollback', status: 'resolved' },
      },
    ]);

    const later = await model().generate(
      request([
        { role: 'user', text: 'Investigate.' },
        { role: 'model', calls: [{ id: 'call_0', name: 'get_service_status', args: { service: 'checkout' } }] },
        { role: 'tool', responses: [{ id: 'call_0', name: 'get_service_status', output: { healthy: false } }] },
        { role: 'user', text: 'Look again. fixture:function-call' },
      ]),
    );
    expect(later.calls.map((call) => call.id)).toEqual(['call_1', 'call_2']);
  });

  it('sends the model and tool turns of the conversation and maps a text answer', async () => {
    const messages: Message[] = [
      { role: 'user', text: 'Why is checkout failing? fixture:text' },
      {
        role: 'model',
        text: 'Let me check.',
        calls: [
          { id: 'call_0', name: 'get_service_status', args: { service: 'checkout' } },
          { id: 'fc_8k2mq7zv41', name: 'search_logs', args: { query: 'timeout' } },
        ],
      },
      {
        role: 'tool',
        responses: [
          { id: 'call_0', name: 'get_service_status', output: { status: 'degraded', error_rate: 0.042 } },
          { id: 'fc_8k2mq7zv41', name: 'search_logs', output: 'log index unavailable', isError: true },
        ],
      },
    ];
    const response = await model().generate(request(messages, { mode: 'chat' }));

    expect(response).toEqual({
      text:
        'The checkout service is degraded: 4.2% of requests failed in the last 15 minutes, ' +
        'all with upstream timeouts from the payment provider.',
      calls: [],
      usage: { inputTokens: 356, outputTokens: 156, totalTokens: 512, reasoningTokens: 123 },
      model: 'gemini-2.5-flash',
    });

    expect(lastRequest().body.contents).toEqual([
      { role: 'user', parts: [{ text: 'Why is checkout failing? fixture:text' }] },
      {
        role: 'model',
        parts: [
          { text: 'Let me check.' },
          // Ids the adapter invented (call_<n>) are not sent back; Gemini's own ids are.
          { functionCall: { name: 'get_service_status', args: { service: 'checkout' } } },
          { functionCall: { id: 'fc_8k2mq7zv41', name: 'search_logs', args: { query: 'timeout' } } },
        ],
      },
      {
        role: 'user',
        parts: [
          {
            functionResponse: {
              name: 'get_service_status',
              response: { output: { status: 'degraded', error_rate: 0.042 } },
            },
          },
          {
            functionResponse: {
              id: 'fc_8k2mq7zv41',
              name: 'search_logs',
              response: { error: 'log index unavailable' },
            },
          },
        ],
      },
    ]);
  });

  it('sends no tools in single mode or when there are none, and no system instruction when absent', async () => {
    const single = await model().generate({
      agent: 'classifier',
      mode: 'single',
      messages: [{ role: 'user', text: 'Classify this alert. fixture:text' }],
      tools: [STATUS_TOOL],
    });
    expect(single.text).toContain('checkout service is degraded');
    expect(lastRequest().body.tools).toBeUndefined();
    expect(lastRequest().body.systemInstruction).toBeUndefined();
    expect(lastRequest().body.generationConfig?.['temperature']).toBeUndefined();

    await model().generate(request([{ role: 'user', text: 'Hello. fixture:text' }], { mode: 'chat', tools: [] }));
    expect(lastRequest().body.tools).toBeUndefined();
  });

  it('turns an HTTP 400 into a non-retryable ModelError with the status and message, without the key', async () => {
    const error = await failure(model().generate(request([{ role: 'user', text: 'fixture:error-400' }])));
    expect(error.retryable).toBe(false);
    expect(error.status).toBe(400);
    expect(error.code).toBe('model_error');
    expect(error.message).toContain('400');
    expect(error.message).toContain('INVALID_ARGUMENT');
    expect(error.message).toContain('API key not valid. Please pass a valid API key.');
    expect(error.message).not.toContain(API_KEY);
    expect(String(error.stack)).not.toContain(API_KEY);
  });

  it('marks 429 and 5xx errors retryable', async () => {
    const before = requests.length;
    const limited = await failure(model().generate(request([{ role: 'user', text: 'fixture:error-429' }])));
    expect(limited.retryable).toBe(true);
    expect(limited.status).toBe(429);
    expect(limited.message).toContain('RESOURCE_EXHAUSTED');
    expect(limited.message).toContain('You exceeded your current quota');
    // The adapter does not retry by itself: retrying is the caller's decision.
    expect(requests.length).toBe(before + 1);

    const overloaded = await failure(model().generate(request([{ role: 'user', text: 'fixture:error-503' }])));
    expect(overloaded.retryable).toBe(true);
    expect(overloaded.status).toBe(503);
    expect(overloaded.message).toContain('The model is overloaded');

    const proxy = await failure(model().generate(request([{ role: 'user', text: 'fixture:proxy-502' }])));
    expect(proxy.retryable).toBe(true);
    expect(proxy.status).toBe(502);
    expect(proxy.message).toContain('502 Bad Gateway');

    for (const error of [limited, overloaded, proxy]) expect(error.message).not.toContain(API_KEY);
  });

  it('turns a blocked prompt into a non-retryable ModelError', async () => {
    const error = await failure(model().generate(request([{ role: 'user', text: 'fixture:blocked' }])));
    expect(error.retryable).toBe(false);
    expect(error.message).toContain('PROHIBITED_CONTENT');
  });

  it('turns a network failure into a retryable ModelError', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));

    const error = await failure(
      new GeminiModel({ apiKey: API_KEY, baseUrl: `http://127.0.0.1:${port}` }).generate(request([{ role: 'user', text: 'hello' }])),
    );
    expect(error.retryable).toBe(true);
    expect(error.status).toBeUndefined();
    expect(error.message).not.toContain(API_KEY);
  });

  it('gives up after timeoutMs with a retryable ModelError', async () => {
    const started = Date.now();
    const error = await failure(model({ timeoutMs: 150 }).generate(request([{ role: 'user', text: 'fixture:slow' }])));
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(error.retryable).toBe(true);
    expect(error.message).toContain('timed out after 150 ms');
  });

  it('stops when the caller aborts, with a non-retryable ModelError', async () => {
    const controller = new AbortController();
    const pending = model().generate(request([{ role: 'user', text: 'fixture:slow' }]), { signal: controller.signal });
    setTimeout(() => controller.abort(), 50);
    const error = await failure(pending);
    expect(error.retryable).toBe(false);
    expect(error.message).toContain('aborted');

    const before = requests.length;
    const already = await failure(model().generate(request([{ role: 'user', text: 'fixture:text' }]), { signal: AbortSignal.abort() }));
    expect(already.retryable).toBe(false);
    expect(requests.length).toBe(before);
  });

  it('rejects a missing API key at construction', () => {
    expect(() => new GeminiModel({ apiKey: '' })).toThrow(/apiKey is required/);
  });
});

/** Shapes recorded from the live Gemini API by other projects (test/fixtures/README.md). */
describe('GeminiModel against recorded Gemini 2.5 and 3 responses', () => {
  const ask = (name: string) => request([{ role: 'user', text: `Investigate. fixture:${name}` }]);

  it('never takes text cut off at MAX_TOKENS as an answer: output_limit, not retryable', async () => {
    const error = await failure(model().generate(ask('max-tokens')));
    expect(error).toMatchObject({ retryable: false, reason: 'output_limit' });
    expect(error.message).toBe('Gemini cut the answer off at the output token limit (finishReason MAX_TOKENS)');
    // A thinking model that spent the whole budget thinking: no parts at all.
    expect(await failure(model().generate(ask('max-tokens-no-parts')))).toMatchObject({ reason: 'output_limit' });
  });

  it('ends RECITATION, MALFORMED_FUNCTION_CALL, OTHER and an empty candidate list honestly, whatever text came', async () => {
    expect(await failure(model().generate(ask('recitation')))).toMatchObject({ retryable: false, reason: 'refused' });
    const malformed = await failure(model().generate(ask('malformed-function-call')));
    expect(malformed).toMatchObject({ retryable: false, reason: 'malformed' });
    // (@google/genai 2.32 drops the candidate's finishMessage on the Developer API: only the reason is seen.)
    expect(malformed.message).toBe('Gemini stopped the answer (finishReason MALFORMED_FUNCTION_CALL)');
    expect(await failure(model().generate(ask('other')))).toMatchObject({ retryable: false, reason: 'malformed' });
    expect((await failure(model().generate(ask('empty-candidates')))).message).toBe('Gemini returned no candidates');
  });

  it('bills thinking as output: gemini-3-pro reports 15 candidate tokens for 1,816 billed', async () => {
    const response = await model({ model: 'gemini-3-pro-preview' }).generate(ask('gemini3-pro-tool-call'));
    expect(response.usage).toEqual({ inputTokens: 29, outputTokens: 1816, totalTokens: 1845, reasoningTokens: 1801 });
    expect(response.calls[0]).toMatchObject({ name: 'get_service_status', signature: expect.stringMatching(/^Eqo\+/) });
  });

  it('gemini-3-flash: two turns with 190 and 235 thinking tokens are 520 output tokens, cached input apart', async () => {
    const m = model({ model: 'gemini-3-flash-preview' });
    const call = await m.generate(ask('gemini3-flash-call'));
    const text = await m.generate(ask('gemini3-flash-text'));
    expect(call.usage).toEqual({ inputTokens: 312, outputTokens: 209, totalTokens: 521, reasoningTokens: 190 });
    expect(text.usage).toEqual({ inputTokens: 450, outputTokens: 311, totalTokens: 761, reasoningTokens: 235, cachedInputTokens: 256 });
    expect((call.usage?.outputTokens ?? 0) + (text.usage?.outputTokens ?? 0)).toBe(520);
  });

  it('recognises the context-length error (INVALID_ARGUMENT … exceeds the maximum number of tokens)', async () => {
    const error = await failure(model().generate(ask('error-context-length')));
    expect(error).toMatchObject({ status: 400, retryable: false, reason: 'context_length' });
    expect(error.message).toContain('exceeds the maximum number of tokens allowed');
    expect((await failure(model().generate(ask('error-400')))).reason).toBeUndefined();
  });
});
