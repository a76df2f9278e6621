/**
 * A local OpenAI-compatible Chat Completions server for the token scenario (12). It answers in
 * the shape of the recorded responses in test/fixtures/openai (`tool-call.json`,
 * `cached-tokens.json`), plays the fake model's plan of the standard incident, and reports usage
 * the way OpenAI bills it, counted on what it received:
 *
 * - `prompt_tokens`: the o200k_base tokens (GPT-4o / GPT-4.1's encoding, `gpt-tokenizer`) of the
 *   prompt as {@link promptText} serializes it: the tool definitions first, then every message.
 *   OpenAI's own rendering adds a few tokens per message and renders tools in its own syntax, so
 *   this is close to, not equal to, what OpenAI would bill;
 * - `prompt_tokens_details.cached_tokens`: OpenAI's documented automatic caching rule applied to
 *   those tokens: the longest prefix shared with an earlier request, counted only from 1,024
 *   tokens on and in steps of 128;
 * - `completion_tokens`: the tokens of the answer's text or calls.
 *
 * It answers Anthropic's Messages API (`/v1/messages`, the shape of test/fixtures/anthropic) the
 * same way, with Anthropic's explicit cache: see `handleAnthropic`.
 *
 * It keeps every request with its counts, so the scenario can read what was sent per agent and
 * turn. The agent is the model name (`bench-<agent>`), set per agent in the scenario's config.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { encode } from 'gpt-tokenizer/encoding/o200k_base';
import { extractIncident } from '@bosun/models';

/** The parts of a Chat Completions request the scenario reads. */
export interface ChatBody {
  model: string;
  messages: { role: string; content?: unknown; tool_calls?: unknown[]; tool_call_id?: string }[];
  tools?: unknown[];
  response_format?: unknown;
}

/** One request as received, with what the server counted and answered. */
export interface CapturedRequest {
  /** The incident the bench had under way when it came (`TokenServer.incident`). */
  incident: string;
  /** From the model name `bench-<agent>`. */
  agent: string;
  /** The body's bytes as received. */
  bodyBytes: number;
  /** The bytes of `tools` (the tool catalog as sent), JSON. */
  toolBytes: number;
  body: ChatBody;
  /** {@link promptText} of the body. */
  prompt: string;
  promptTokens: number;
  cachedTokens: number;
  /** Anthropic: tokens written to the cache (billed at 1.25×); 0 for OpenAI, which writes its cache for free. */
  cacheWriteTokens?: number;
  completionTokens: number;
}

/** OpenAI's automatic prompt caching: nothing under 1,024 tokens, then in steps of 128. */
export function cachedByPrefixRule(sharedTokens: number): number {
  if (sharedTokens < 1024) return 0;
  return 1024 + Math.floor((sharedTokens - 1024) / 128) * 128;
}

/**
 * The prompt in the order a provider reads it, one line per part: the tool definitions first
 * (OpenAI and Anthropic render them ahead of the conversation), then each message as sent. A
 * provider's prompt cache matches a prefix of this, so what changes between two requests shows
 * as the first byte where their texts differ.
 */
export function promptText(body: ChatBody): string {
  return [JSON.stringify(body.tools ?? []), ...body.messages.map((m) => JSON.stringify(m))].join('\n');
}

/** How many leading elements two arrays share. */
export function sharedPrefix<T>(a: ArrayLike<T>, b: ArrayLike<T>): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/** The plan of one agent in the standard incident: `payload.fake.calls.<agent>` of the rendered incident. */
function planOf(firstUserText: string, agent: string): { tool: string; args: Record<string, unknown> }[] {
  const incident = extractIncident(firstUserText);
  const calls = (incident?.payload as { fake?: { calls?: Record<string, unknown> } } | undefined)?.fake?.calls?.[agent];
  return Array.isArray(calls) ? (calls as { tool: string; args: Record<string, unknown> }[]) : [];
}

/** What the server answers: text, or calls. */
interface Answer {
  content: string | null;
  calls: { name: string; args: unknown }[];
}

/** The answer to a request: route mode's JSON, the plan's next call, or `finish_task` with a report. */
function answer(request: { single: boolean; firstUserText: string; toolResults: number }, agent: string): Answer {
  if (request.single) return { content: '{"specialists":["kubernetes"]}', calls: [] };
  const next = planOf(request.firstUserText, agent)[request.toolResults];
  if (next) return { content: null, calls: [{ name: next.tool, args: next.args }] };
  return {
    content: null,
    calls: [
      {
        name: 'finish_task',
        args: {
          summary: 'checkout pods crash-loop after the last deployment; memory limit reached.',
          findings: [{ title: 'OOMKilled', detail: 'checkout-7d9 restarted 14 times, last termination OOMKilled.' }],
          evidence: ['get_pods: 2 of 3 pods in CrashLoopBackOff', 'get_deployments: v42 rolled out 20 min ago'],
        },
      },
    ],
  };
}

/** The parts of a Messages API request the scenario reads. */
export interface AnthropicBody {
  model: string;
  system?: { type: string; text: string; cache_control?: unknown }[];
  messages: { role: string; content: ({ type: string; text?: string; cache_control?: unknown } & Record<string, unknown>)[] | string }[];
  tools?: ({ name: string; cache_control?: unknown } & Record<string, unknown>)[];
}

/** One part of an Anthropic prompt in the order Anthropic reads it (tools, system, messages' blocks), and whether it carries a breakpoint. */
interface PromptPart {
  text: string;
  breakpoint: boolean;
}

/** Anthropic's prompt as parts, breakpoints marked and left out of the text (they mark where a cache entry ends, not what it holds). */
export function anthropicParts(body: AnthropicBody): PromptPart[] {
  const part = (x: { cache_control?: unknown } & Record<string, unknown>): PromptPart => {
    const { cache_control, ...rest } = x;
    return { text: JSON.stringify(rest), breakpoint: cache_control !== undefined };
  };
  const parts = [...(body.tools ?? []).map(part), ...(body.system ?? []).map((b) => part(b))];
  for (const m of body.messages) {
    const blocks = typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content;
    blocks.forEach((b, i) => parts.push(part({ ...(i === 0 ? { role: m.role } : {}), ...b })));
  }
  return parts;
}

/** Anthropic's minimum cacheable prompt (Claude Sonnet and Opus): shorter prefixes are not cached. */
const ANTHROPIC_MIN_CACHE = 1024;

/** The server. `incident` labels the requests that come next. */
export class TokenServer {
  readonly requests: CapturedRequest[] = [];
  incident = '';
  private readonly seen: number[][] = [];
  /** Anthropic's cache: the text of each prefix written at a breakpoint. */
  private readonly written = new Set<string>();

  private readonly server: Server;
  /** The OpenAI-compatible base URL (`…/v1`). */
  baseUrl = '';
  /** The Anthropic base URL (the adapter posts to `<origin>/v1/messages`). */
  origin = '';

  private constructor() {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        try {
          const raw = Buffer.concat(chunks);
          const reply = req.url?.endsWith('/v1/messages') ? this.handleAnthropic(raw) : this.handle(raw);
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify(reply));
        } catch (err) {
          // A request the server cannot read is the bench's bug: answer 400 so the call fails loudly.
          res.writeHead(400, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { message: (err as Error).message, type: 'invalid_request_error' } }));
        }
      });
    });
  }

  /** Starts a server on an ephemeral port of 127.0.0.1. */
  static async start(): Promise<TokenServer> {
    const self = new TokenServer();
    await new Promise<void>((resolve) => self.server.listen(0, '127.0.0.1', resolve));
    self.origin = `http://127.0.0.1:${(self.server.address() as AddressInfo).port}`;
    self.baseUrl = `${self.origin}/v1`;
    return self;
  }

  private handle(raw: Buffer): unknown {
    const body = JSON.parse(raw.toString('utf8')) as ChatBody;
    const agent = body.model.replace(/^bench-/, '');
    const prompt = promptText(body);
    const tokens = encode(prompt);
    let shared = 0;
    for (const earlier of this.seen) shared = Math.max(shared, sharedPrefix(earlier, tokens));
    this.seen.push(tokens);
    const first = body.messages.find((m) => m.role === 'user');
    const { content, calls } = answer(
      {
        single: body.response_format !== undefined || !body.tools?.length,
        firstUserText: typeof first?.content === 'string' ? first.content : '',
        toolResults: body.messages.filter((m) => m.role === 'tool').length,
      },
      agent,
    );
    const toolCalls = calls.map((c, i) => ({
      id: `call_${this.requests.length}_${i}`,
      type: 'function',
      function: { name: c.name, arguments: JSON.stringify(c.args) },
    }));
    const completionTokens = encode(content ?? toolCalls.map((c) => c.function.name + c.function.arguments).join('')).length;
    const cachedTokens = cachedByPrefixRule(shared);
    this.requests.push({
      incident: this.incident,
      agent,
      bodyBytes: raw.length,
      toolBytes: Buffer.byteLength(JSON.stringify(body.tools ?? [])),
      body,
      prompt,
      promptTokens: tokens.length,
      cachedTokens,
      completionTokens,
    });
    return {
      id: `chatcmpl-bench${this.requests.length}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: body.model,
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content,
            refusal: null,
            annotations: [],
            ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
          },
          logprobs: null,
          finish_reason: toolCalls.length > 0 ? 'tool_calls' : 'stop',
        },
      ],
      usage: {
        prompt_tokens: tokens.length,
        completion_tokens: completionTokens,
        total_tokens: tokens.length + completionTokens,
        prompt_tokens_details: { cached_tokens: cachedTokens, audio_tokens: 0 },
        completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
      },
      service_tier: 'default',
      system_fingerprint: 'fp_bench',
    };
  }

  /**
   * A Messages API request: usage as Anthropic bills it, on o200k counts (Claude's tokenizer is
   * not public: a proxy). Cache reads: the longest prefix ending at one of this request's
   * breakpoints, or up to 20 blocks before one, that an earlier request wrote; cache writes: from
   * there to the last breakpoint; prefixes under 1,024 tokens are neither.
   */
  private handleAnthropic(raw: Buffer): unknown {
    const body = JSON.parse(raw.toString('utf8')) as AnthropicBody;
    const agent = body.model.replace(/^bench-/, '');
    const parts = anthropicParts(body);
    const counts = parts.map((p) => encode(p.text).length);
    const upTo = (i: number) => counts.slice(0, i + 1).reduce((a, n) => a + n, 0);
    const key = (i: number) =>
      parts
        .slice(0, i + 1)
        .map((p) => p.text)
        .join('\n');
    const marks = parts.flatMap((p, i) => (p.breakpoint ? [i] : []));
    let readAt = -1;
    for (const b of [...marks].reverse()) {
      for (let k = b; k >= Math.max(0, b - 20) && readAt < 0; k--) if (this.written.has(key(k))) readAt = k;
      if (readAt >= 0) break;
    }
    const read = readAt >= 0 ? upTo(readAt) : 0;
    let write = 0;
    for (const b of marks) {
      if (upTo(b) < ANTHROPIC_MIN_CACHE) continue;
      this.written.add(key(b));
      write = Math.max(write, upTo(b) - read);
    }
    const total = upTo(parts.length - 1);
    const first = body.messages.find((m) => m.role === 'user');
    const firstText = typeof first?.content === 'string' ? first.content : (first?.content.find((b) => b.type === 'text')?.text ?? '');
    const toolResults = body.messages
      .flatMap((m) => (typeof m.content === 'string' ? [] : m.content))
      .filter((b) => b.type === 'tool_result').length;
    const { content, calls } = answer({ single: !body.tools?.length, firstUserText: firstText, toolResults }, agent);
    const blocks = [
      ...(content !== null ? [{ type: 'text', text: content }] : []),
      ...calls.map((c, i) => ({ type: 'tool_use', id: `toolu_bench${this.requests.length}_${i}`, name: c.name, input: c.args })),
    ];
    const completionTokens = encode(JSON.stringify(blocks)).length;
    const prompt = parts.map((p) => p.text).join('\n');
    this.requests.push({
      incident: this.incident,
      agent,
      bodyBytes: raw.length,
      toolBytes: Buffer.byteLength(JSON.stringify(body.tools ?? [])),
      body: body,
      prompt,
      promptTokens: total,
      cachedTokens: read,
      cacheWriteTokens: write,
      completionTokens,
    });
    return {
      id: `msg_bench${this.requests.length}`,
      type: 'message',
      role: 'assistant',
      model: body.model,
      content: blocks,
      stop_reason: calls.length > 0 ? 'tool_use' : 'end_turn',
      stop_sequence: null,
      usage: {
        input_tokens: total - read - write,
        cache_creation_input_tokens: write,
        cache_read_input_tokens: read,
        output_tokens: completionTokens,
        service_tier: 'standard',
      },
    };
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.server.closeAllConnections();
      this.server.close(() => resolve());
    });
  }
}
