/**
 * A local stand-in for Anthropic's Messages API. It answers `POST <base>/v1/messages` with
 * recorded responses from `test/fixtures/anthropic/` (each file: `{ status, headers?, body }`),
 * chosen by a function of the request (else by the last `fixture:<name>` marker in the request's
 * text), and records every request so tests can check what was sent.
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ROOT } from './paths.js';
import type { Recording } from './openai-server.js';

export type { Recording } from './openai-server.js';

/** One content block of a Messages API request. */
export interface AnthropicBlock {
  type: string;
  text?: string;
  id?: string;
  name?: string;
  input?: unknown;
  tool_use_id?: string;
  content?: unknown;
  is_error?: boolean;
  thinking?: string;
  signature?: string;
  cache_control?: unknown;
}

/** The parts of a Messages API request the tests look at. */
export interface AnthropicBody {
  model: string;
  max_tokens: number;
  system?: AnthropicBlock[] | string;
  messages: { role: 'user' | 'assistant'; content: AnthropicBlock[] | string }[];
  tools?: { name: string; input_schema?: unknown; cache_control?: unknown }[];
  thinking?: unknown;
  [key: string]: unknown;
}

/** One request the server received. */
export interface AnthropicRequest {
  at: number;
  url: string;
  headers: IncomingHttpHeaders;
  body: AnthropicBody;
}

/** Chooses the answer: a recording, or `undefined` for the marker's (default `text`). */
export type AnthropicResponder = (request: AnthropicRequest, index: number) => Recording | undefined;

/** Reads `test/fixtures/anthropic/<name>.json`. */
export function anthropicFixture(name: string): Recording {
  return JSON.parse(readFileSync(`${ROOT}/test/fixtures/anthropic/${name}.json`, 'utf8')) as Recording;
}

/** The text of every block of a message (tool results' content included). */
export function textOf(content: AnthropicBlock[] | string): string {
  if (typeof content === 'string') return content;
  return content.map((b) => (typeof b.text === 'string' ? b.text : typeof b.content === 'string' ? b.content : '')).join('\n');
}

/** The last `fixture:<name>` marker in the request's messages. */
export function anthropicMarker(body: AnthropicBody): string | undefined {
  for (const message of [...body.messages].reverse()) {
    const found = /fixture:([\w-]+)/.exec(textOf(message.content));
    if (found?.[1] !== undefined) return found[1];
  }
  return undefined;
}

/** The running server: its base URL (without `/v1`), what it received, and `close`. */
export interface AnthropicServer {
  baseUrl: string;
  requests: AnthropicRequest[];
  close(): Promise<void>;
}

/** Starts the server on an ephemeral port. */
export async function startAnthropicServer(respond: AnthropicResponder = () => undefined): Promise<AnthropicServer> {
  const requests: AnthropicRequest[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (req.method !== 'POST' || !(req.url ?? '').startsWith('/v1/messages')) {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ type: 'error', error: { type: 'not_found_error', message: `no route ${req.url}` } }));
        return;
      }
      const received: AnthropicRequest = {
        at: Date.now(),
        url: req.url ?? '',
        headers: req.headers,
        body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as AnthropicBody,
      };
      requests.push(received);
      const recording = respond(received, requests.length - 1) ?? anthropicFixture(anthropicMarker(received.body) ?? 'text');
      res.writeHead(recording.status, { 'content-type': 'application/json', ...recording.headers });
      res.end(JSON.stringify(recording.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A 200 Messages answer in the recorded shape: text, tool uses (name → input), or both. */
export function message(
  answer: { text?: string; calls?: [string, unknown][] },
  usage: [number, number, number?] = [100, 20, 0],
): Recording {
  const content: Record<string, unknown>[] = [];
  if (answer.text) content.push({ type: 'text', text: answer.text });
  (answer.calls ?? []).forEach(([name, input], i) =>
    content.push({ type: 'tool_use', id: `toolu_${Math.random().toString(36).slice(2, 12)}${i}`, name, input }),
  );
  return {
    status: 200,
    body: {
      id: `msg_${Math.random().toString(36).slice(2, 14)}`,
      type: 'message',
      role: 'assistant',
      model: 'claude-sonnet-4-5-20250929',
      content,
      stop_reason: (answer.calls ?? []).length > 0 ? 'tool_use' : 'end_turn',
      stop_sequence: null,
      usage: {
        input_tokens: usage[0],
        output_tokens: usage[1],
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: usage[2] ?? 0,
        cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 },
        service_tier: 'standard',
        inference_geo: 'not_available',
      },
    },
  };
}
