/**
 * The adapter of the model port for OpenAI-compatible Chat Completions endpoints (OpenAI, Azure
 * OpenAI's v1 API, Ollama, vLLM, LM Studio), on the official `openai` package.
 *
 * The SDK's own retries are off (`maxRetries: 0`): a failed call becomes a {@link ModelError}
 * (retryable or not, with the server's `Retry-After`) and the caller decides what to do with it.
 * The adapter never logs, and every message it builds is scrubbed of the API key.
 */
import { errorMessage } from '@bosun/contract';
import type OpenAI from 'openai';
import type {
  ChatCompletion,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';

import { knownContextTokens } from './context-windows.js';
import { openAiError } from './openai-errors.js';
import { sdk } from './sdks.js';
import { ModelError } from './types.js';
import type { GenerateOptions, Message, Model, ModelRequest, ModelResponse, Reasoning, ToolCall, ToolDeclaration, Usage } from './types.js';

/** Options of {@link OpenAiModel}. */
export interface OpenAiModelOptions {
  /** The API key, sent as `Authorization: Bearer …`. Local servers that need none accept any value. */
  apiKey: string;
  /** Model (or Azure deployment) name, e.g. `gpt-4.1-mini`. */
  model: string;
  /** Base URL of the API (default: the SDK's, `https://api.openai.com/v1`). */
  baseUrl?: string;
  /** Deadline of one request, in milliseconds (default 60000). */
  timeoutMs?: number;
  /** Sampling temperature; the model's default when omitted. */
  temperature?: number;
  /** The model's context window in tokens (default: the known window of `model`, see `knownContextTokens`). */
  contextTokens?: number;
  /**
   * Ask for JSON that matches the request's `responseSchema` (`response_format: json_schema`).
   * Default true; turn it off for an endpoint that rejects `response_format`.
   */
  structuredOutput?: boolean;
}

const DEFAULT_TIMEOUT_MS = 60_000;

/** A {@link Model} on an OpenAI-compatible endpoint. Safe to call concurrently. */
export class OpenAiModel implements Model {
  readonly name: string;
  readonly contextTokens: number;

  /** The SDK's client, made at the first call (the SDK loads then, `sdks.ts`). */
  #client: Promise<OpenAI> | undefined;
  readonly #clientOptions: ConstructorParameters<typeof OpenAI>[0];
  readonly #model: string;
  readonly #apiKey: string;
  readonly #timeoutMs: number;
  readonly #temperature: number | undefined;
  readonly #structured: boolean;

  constructor(options: OpenAiModelOptions) {
    if (typeof options.apiKey !== 'string' || options.apiKey.trim() === '') throw new TypeError('OpenAiModel: apiKey is required');
    if (typeof options.model !== 'string' || options.model === '') throw new TypeError('OpenAiModel: model is required');
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new TypeError('OpenAiModel: timeoutMs must be a positive number');
    this.#model = options.model;
    this.#apiKey = options.apiKey;
    this.#timeoutMs = timeoutMs;
    this.#temperature = options.temperature;
    this.#structured = options.structuredOutput ?? true;
    this.name = `openai:${this.#model}`;
    this.contextTokens = options.contextTokens ?? knownContextTokens(this.#model);
    this.#clientOptions = {
      apiKey: options.apiKey,
      maxRetries: 0,
      timeout: timeoutMs,
      // Explicit, so that OPENAI_BASE_URL / OPENAI_ORG_ID in the environment cannot redirect calls.
      baseURL: options.baseUrl ?? 'https://api.openai.com/v1',
      organization: null,
      project: null,
    };
  }

  #connect(): Promise<OpenAI> {
    return (this.#client ??= sdk('openai').then((m) => new m.default(this.#clientOptions)));
  }

  async generate(request: ModelRequest, options?: GenerateOptions): Promise<ModelResponse> {
    if (options?.signal?.aborted) throw new ModelError('OpenAI request aborted before it was sent', { retryable: false });
    let completion: ChatCompletion;
    try {
      const client = await this.#connect();
      completion = await client.chat.completions.create(this.#params(request), {
        ...(options?.signal ? { signal: options.signal } : {}),
      });
    } catch (error) {
      throw openAiError(error, { apiKey: this.#apiKey, timeoutMs: this.#timeoutMs, aborted: options?.signal?.aborted === true });
    }
    return fromCompletion(completion, (text) => this.#scrub(text));
  }

  #params(request: ModelRequest): ChatCompletionCreateParamsNonStreaming {
    const params: ChatCompletionCreateParamsNonStreaming = { model: this.#model, messages: toMessages(request) };
    if (this.#temperature !== undefined) params.temperature = this.#temperature;
    if (request.mode !== 'single' && request.tools.length > 0) params.tools = request.tools.map(toTool);
    if (this.#structured && request.responseSchema !== undefined) {
      params.response_format = {
        type: 'json_schema',
        json_schema: { name: request.responseSchema.name, schema: request.responseSchema.schema, strict: false },
      };
    }
    return params;
  }

  #scrub(text: string): string {
    return text.split(this.#apiKey).join('[redacted]');
  }
}

/** Maps the conversation to Chat Completions messages (a tool turn becomes one `tool` message per response). */
function toMessages(request: ModelRequest): ChatCompletionMessageParam[] {
  const out: ChatCompletionMessageParam[] = [];
  if (request.system !== undefined && request.system !== '') out.push({ role: 'system', content: request.system });
  for (const message of request.messages) out.push(...toMessage(message));
  return out;
}

function toMessage(message: Message): ChatCompletionMessageParam[] {
  switch (message.role) {
    case 'user':
      return [{ role: 'user', content: message.text }];
    case 'model': {
      const calls = message.calls ?? [];
      if (calls.length === 0 && !message.text) return [];
      const assistant: Record<string, unknown> = { role: 'assistant', content: message.text ?? null };
      if (calls.length > 0) {
        // Arguments that did not parse are sent back as `{}`: strict servers (DashScope) refuse a
        // turn whose `function.arguments` is not JSON; the raw text went into the tool result.
        assistant.tool_calls = calls.map((c) => ({
          id: c.id,
          type: 'function' as const,
          function: { name: c.name, arguments: JSON.stringify(c.args) },
          // Gemini 3 through its OpenAI-compatible endpoint rejects a call that lost its signature.
          ...(c.signature ? { extra_content: { google: { thought_signature: c.signature } } } : {}),
        }));
        // DeepSeek's thinking mode (and Kimi's) wants the reasoning of a tool-call turn back in
        // the same tool loop; a turn without calls keeps it to itself, as they document.
        const reasoning = message.reasoning?.find((r) => r.kind === 'reasoning_content');
        if (reasoning) assistant.reasoning_content = reasoning.text;
      }
      return [assistant as unknown as ChatCompletionMessageParam];
    }
    case 'tool':
      return message.responses.map((r) => ({
        role: 'tool' as const,
        tool_call_id: r.id,
        content: JSON.stringify(r.isError === true ? { error: r.output ?? null } : { output: r.output ?? null }),
      }));
  }
}

function toTool(tool: ToolDeclaration): ChatCompletionTool {
  return { type: 'function', function: { name: tool.name, description: tool.description, parameters: tool.parameters } };
}

/** The parts of a Chat Completions message that servers send beside the documented ones. */
interface LooseMessage {
  content?: unknown;
  refusal?: unknown;
  tool_calls?: unknown;
  /** DeepSeek, vLLM's reasoning parsers, Qwen on DashScope. */
  reasoning_content?: unknown;
  /** OpenRouter, Ollama's thinking models. */
  reasoning?: unknown;
}

/**
 * The first choice as a {@link ModelResponse}. A refusal, a cut-off (`length`) or filtered
 * (`content_filter`) answer and an empty one are errors that say so; tool-call arguments that
 * are not a JSON object are returned with `argsError` so the loop can send a correction.
 * Reasoning (`reasoning_content`, `reasoning`, a `<think>` block at the start of `content`) is
 * never part of the answer.
 */
function fromCompletion(completion: ChatCompletion, scrub: (text: string) => string): ModelResponse {
  const choice = completion.choices[0];
  if (choice === undefined) throw new ModelError('OpenAI returned no choices', { retryable: false, reason: 'malformed' });
  const reason = choice.finish_reason as string | null | undefined;
  const message = choice.message as unknown as LooseMessage;
  if (typeof message.refusal === 'string' && message.refusal !== '') {
    throw new ModelError(scrub(`the model refused: ${message.refusal}`), { retryable: false, reason: 'refused' });
  }
  if (reason === 'content_filter') {
    throw new ModelError('OpenAI stopped the answer: finish_reason content_filter (the provider filtered the content)', {
      retryable: false,
      reason: 'refused',
    });
  }
  if (reason === 'length') {
    throw new ModelError('OpenAI cut the answer off at the output token limit (finish_reason length)', {
      retryable: false,
      reason: 'output_limit',
    });
  }
  const rawCalls = Array.isArray(message.tool_calls) ? (message.tool_calls as unknown[]) : [];
  const calls = rawCalls.map(toCall);
  const reasoning: Reasoning[] = [];
  for (const kind of ['reasoning_content', 'reasoning'] as const) {
    const value = message[kind];
    if (typeof value === 'string' && value !== '') reasoning.push({ kind, text: value });
  }
  const split = splitThink(typeof message.content === 'string' ? message.content : '');
  if (split.thinking !== undefined) reasoning.push({ kind: 'think', text: split.thinking });
  const text = split.answer;
  if (text === '' && calls.length === 0) {
    throw new ModelError(`OpenAI returned no content (finish_reason ${reason ?? 'none'})`, { retryable: false, reason: 'malformed' });
  }
  const result: ModelResponse = { calls };
  if (text !== '') result.text = text;
  if (reasoning.length > 0) result.reasoning = reasoning;
  const usage = toUsage(completion);
  if (usage !== undefined) result.usage = usage;
  if (completion.model) result.model = completion.model;
  return result;
}

/**
 * A `<think>…</think>` block at the start of `content` (Qwen3, DeepSeek-R1 and QwQ served without
 * a reasoning parser) is reasoning, not answer. A closing tag with no opening one is the same
 * block whose opening tag the chat template already wrote.
 */
function splitThink(content: string): { answer: string; thinking?: string } {
  const m = /^\s*(?:<think>)?([\s\S]*?)<\/think>\s*/.exec(content);
  if (m === null || (!/^\s*<think>/.test(content) && content.indexOf('<think>') >= 0)) return { answer: content };
  return { answer: content.slice(m[0].length), thinking: (m[1] ?? '').trim() };
}

/** One `tool_calls` entry. A missing `type` (Mistral) with a `function` member is a function call. */
function toCall(raw: unknown): ToolCall {
  const call = (raw ?? {}) as { id?: unknown; type?: unknown; function?: { name?: unknown; arguments?: unknown }; extra_content?: unknown };
  if (call.type !== undefined && call.type !== 'function') {
    throw new ModelError(`OpenAI returned a tool call of type ${JSON.stringify(call.type)}`, { retryable: false, reason: 'malformed' });
  }
  const fn = call.function;
  if (fn === undefined || typeof fn !== 'object') {
    throw new ModelError('OpenAI returned a tool call without a function', { retryable: false, reason: 'malformed' });
  }
  const name = fn.name;
  if (typeof name !== 'string' || name === '') {
    throw new ModelError('OpenAI returned a tool call without a name', { retryable: false, reason: 'malformed' });
  }
  // Gemini's OpenAI-compatible endpoint sends `id: ""` on every call: kept as it came.
  const id = typeof call.id === 'string' ? call.id : '';
  const signature = thoughtSignature(call.extra_content);
  const base = { id, name, ...(signature ? { signature } : {}) };
  const parsed = parseArgs(fn.arguments);
  if (typeof parsed === 'string') {
    const rawArgs = typeof fn.arguments === 'string' ? fn.arguments : (JSON.stringify(fn.arguments) ?? String(fn.arguments));
    return { ...base, args: {}, rawArgs, argsError: parsed };
  }
  return { ...base, args: parsed };
}

/** `extra_content.google.thought_signature` (Gemini 3 through the OpenAI-compatible endpoint). */
function thoughtSignature(extra: unknown): string | undefined {
  const google = (extra as { google?: { thought_signature?: unknown } } | undefined)?.google;
  const sig = google?.thought_signature;
  return typeof sig === 'string' && sig !== '' ? sig : undefined;
}

/**
 * The arguments as an object, or what is wrong with them. An empty string (or none) means no
 * arguments; an object is the parsed arguments already (llama.cpp's `--tool-args-object`).
 */
function parseArgs(raw: unknown): Record<string, unknown> | string {
  if (raw === undefined || raw === null) return {};
  if (typeof raw === 'object') return Array.isArray(raw) ? 'the arguments are an array, not an object' : (raw as Record<string, unknown>);
  if (typeof raw !== 'string') return `the arguments are a ${typeof raw}, not an object`;
  if (raw.trim() === '') return {};
  try {
    const value: unknown = JSON.parse(raw);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
    return 'the arguments are JSON but not an object';
  } catch (error) {
    return `the arguments are not valid JSON (${errorMessage(error)})`;
  }
}

/**
 * Usage as billed: `completion_tokens` already includes the reasoning tokens and `prompt_tokens`
 * the cached ones, so those are reported apart, not added. DeepSeek's older responses carry
 * `prompt_cache_hit_tokens` instead of `prompt_tokens_details.cached_tokens`.
 */
function toUsage(completion: ChatCompletion): Usage | undefined {
  const u = completion.usage;
  if (!u) return undefined;
  const usage: Usage = { inputTokens: u.prompt_tokens, outputTokens: u.completion_tokens, totalTokens: u.total_tokens };
  const reasoning = u.completion_tokens_details?.reasoning_tokens;
  if (typeof reasoning === 'number' && reasoning > 0) usage.reasoningTokens = reasoning;
  const deepseek = u as { prompt_cache_hit_tokens?: unknown };
  const cached = u.prompt_tokens_details?.cached_tokens ?? deepseek.prompt_cache_hit_tokens;
  if (typeof cached === 'number' && cached > 0) usage.cachedInputTokens = cached;
  return usage;
}
