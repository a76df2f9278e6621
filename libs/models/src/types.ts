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

/** The answer to one {@link ToolCall}. */
export interface ToolResponse {
  /** The {@link ToolCall.id} this answers. */
  id: string;
  name: string;
  /** What the tool returned (any JSON). */
  output: unknown;
  /** True when the tool reported an error; the model sees it as an error result. */
  isError?: boolean;
}

/** A turn of the conversation. */
export type Message =
  { role: 'user'; text: string } | { role: 'model'; text?: string; calls?: ToolCall[] } | { role: 'tool'; responses: ToolResponse[] };

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

/** Token usage, when the provider reports it. */
export interface Usage {
  inputTokens?: number;
  outputTokens?: number;
  totalTokens?: number;
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
  generate(request: ModelRequest, options?: GenerateOptions): Promise<ModelResponse>;
}

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

  constructor(message: string, options: { retryable: boolean; status?: number; retryAfterMs?: number; cause?: unknown }) {
    super('model_error', message, { cause: options.cause, data: { retryable: options.retryable, status: options.status } });
    this.name = 'ModelError';
    this.retryable = options.retryable;
    this.status = options.status;
    this.retryAfterMs = options.retryAfterMs;
  }
}
