/**
 * A local stand-in for an OpenAI-compatible Chat Completions endpoint. It answers
 * `POST <base>/chat/completions` with recorded responses from `test/fixtures/openai/` (each file:
 * `{ status, headers?, body }`), chosen by a function of the request, and records every request
 * so tests can check what was sent.
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ROOT } from './paths.js';

/** A recorded response. */
export interface Recording {
  status: number;
  headers?: Record<string, string>;
  body: unknown;
}

/** One request the server received. */
export interface ReceivedRequest {
  at: number;
  url: string;
  headers: IncomingHttpHeaders;
  body: ChatBody;
}

/** The parts of a Chat Completions request the tests look at. */
export interface ChatBody {
  model: string;
  messages: { role: string; content?: string | null; tool_calls?: unknown[]; tool_call_id?: string }[];
  tools?: { type: string; function: { name: string; parameters?: unknown } }[];
  response_format?: unknown;
  [key: string]: unknown;
}

/** Chooses the answer to a request: a recording, or `undefined` for the `fixture:<name>` marker's. */
export type Responder = (request: ReceivedRequest, index: number) => Recording | undefined;

/** Reads `test/fixtures/openai/<name>.json`. */
export function openAiFixture(name: string): Recording {
  return JSON.parse(readFileSync(`${ROOT}/test/fixtures/openai/${name}.json`, 'utf8')) as Recording;
}

/** The last `fixture:<name>` marker in the request's user or system messages. */
export function fixtureMarker(body: ChatBody): string | undefined {
  for (const message of [...body.messages].reverse()) {
    const found = typeof message.content === 'string' ? /fixture:([\w-]+)/.exec(message.content) : null;
    if (found?.[1] !== undefined) return found[1];
  }
  return undefined;
}

/** The running server: its base URL (ends in `/v1`), what it received, and `close`. */
export interface OpenAiServer {
  baseUrl: string;
  requests: ReceivedRequest[];
  close(): Promise<void>;
}

/** Starts the server on an ephemeral port. Without a responder, the marker picks the recording. */
export async function startOpenAiServer(respond: Responder = () => undefined): Promise<OpenAiServer> {
  const requests: ReceivedRequest[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const received: ReceivedRequest = {
        at: Date.now(),
        url: req.url ?? '',
        headers: req.headers,
        body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as ChatBody,
      };
      requests.push(received);
      const marker = fixtureMarker(received.body);
      const recording = respond(received, requests.length - 1) ?? openAiFixture(marker ?? 'text');
      res.writeHead(recording.status, { 'content-type': 'application/json', ...recording.headers });
      res.end(JSON.stringify(recording.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A 200 Chat Completions answer in the recorded shape: text, tool calls (name → arguments object), or both. */
export function completion(answer: { text?: string; calls?: [string, unknown][] }, usage: [number, number] = [100, 20]): Recording {
  const calls = (answer.calls ?? []).map(([name, args], i) => ({
    id: `call_${Math.random().toString(36).slice(2, 10)}${i}`,
    type: 'function',
    function: { name, arguments: JSON.stringify(args) },
  }));
  return {
    status: 200,
    body: {
      id: `chatcmpl-${Math.random().toString(36).slice(2, 12)}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: 'gpt-4.1-mini-2025-04-14',
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: answer.text ?? null, refusal: null, ...(calls.length > 0 ? { tool_calls: calls } : {}) },
          logprobs: null,
          finish_reason: calls.length > 0 ? 'tool_calls' : 'stop',
        },
      ],
      usage: { prompt_tokens: usage[0], completion_tokens: usage[1], total_tokens: usage[0] + usage[1] },
    },
  };
}
