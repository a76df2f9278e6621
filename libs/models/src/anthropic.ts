/**
 * The adapter of the model port for Anthropic's Messages API, on the official `@anthropic-ai/sdk`.
 *
 * Like the others: the SDK's own retries are off (`maxRetries: 0`), so a failed call becomes a
 * {@link ModelError} (retryable or not, with the server's `retry-after`) and `ResilientModel`
 * retries it under the cluster-wide rate limit. The adapter never logs (the SDK's logger is off),
 * and every message it builds is scrubbed of the API key. The SDK's own OpenTelemetry spans are
 * off: Bosun traces its model calls itself (libs/otel), and the SDK's could carry content.
 */
import { errorMessage } from '@bosun/contract';
import type Anthropic from '@anthropic-ai/sdk';
import type { APIError } from '@anthropic-ai/sdk';
import type {
  ContentBlockParam,
  Message as AnthropicMessage,
  MessageCreateParamsNonStreaming,
  MessageParam,
  TextBlockParam,
  Tool,
  ToolResultBlockParam,
} from '@anthropic-ai/sdk/resources/messages';

import { isContextLengthError } from './context-errors.js';
import { knownContextTokens } from './context-windows.js';
import { isA, retryAfterMs } from './openai-errors.js';
import { loadedSdk, sdk } from './sdks.js';
import { ModelError } from './types.js';
import type { GenerateOptions, Message, Model, ModelRequest, ModelResponse, Reasoning, ToolCall, ToolDeclaration, Usage } from './types.js';

/** Options of {@link AnthropicModel}. */
export interface AnthropicModelOptions {
  /** `ANTHROPIC_API_KEY`. */
  apiKey: string;
  /** Model id, e.g. `claude-sonnet-4-5` (the default). */
  model?: string;
  /** Base URL of the API (default `https://api.anthropic.com`; `ANTHROPIC_BASE_URL` has no effect). */
  baseUrl?: string;
  /** Deadline of one request, in milliseconds (default 60000). */
  timeoutMs?: number;
  /** `max_tokens`, which the Messages API requires (default 8192). */
  maxOutputTokens?: number;
  /** Extended thinking's `budget_tokens`; off when absent. Must be below `maxOutputTokens`. */
  thinkingBudgetTokens?: number;
  /** Prompt caching of the stable prefix (tools, system, and the conversation so far), default true. */
  promptCaching?: boolean;
  /** The context window in tokens (default: the known window of `model`). */
  contextTokens?: number;
  /** How many times a `pause_turn` answer is continued in the same call (default 2). */
  maxPauseContinuations?: number;
}

const DEFAULT_MODEL = 'claude-sonnet-4-5';
const DEFAULT_TIMEOUT_MS = 60_000;
const DEFAULT_MAX_TOKENS = 8_192;
const CACHE = { type: 'ephemeral' } as const;

/** A {@link Model} on Anthropic's Messages API. Safe to call concurrently. */
export class AnthropicModel implements Model {
  readonly name: string;
  readonly contextTokens: number;

  /** The SDK's client, made at the first call (the SDK loads then, `sdks.ts`). */
  #client: Promise<Anthropic> | undefined;
  readonly #clientOptions: ConstructorParameters<typeof Anthropic>[0];
  readonly #model: string;
  readonly #apiKey: string;
  readonly #timeoutMs: number;
  readonly #maxTokens: number;
  readonly #thinking: number | undefined;
  readonly #caching: boolean;
  readonly #pauses: number;

  constructor(options: AnthropicModelOptions) {
    if (typeof options.apiKey !== 'string' || options.apiKey.trim() === '') throw new TypeError('AnthropicModel: apiKey is required');
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new TypeError('AnthropicModel: timeoutMs must be a positive number');
    const maxTokens = options.maxOutputTokens ?? DEFAULT_MAX_TOKENS;
    if (!Number.isInteger(maxTokens) || maxTokens <= 0) throw new TypeError('AnthropicModel: maxOutputTokens must be a positive integer');
    const thinking = options.thinkingBudgetTokens;
    if (thinking !== undefined && (!Number.isInteger(thinking) || thinking < 1024 || thinking >= maxTokens)) {
      throw new TypeError(`AnthropicModel: thinkingBudgetTokens must be an integer from 1024 to below maxOutputTokens (${maxTokens})`);
    }
    this.#model = options.model ?? DEFAULT_MODEL;
    this.#apiKey = options.apiKey;
    this.#timeoutMs = timeoutMs;
    this.#maxTokens = maxTokens;
    this.#thinking = thinking;
    this.#caching = options.promptCaching ?? true;
    this.#pauses = options.maxPauseContinuations ?? 2;
    this.name = `anthropic:${this.#model}`;
    this.contextTokens = options.contextTokens ?? knownContextTokens(this.#model);
    this.#clientOptions = {
      apiKey: options.apiKey,
      // Explicit, so that ANTHROPIC_BASE_URL in the environment cannot redirect calls.
      baseURL: options.baseUrl ?? 'https://api.anthropic.com',
      maxRetries: 0,
      timeout: timeoutMs,
      logLevel: 'off',
      openTelemetry: false,
    };
  }

  #connect(): Promise<Anthropic> {
    return (this.#client ??= sdk('anthropic').then((m) => new m.default(this.#clientOptions)));
  }

  async generate(request: ModelRequest, options?: GenerateOptions): Promise<ModelResponse> {
    if (options?.signal?.aborted) throw new ModelError('Anthropic request aborted before it was sent', { retryable: false });
    const params = this.#params(request);
    const usages: Usage[] = [];
    let message: AnthropicMessage;
    // A `pause_turn` (a long server-side turn) is continued by sending the paused content back
    // as the assistant's turn; each continuation is billed, so the usage is the sum.
    for (let pause = 0; ; pause++) {
      message = await this.#send(params, options?.signal);
      usages.push(toUsage(message));
      if (message.stop_reason !== 'pause_turn' || pause >= this.#pauses) break;
      params.messages = [...params.messages, { role: 'assistant', content: message.content as ContentBlockParam[] }];
    }
    return fromMessage(message, sumUsages(usages), (text) => this.#scrub(text), this.#pauses);
  }

  async #send(params: MessageCreateParamsNonStreaming, signal: AbortSignal | undefined): Promise<AnthropicMessage> {
    try {
      const client = await this.#connect();
      return await client.messages.create(params, signal ? { signal } : {});
    } catch (error) {
      throw anthropicError(error, { apiKey: this.#apiKey, timeoutMs: this.#timeoutMs, aborted: signal?.aborted === true });
    }
  }

  #params(request: ModelRequest): MessageCreateParamsNonStreaming {
    const params: MessageCreateParamsNonStreaming = {
      model: this.#model,
      max_tokens: this.#maxTokens,
      messages: toMessages(request.messages, this.#thinking !== undefined),
    };
    if (request.system !== undefined && request.system !== '') {
      const block: TextBlockParam = { type: 'text', text: request.system, ...(this.#caching ? { cache_control: CACHE } : {}) };
      params.system = [block];
    }
    if (request.mode !== 'single' && request.tools.length > 0) {
      const tools = request.tools.map(toTool);
      // Anthropic reads tools, then system, then messages. The breakpoint on the last tool caches
      // the tools alone, so they are read from the cache even when the system differs (a runbook).
      const last = tools[tools.length - 1];
      if (this.#caching && last) tools[tools.length - 1] = { ...last, cache_control: CACHE };
      params.tools = tools;
    }
    // A loop's next request repeats this one and adds to it: a breakpoint at the end of the
    // conversation lets the next turn read all of it from the cache, not only system and tools.
    if (this.#caching && request.mode !== 'single') markConversationEnd(params.messages);
    if (this.#thinking !== undefined) params.thinking = { type: 'enabled', budget_tokens: this.#thinking };
    return params;
  }

  #scrub(text: string): string {
    return text.split(this.#apiKey).join('[redacted]');
  }
}

/**
 * The conversation as Messages API turns: a tool turn is a user turn of `tool_result` blocks (in
 * the order of the calls they answer), and consecutive turns of one role are merged (the API wants
 * them alternating). With thinking on, a model turn's thinking blocks go back first, unchanged
 * with their signatures, as the API requires for a turn that called tools.
 */
function toMessages(messages: readonly Message[], thinking: boolean): MessageParam[] {
  const out: MessageParam[] = [];
  const push = (role: 'user' | 'assistant', blocks: ContentBlockParam[]): void => {
    if (blocks.length === 0) return;
    const last = out[out.length - 1];
    if (last && last.role === role && Array.isArray(last.content)) last.content.push(...blocks);
    else out.push({ role, content: blocks });
  };
  for (const message of messages) {
    switch (message.role) {
      case 'user':
        push('user', [{ type: 'text', text: message.text }]);
        break;
      case 'model': {
        const blocks: ContentBlockParam[] = [];
        if (thinking) for (const r of message.reasoning ?? []) blocks.push(...thinkingBlock(r));
        if (message.text) blocks.push({ type: 'text', text: message.text });
        for (const c of message.calls ?? []) blocks.push({ type: 'tool_use', id: c.id, name: c.name, input: c.args });
        push('assistant', blocks);
        break;
      }
      case 'tool':
        push(
          'user',
          message.responses.map((r): ToolResultBlockParam => ({
            type: 'tool_result',
            tool_use_id: r.id,
            content: typeof r.output === 'string' ? r.output : (JSON.stringify(r.output ?? null) ?? 'null'),
            ...(r.isError === true ? { is_error: true } : {}),
          })),
        );
        break;
    }
  }
  return out;
}

/**
 * Puts the conversation's cache breakpoint on the last block of the last turn (the third of the
 * four the API allows, after the system's and the last tool's). Thinking blocks cannot carry one;
 * a turn ending in one gets none.
 */
function markConversationEnd(messages: MessageParam[]): void {
  const content = messages[messages.length - 1]?.content;
  if (!Array.isArray(content)) return;
  const block = content[content.length - 1];
  if (!block || block.type === 'thinking' || block.type === 'redacted_thinking') return;
  content[content.length - 1] = { ...block, cache_control: CACHE };
}

function thinkingBlock(r: Reasoning): ContentBlockParam[] {
  if (r.kind === 'redacted_thinking') return [{ type: 'redacted_thinking', data: r.text }];
  if (r.kind === 'thinking' && r.signature) return [{ type: 'thinking', thinking: r.text, signature: r.signature }];
  return [];
}

function toTool(tool: ToolDeclaration): Tool {
  return { name: tool.name, description: tool.description, input_schema: tool.parameters as Tool['input_schema'] };
}

/**
 * The answer as a {@link ModelResponse}: text blocks joined, each `tool_use` a call (in order),
 * thinking blocks kept apart as `reasoning`. `max_tokens`, `refusal`, a `pause_turn` still paused
 * and `model_context_window_exceeded` are honest errors, never an answer.
 */
function fromMessage(message: AnthropicMessage, usage: Usage, scrub: (text: string) => string, pauses: number): ModelResponse {
  const stop = message.stop_reason as string | null;
  if (stop === 'max_tokens') {
    throw new ModelError('Anthropic cut the answer off at the output token limit (stop_reason max_tokens)', {
      retryable: false,
      reason: 'output_limit',
    });
  }
  if (stop === 'refusal') {
    const details = (message as { stop_details?: { explanation?: unknown } }).stop_details;
    const why = typeof details?.explanation === 'string' ? `: ${details.explanation}` : '';
    throw new ModelError(scrub(`the model refused (stop_reason refusal)${why}`), { retryable: false, reason: 'refused' });
  }
  if (stop === 'model_context_window_exceeded') {
    throw new ModelError('Anthropic stopped the answer: the context window is full (stop_reason model_context_window_exceeded)', {
      retryable: false,
      reason: 'context_length',
    });
  }
  if (stop === 'pause_turn') {
    throw new ModelError(`Anthropic paused the turn again after ${pauses} continuations (stop_reason pause_turn)`, {
      retryable: false,
      reason: 'malformed',
    });
  }
  const texts: string[] = [];
  const calls: ToolCall[] = [];
  const reasoning: Reasoning[] = [];
  for (const block of message.content) {
    if (block.type === 'text') texts.push(block.text);
    else if (block.type === 'tool_use') {
      const input = block.input;
      calls.push({ id: block.id, name: block.name, args: input && typeof input === 'object' ? (input as Record<string, unknown>) : {} });
    } else if (block.type === 'thinking') reasoning.push({ kind: 'thinking', text: block.thinking, signature: block.signature });
    else if (block.type === 'redacted_thinking') reasoning.push({ kind: 'redacted_thinking', text: block.data, redacted: true });
  }
  const text = texts.join('');
  if (text === '' && calls.length === 0) {
    throw new ModelError(`Anthropic returned no content (stop_reason ${stop ?? 'none'})`, { retryable: false, reason: 'malformed' });
  }
  const result: ModelResponse = { calls, usage };
  if (text !== '') result.text = text;
  if (reasoning.length > 0) result.reasoning = reasoning;
  if (message.model) result.model = message.model;
  return result;
}

/**
 * Usage as Anthropic bills it: `input_tokens` excludes the cache's reads and writes, which are
 * priced apart, so the input is their sum and the cache parts are reported apart. Thinking is in
 * `output_tokens` (and in `output_tokens_details.reasoning_tokens` where the API reports it).
 */
function toUsage(message: AnthropicMessage): Usage {
  const u = message.usage as AnthropicMessage['usage'] & { output_tokens_details?: { reasoning_tokens?: unknown } | null };
  const read = u.cache_read_input_tokens ?? 0;
  const written = u.cache_creation_input_tokens ?? 0;
  const inputTokens = u.input_tokens + read + written;
  const usage: Usage = { inputTokens, outputTokens: u.output_tokens, totalTokens: inputTokens + u.output_tokens };
  if (read > 0) usage.cachedInputTokens = read;
  if (written > 0) usage.cacheWriteTokens = written;
  const reasoning = u.output_tokens_details?.reasoning_tokens;
  if (typeof reasoning === 'number' && reasoning > 0) usage.reasoningTokens = reasoning;
  return usage;
}

function sumUsages(usages: readonly Usage[]): Usage {
  const total: Usage = {};
  for (const u of usages) {
    for (const k of ['inputTokens', 'outputTokens', 'totalTokens', 'reasoningTokens', 'cachedInputTokens', 'cacheWriteTokens'] as const) {
      const v = u[k];
      if (v !== undefined) total[k] = (total[k] ?? 0) + v;
    }
  }
  return total;
}

/** What the adapter knows about a call that failed. */
interface FailedCall {
  apiKey: string;
  timeoutMs: number;
  aborted: boolean;
}

/**
 * The {@link ModelError} for a failed `messages.create`; never carries the API key. 408, 409, 429
 * and 5xx (529 `overloaded_error` included) are retryable, with the server's `retry-after`; a 400
 * `invalid_request_error` saying the prompt is too long (or a 413) has reason `context_length`.
 * Exported for the fake model, which answers an over-limit request exactly as Anthropic does.
 */
export function anthropicError(error: unknown, call: FailedCall): ModelError {
  const scrub = (text: string): string => text.split(call.apiKey).join('[redacted]');
  const cause = error instanceof Error && error.message.includes(call.apiKey) ? undefined : error;
  // Without the SDK loaded, nothing it throws can be here (the SDK loads at a model's first call).
  const { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } = loadedSdk('anthropic') ?? {};
  if (call.aborted || isA(error, APIUserAbortError)) return new ModelError('Anthropic request aborted', { retryable: false, cause });
  if (isA(error, APIConnectionTimeoutError)) {
    return new ModelError(`Anthropic request timed out after ${call.timeoutMs} ms`, { retryable: true, cause });
  }
  if (isA(error, APIConnectionError)) {
    return new ModelError(scrub(`Anthropic request failed: ${error.message}`), { retryable: true, cause });
  }
  if (isA(error, APIError) && typeof error.status === 'number') {
    const api = error as APIError<number, Headers | undefined>;
    const status = api.status;
    const retryable = status === 408 || status === 409 || status === 429 || status >= 500;
    const wait = retryAfterMs(api.headers);
    const type = api.type ?? undefined;
    const text = api.apiMessage ?? api.message;
    const tooLong = status === 413 || (status === 400 && isContextLengthError(api.errorCode ?? undefined, text));
    return new ModelError(scrub(`Anthropic API error: HTTP ${status} ${type ? `${type}: ` : ''}${text}`), {
      retryable,
      status,
      ...(wait === undefined ? {} : { retryAfterMs: wait }),
      ...(tooLong ? { reason: 'context_length' as const } : {}),
      cause,
    });
  }
  const message = errorMessage(error);
  return new ModelError(scrub(`Anthropic request failed: ${message}`), { retryable: false, cause });
}
