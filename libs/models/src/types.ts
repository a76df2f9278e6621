import { BosunError } from '@bosun/contract';
/**
 * The model port: what an agent loop needs from a language model, independent of provider.
 */

/** A function the model may call. `parameters` is a JSON Schema object. */
export interface ToolDeclaration {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/** One function call proposed by the model. `id` is unique within the conversation. */
export interface ToolCall {
  id: string;
  name: string;
  args: Record<string, unknown>;
  /**
   * An opaque token some providers attach to a call and need back with it in the next request
   * (Gemini's thought signature). Kept in checkpoints; other providers ignore it.
   */
  signature?: string;
  /**
   * Set when the model's arguments were not a JSON object (`args` is then `{}`): what is wrong
   * with them. The task loop answers such a turn with a correction instead of running it.
   */
  argsError?: string;
  /** The arguments exactly as the model sent them, when they did not parse. */
  rawArgs?: string;
}

/**
 * What a model turn carried beside its answer that the provider needs back in later requests:
 * Anthropic's thinking blocks (with their signatures), DeepSeek's `reasoning_content` on a turn
 * with tool calls. Never part of the answer; kept in checkpoints with the turn.
 */
export interface Reasoning {
  /** The provider's field or block it came in (`reasoning_content`, `reasoning`, `thinking`). */
  kind: string;
  /** The reasoning text, or for a redacted block its opaque data. */
  text: string;
  /** Anthropic's signature of a thinking block, sent back unchanged. */
  signature?: string;
  /** Anthropic's `redacted_thinking`: `text` is the opaque data. */
  redacted?: boolean;
}

/** The answer to one {@link ToolCall}. */
export interface ToolResponse {
  /** The {@link ToolCall.id} this answers. */
  id: string;
  name: string;
  /** What the tool returned (any JSON). */
  output: unknown;
  /** True when the tool reported an error; the model sees it as an error result. */
  isError?: boolean;
  /**
   * The idempotency key the call ran under, when it went to the gateway: the context budget
   * names it when it shortens this result, so the whole result can be found in the call record.
   */
  key?: string;
}

/** A turn of the conversation. */
export type Message =
  | { role: 'user'; text: string }
  | { role: 'model'; text?: string; calls?: ToolCall[]; reasoning?: Reasoning[] }
  | { role: 'tool'; responses: ToolResponse[] };

/**
 * How the agent uses the model:
 * - `single`: one call, no tools (classifiers);
 * - `task`: a tool loop that ends with `finish_task` (specialists);
 * - `chat`: a tool loop that ends with a text answer (the delegating coordinator);
 * - `codeact`: each turn is a script in a fenced block (specialists with `loop: codeact`); no
 *   functions are offered: the system instruction lists the tools.
 */
export type AgentMode = 'single' | 'task' | 'chat' | 'codeact';

/** One request to a model. */
export interface ModelRequest {
  /** The agent making the request (a label for logs and fakes; providers may ignore it). */
  agent: string;
  mode: AgentMode;
  /** System instruction. */
  system?: string;
  messages: Message[];
  /** Functions offered in this request; empty for `single` and `codeact`. */
  tools: ToolDeclaration[];
  /**
   * The JSON Schema the text answer must match (a `single` request answering in JSON). Providers
   * that support structured output enforce it; the others ignore it, and the caller still parses.
   */
  responseSchema?: { name: string; schema: Record<string, unknown> };
  /** `codeact`: the JSON Schema the script's `final_result` must match (fakes fill it). */
  outputSchema?: Record<string, unknown>;
}

/**
 * Token usage, when the provider reports it, as the provider bills it: `inputTokens` counts every
 * input token (cached and cache-written ones included), `outputTokens` every output token
 * (reasoning included, which every provider bills at the output rate).
 */
export interface Usage {
  inputTokens?: number;
  outputTokens?: number;
  totalTokens?: number;
  /** Of `outputTokens`: the model's reasoning (OpenAI `reasoning_tokens`, Gemini `thoughtsTokenCount`). */
  reasoningTokens?: number;
  /** Of `inputTokens`: read from the provider's prompt cache (billed at the cached rate). */
  cachedInputTokens?: number;
  /** Of `inputTokens`: written to the prompt cache (Anthropic `cache_creation_input_tokens`). */
  cacheWriteTokens?: number;
}

/** One response from a model: text, calls, or both. */
export interface ModelResponse {
  text?: string;
  calls: ToolCall[];
  usage?: Usage;
  /** The provider's model name or version that answered. */
  model?: string;
  /** Set when the fallback model answered because the primary failed: which, and why. */
  fallback?: { from: string; to: string; reason: string };
  /** What the provider needs back with this turn in later requests (see {@link Reasoning}). */
  reasoning?: Reasoning[];
}

/** Options of one call. */
export interface GenerateOptions {
  /** Aborts the request. */
  signal?: AbortSignal;
}

/** A language model. Implementations must be safe to call concurrently. */
export interface Model {
  /** A name for logs and events, e.g. `fake` or `gemini:gemini-2.5-flash`. */
  readonly name: string;
  /**
   * The model's context window in tokens: what the agent loops fit each request into (see the
   * context budget in docs/models.md). Absent: no limit is known and nothing is trimmed.
   */
  readonly contextTokens?: number | undefined;
  generate(request: ModelRequest, options?: GenerateOptions): Promise<ModelResponse>;
}

/**
 * Why a provider's answer cannot be used, when the adapter knows (callers branch on it, never on
 * the message):
 * - `output_limit`: the answer was cut off at the output token limit (OpenAI `length`, Gemini
 *   `MAX_TOKENS`, Anthropic `max_tokens`): partial text is never an answer;
 * - `context_length`: the request did not fit the model's context window;
 * - `refused`: the model refused, or the provider filtered or blocked the answer or the prompt;
 * - `malformed`: the answer is not usable as sent (no content, a call without a name).
 */
export type ModelErrorReason = 'output_limit' | 'context_length' | 'refused' | 'malformed';

/**
 * A failure of the model provider (HTTP error, refusal, malformed response).
 * `retryable` says whether the same request may succeed later (rate limits, 5xx).
 */
export class ModelError extends BosunError {
  declare readonly code: 'model_error';
  readonly retryable: boolean;
  readonly status: number | undefined;
  /** How long the provider asked us to wait before trying again (`Retry-After`), when it said. */
  readonly retryAfterMs: number | undefined;
  /** Why, when the adapter knows: see {@link ModelErrorReason}. */
  readonly reason: ModelErrorReason | undefined;

  constructor(
    message: string,
    options: { retryable: boolean; status?: number; retryAfterMs?: number; reason?: ModelErrorReason; cause?: unknown },
  ) {
    super('model_error', message, {
      cause: options.cause,
      data: { retryable: options.retryable, status: options.status, ...(options.reason ? { reason: options.reason } : {}) },
    });
    this.name = 'ModelError';
    this.retryable = options.retryable;
    this.status = options.status;
    this.retryAfterMs = options.retryAfterMs;
    this.reason = options.reason;
  }
}
