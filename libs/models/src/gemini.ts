/**
 * The Gemini adapter of the model port, on `@google/genai` (Gemini Developer API).
 *
 * The adapter never logs and never puts the API key in an error message: the SDK sends the key in
 * the `x-goog-api-key` header, and every message built here is scrubbed of it as well.
 */
import { errorMessage } from '@bosun/contract';
import type { GoogleGenAI } from '@google/genai';
import type { Content, FunctionDeclaration, GenerateContentConfig, GenerateContentResponse, Part } from '@google/genai';

import { isContextLengthError } from './context-errors.js';
import { knownContextTokens } from './context-windows.js';
import { loadedSdk, sdk } from './sdks.js';
import { ModelError, type ModelErrorReason } from './types.js';
import type { GenerateOptions, Message, Model, ModelRequest, ModelResponse, ToolCall, ToolDeclaration, Usage } from './types.js';

/** Options of {@link GeminiModel}. */
export interface GeminiModelOptions {
  /** Gemini API key; sent only in the `x-goog-api-key` header. */
  apiKey: string;
  /** Model id, e.g. `gemini-2.5-flash` (the default). */
  model?: string;
  /** Base URL of the API (default: the SDK's, `https://generativelanguage.googleapis.com`). */
  baseUrl?: string;
  /** Deadline of one request, in milliseconds (default 60000). */
  timeoutMs?: number;
  /** Sampling temperature; the model's default when omitted. */
  temperature?: number;
  /** The model's context window in tokens (default: the known window of `model`, see `knownContextTokens`). */
  contextTokens?: number;
}

const DEFAULT_MODEL = 'gemini-2.5-flash';
const DEFAULT_TIMEOUT_MS = 60_000;

/**
 * Ids this adapter invents for function calls that Gemini returned without an id. They are
 * `call_<n>`, where `n` counts the calls of the conversation, so they are deterministic and unique
 * within a conversation. They are never sent back to Gemini, which did not issue them.
 */
const SYNTHETIC_ID = /^call_\d+$/;

/** Low-level network failures (undici / Node socket codes). */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/** A {@link Model} backed by Gemini. Safe to call concurrently: calls share no mutable state. */
export class GeminiModel implements Model {
  readonly name: string;
  readonly contextTokens: number;

  /** The SDK's client, made at the first call (the SDK loads then, `sdks.ts`). */
  #client: Promise<GoogleGenAI> | undefined;
  readonly #clientOptions: ConstructorParameters<typeof GoogleGenAI>[0];
  readonly #model: string;
  readonly #apiKey: string;
  readonly #timeoutMs: number;
  readonly #temperature: number | undefined;

  constructor(options: GeminiModelOptions) {
    if (typeof options.apiKey !== 'string' || options.apiKey.trim() === '') {
      throw new TypeError('GeminiModel: apiKey is required');
    }
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
      throw new TypeError('GeminiModel: timeoutMs must be a positive number');
    }
    this.#model = options.model ?? DEFAULT_MODEL;
    this.#apiKey = options.apiKey;
    this.#timeoutMs = timeoutMs;
    this.#temperature = options.temperature;
    this.name = `gemini:${this.#model}`;
    this.contextTokens = options.contextTokens ?? knownContextTokens(this.#model);
    this.#clientOptions = {
      apiKey: options.apiKey,
      // Explicit, so that GOOGLE_GENAI_USE_VERTEXAI in the environment cannot switch the backend.
      vertexai: false,
      ...(options.baseUrl === undefined ? {} : { httpOptions: { baseUrl: options.baseUrl } }),
    };
  }

  #connect(): Promise<GoogleGenAI> {
    return (this.#client ??= sdk('gemini').then((m) => new m.GoogleGenAI(this.#clientOptions)));
  }

  async generate(request: ModelRequest, options?: GenerateOptions): Promise<ModelResponse> {
    const callerSignal = options?.signal;
    if (callerSignal?.aborted) {
      throw new ModelError('Gemini request aborted before it was sent', { retryable: false });
    }

    // One signal for the SDK: aborted by the caller or by our deadline, whichever comes first.
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, this.#timeoutMs);
    const onAbort = (): void => controller.abort();
    callerSignal?.addEventListener('abort', onAbort, { once: true });

    let response: GenerateContentResponse;
    try {
      const client = await this.#connect();
      response = await client.models.generateContent({
        model: this.#model,
        contents: toContents(request.messages),
        config: this.#config(request, controller.signal),
      });
    } catch (error) {
      throw this.#toModelError(error, { aborted: callerSignal?.aborted === true, timedOut });
    } finally {
      clearTimeout(timer);
      callerSignal?.removeEventListener('abort', onAbort);
    }
    return this.#fromResponse(response, countCalls(request.messages));
  }

  #config(request: ModelRequest, abortSignal: AbortSignal): GenerateContentConfig {
    const config: GenerateContentConfig = { abortSignal };
    if (request.system !== undefined && request.system !== '') config.systemInstruction = request.system;
    if (this.#temperature !== undefined) config.temperature = this.#temperature;
    if (request.mode !== 'single' && request.tools.length > 0) {
      config.tools = [{ functionDeclarations: request.tools.map(toFunctionDeclaration) }];
    }
    return config;
  }

  #fromResponse(response: GenerateContentResponse, priorCalls: number): ModelResponse {
    const candidate = response.candidates?.[0];
    if (candidate === undefined) {
      const reason = response.promptFeedback?.blockReason;
      const detail = response.promptFeedback?.blockReasonMessage;
      throw new ModelError(
        this.#scrub(
          reason === undefined
            ? 'Gemini returned no candidates'
            : `Gemini blocked the prompt (blockReason ${reason}${detail ? `: ${detail}` : ''})`,
        ),
        { retryable: false, reason: reason === undefined ? 'malformed' : 'refused' },
      );
    }

    const parts = candidate.content?.parts ?? [];
    const texts: string[] = [];
    const calls: ToolCall[] = [];
    for (const part of parts) {
      if (part.thought === true) continue;
      if (typeof part.text === 'string') texts.push(part.text);
      const call = part.functionCall;
      if (call !== undefined) {
        if (typeof call.name !== 'string' || call.name === '') {
          throw new ModelError('Gemini returned a function call without a name', { retryable: false, reason: 'malformed' });
        }
        calls.push({
          id: typeof call.id === 'string' && call.id !== '' ? call.id : `call_${priorCalls + calls.length}`,
          name: call.name,
          args: isRecord(call.args) ? call.args : {},
          // Gemini 3 rejects a later turn whose function calls lost their thought signature.
          ...(typeof part.thoughtSignature === 'string' && part.thoughtSignature !== '' ? { signature: part.thoughtSignature } : {}),
        });
      }
    }
    const text = texts.join('');

    // Only STOP (or no reason at all) is a finished answer: text cut at MAX_TOKENS, a recitation
    // stop or a malformed call is never taken as complete, whatever text came with it.
    const finish: string | undefined = candidate.finishReason;
    if (finish !== undefined && finish !== 'STOP' && finish !== 'FINISH_REASON_UNSPECIFIED') {
      const detail = candidate.finishMessage;
      const kind = finishKind(finish);
      const what =
        kind === 'output_limit'
          ? `Gemini cut the answer off at the output token limit (finishReason ${finish})`
          : `Gemini stopped the answer (finishReason ${finish}${detail ? `: ${detail}` : ''})`;
      throw new ModelError(this.#scrub(what), { retryable: false, reason: kind });
    }

    if (text === '' && calls.length === 0) {
      const reason = finish ?? 'unknown';
      const detail = candidate.finishMessage;
      throw new ModelError(this.#scrub(`Gemini returned no content (finishReason ${reason}${detail ? `: ${detail}` : ''})`), {
        retryable: false,
        reason: 'malformed',
      });
    }

    const result: ModelResponse = { calls };
    if (text !== '') result.text = text;
    const usage = toUsage(response);
    if (usage !== undefined) result.usage = usage;
    if (response.modelVersion !== undefined) result.model = response.modelVersion;
    return result;
  }

  #toModelError(error: unknown, state: { aborted: boolean; timedOut: boolean }): ModelError {
    const cause = this.#safeCause(error);
    if (state.aborted) {
      return new ModelError('Gemini request aborted', { retryable: false, cause });
    }
    if (state.timedOut) {
      return new ModelError(`Gemini request timed out after ${this.#timeoutMs} ms`, { retryable: true, cause });
    }
    if (isApiError(error)) return geminiHttpError(error.status, error.message, (t) => this.#scrub(t), cause);
    const message = errorMessage(error);
    const code = networkCode(error);
    if (code !== undefined || isFetchFailure(error)) {
      return new ModelError(this.#scrub(`Gemini request failed: ${message}${code ? ` (${code})` : ''}`), {
        retryable: true,
        cause,
      });
    }
    return new ModelError(this.#scrub(`Gemini request failed: ${message}`), { retryable: false, cause });
  }

  /** Removes the API key from a text (defence in depth: it should never be there). */
  #scrub(text: string): string {
    return text.split(this.#apiKey).join('[redacted]');
  }

  /** The error to attach as `cause`, unless its message would leak the key. */
  #safeCause(error: unknown): unknown {
    if (error instanceof Error && error.message.includes(this.#apiKey)) return undefined;
    return error;
  }
}

/**
 * The {@link ModelError} for an HTTP error of the Gemini API: 429 and 5xx are retryable; a 400
 * saying the input is longer than the model's window has reason `context_length`. `raw` is the
 * SDK's ApiError message (the JSON error body). Exported for the fake model, which answers an
 * over-limit request exactly as Gemini does.
 */
export function geminiHttpError(status: number, raw: string, scrub: (text: string) => string = (t) => t, cause?: unknown): ModelError {
  const retryable = status === 429 || (status >= 500 && status <= 599);
  const described = describeApiError(raw);
  const tooLong = status === 400 && isContextLengthError(undefined, described);
  return new ModelError(scrub(`Gemini API error: HTTP ${status} ${described}`), {
    retryable,
    status,
    ...(tooLong ? { reason: 'context_length' as const } : {}),
    cause,
  });
}

/** Maps the conversation to Gemini contents. */
function toContents(messages: readonly Message[]): Content[] {
  const contents: Content[] = [];
  for (const message of messages) {
    switch (message.role) {
      case 'user':
        contents.push({ role: 'user', parts: [{ text: message.text }] });
        break;
      case 'model': {
        const parts: Part[] = [];
        if (message.text !== undefined && message.text !== '') parts.push({ text: message.text });
        for (const call of message.calls ?? []) {
          parts.push({
            functionCall: {
              ...(SYNTHETIC_ID.test(call.id) ? {} : { id: call.id }),
              name: call.name,
              args: call.args,
            },
            ...(call.signature ? { thoughtSignature: call.signature } : {}),
          });
        }
        // Gemini rejects a content without parts; an empty model turn carries nothing anyway.
        if (parts.length > 0) contents.push({ role: 'model', parts });
        break;
      }
      case 'tool': {
        if (message.responses.length === 0) break;
        contents.push({
          role: 'user',
          parts: message.responses.map((r) => ({
            functionResponse: {
              ...(SYNTHETIC_ID.test(r.id) ? {} : { id: r.id }),
              name: r.name,
              // Gemini wants an object; `output` and `error` are the keys it documents.
              response: r.isError === true ? { error: r.output ?? null } : { output: r.output ?? null },
            },
          })),
        });
        break;
      }
    }
  }
  return contents;
}

/** Our JSON Schemas go to Gemini unchanged, as `parametersJsonSchema`. */
function toFunctionDeclaration(tool: ToolDeclaration): FunctionDeclaration {
  return { name: tool.name, description: tool.description, parametersJsonSchema: tool.parameters };
}

/** The number of function calls already in the conversation (for deterministic synthetic ids). */
function countCalls(messages: readonly Message[]): number {
  let count = 0;
  for (const message of messages) {
    if (message.role === 'model') count += message.calls?.length ?? 0;
  }
  return count;
}

/**
 * Usage as Google bills it: thinking (`thoughtsTokenCount`) at the output rate, so it is added to
 * the candidates' tokens; the prompt of a tool-use turn (`toolUsePromptTokenCount`) as input.
 * `cachedContentTokenCount` is part of `promptTokenCount`, reported apart.
 */
function toUsage(response: GenerateContentResponse): Usage | undefined {
  const meta = response.usageMetadata;
  if (meta === undefined) return undefined;
  const usage: Usage = {};
  if (meta.promptTokenCount !== undefined || meta.toolUsePromptTokenCount !== undefined)
    usage.inputTokens = (meta.promptTokenCount ?? 0) + (meta.toolUsePromptTokenCount ?? 0);
  if (meta.candidatesTokenCount !== undefined || meta.thoughtsTokenCount !== undefined)
    usage.outputTokens = (meta.candidatesTokenCount ?? 0) + (meta.thoughtsTokenCount ?? 0);
  if (meta.totalTokenCount !== undefined) usage.totalTokens = meta.totalTokenCount;
  if (meta.thoughtsTokenCount) usage.reasoningTokens = meta.thoughtsTokenCount;
  if (meta.cachedContentTokenCount) usage.cachedInputTokens = meta.cachedContentTokenCount;
  return Object.keys(usage).length > 0 ? usage : undefined;
}

/** What a finishReason other than STOP means for the answer. */
function finishKind(reason: string): ModelErrorReason {
  if (reason === 'MAX_TOKENS') return 'output_limit';
  if (['SAFETY', 'RECITATION', 'BLOCKLIST', 'PROHIBITED_CONTENT', 'SPII', 'IMAGE_SAFETY', 'LANGUAGE'].includes(reason)) return 'refused';
  return 'malformed';
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isApiError(error: unknown): error is { status: number; message: string } {
  const ApiError = loadedSdk('gemini')?.ApiError;
  if (ApiError !== undefined && error instanceof ApiError) return true;
  return error instanceof Error && error.name === 'ApiError' && typeof (error as { status?: unknown }).status === 'number';
}

/**
 * The SDK's ApiError message is the JSON error body, e.g.
 * `{"error":{"code":400,"message":"...","status":"INVALID_ARGUMENT"}}`; keep its status and message.
 */
function describeApiError(raw: string): string {
  try {
    const body: unknown = JSON.parse(raw);
    const error = isRecord(body) ? body['error'] : undefined;
    if (isRecord(error)) {
      const status = typeof error['status'] === 'string' && error['status'] !== '' ? error['status'] : undefined;
      const message = typeof error['message'] === 'string' ? error['message'].trim() : undefined;
      if (message !== undefined && message !== '') return status ? `${status}: ${message}` : message;
      if (status !== undefined) return status;
    }
  } catch {
    // Not JSON: use it as it is.
  }
  return raw.trim();
}

/** The socket error code of a failed fetch, if any (`TypeError('fetch failed', { cause })`). */
function networkCode(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current instanceof Error; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && (NETWORK_CODES.has(code) || code.startsWith('UND_ERR_'))) return code;
    current = current.cause;
  }
  return undefined;
}

/** undici's failures: `fetch failed` before the response, `terminated` while reading the body. */
function isFetchFailure(error: unknown): boolean {
  return error instanceof TypeError && (error.message === 'fetch failed' || error.message === 'terminated');
}
