/**
 * The adapter of the model port for OpenAI-compatible Chat Completions endpoints (OpenAI, Azure
 * OpenAI's v1 API, Ollama, vLLM, LM Studio), on the official `openai` package.
 *
 * The SDK's own retries are off (`maxRetries: 0`): a failed call becomes a {@link ModelError}
 * (retryable or not, with the server's `Retry-After`) and the caller decides what to do with it.
 * The adapter never logs, and every message it builds is scrubbed of the API key.
 */
import OpenAI from 'openai';
import type {
  ChatCompletion,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';

import { openAiError } from './openai-errors.js';
import { ModelError } from './types.js';
import type { GenerateOptions, Message, Model, ModelRequest, ModelResponse, ToolCall, ToolDeclaration, Usage } from './types.js';

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

  readonly #client: OpenAI;
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
    this.#client = new OpenAI({
      apiKey: options.apiKey,
      maxRetries: 0,
      timeout: timeoutMs,
      // Explicit, so that OPENAI_BASE_URL / OPENAI_ORG_ID in the environment cannot redirect calls.
      baseURL: options.baseUrl ?? 'https://api.openai.com/v1',
      organization: null,
      project: null,
    });
  }

  async generate(request: ModelRequest, options?: GenerateOptions): Promise<ModelResponse> {
    if (options?.signal?.aborted) throw new ModelError('OpenAI request aborted before it was sent', { retryable: false });
    let completion: ChatCompletion;
    try {
      completion = await this.#client.chat.completions.create(this.#params(request), {
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
      return [
        {
          role: 'assistant',
          content: message.text ?? null,
          ...(calls.length > 0
            ? {
                tool_calls: calls.map((c) => ({
                  id: c.id,
                  type: 'function' as const,
                  // What the model sent, when it was not JSON: the next turn shows it its own mistake.
                  function: { name: c.name, arguments: c.rawArgs ?? JSON.stringify(c.args) },
                })),
              }
            : {}),
        },
      ];
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

/**
 * The first choice as a {@link ModelResponse}. A refusal, a cut-off (`length`) or filtered
 * (`content_filter`) answer and an empty one are errors that say so; tool-call arguments that
 * are not a JSON object are returned with `argsError` so the loop can send a correction.
 */
function fromCompletion(completion: ChatCompletion, scrub: (text: string) => string): ModelResponse {
  const choice = completion.choices[0];
  if (choice === undefined) throw new ModelError('OpenAI returned no choices', { retryable: false });
  const { message, finish_reason: reason } = choice;
  if (typeof message.refusal === 'string' && message.refusal !== '') {
    throw new ModelError(scrub(`the model refused: ${message.refusal}`), { retryable: false });
  }
  if (reason === 'content_filter') {
    throw new ModelError('OpenAI stopped the answer: finish_reason content_filter (the provider filtered the content)', {
      retryable: false,
    });
  }
  if (reason === 'length') {
    throw new ModelError('OpenAI cut the answer off at the output token limit (finish_reason length)', { retryable: false });
  }
  const calls = (message.tool_calls ?? []).map(toCall);
  const text = typeof message.content === 'string' ? message.content : '';
  if (text === '' && calls.length === 0) {
    throw new ModelError(`OpenAI returned no content (finish_reason ${reason})`, { retryable: false });
  }
  const result: ModelResponse = { calls };
  if (text !== '') result.text = text;
  const usage = toUsage(completion);
  if (usage !== undefined) result.usage = usage;
  if (completion.model) result.model = completion.model;
  return result;
}

function toCall(call: NonNullable<ChatCompletion['choices'][number]['message']['tool_calls']>[number]): ToolCall {
  if (call.type !== 'function') throw new ModelError(`OpenAI returned a tool call of type ${call.type}`, { retryable: false });
  const { name, arguments: raw } = call.function;
  if (typeof name !== 'string' || name === '') throw new ModelError('OpenAI returned a tool call without a name', { retryable: false });
  const parsed = parseArgs(raw);
  if (typeof parsed === 'string') return { id: call.id, name, args: {}, rawArgs: raw, argsError: parsed };
  return { id: call.id, name, args: parsed };
}

/** The arguments as an object, or what is wrong with them. An empty string means no arguments. */
function parseArgs(raw: string): Record<string, unknown> | string {
  if (raw.trim() === '') return {};
  try {
    const value: unknown = JSON.parse(raw);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
    return 'the arguments are JSON but not an object';
  } catch (error) {
    return `the arguments are not valid JSON (${(error as Error).message})`;
  }
}

function toUsage(completion: ChatCompletion): Usage | undefined {
  const u = completion.usage;
  if (!u) return undefined;
  return { inputTokens: u.prompt_tokens, outputTokens: u.completion_tokens, totalTokens: u.total_tokens };
}
