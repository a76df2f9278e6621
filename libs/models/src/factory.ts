import { BosunError } from '@bosun/contract';
import { AnthropicModel } from './anthropic.js';
import { FakeModel, type FakeModelOptions } from './fake.js';
import { GeminiModel } from './gemini.js';
import { OpenAiModel } from './openai.js';
import type { Model } from './types.js';

/** Which model to build: the config's model spec plus the keys from the environment. */
export interface ModelChoice {
  /**
   * `auto`: Gemini when `apiKey` is set, otherwise the fake. `openai`: an OpenAI-compatible
   * endpoint. `anthropic`: Anthropic's Messages API.
   */
  provider: 'auto' | 'fake' | 'gemini' | 'openai' | 'anthropic';
  /** Model name (Gemini model, OpenAI model or Azure deployment, Claude model). */
  name: string;
  baseUrl?: string | undefined;
  timeoutMs?: number | undefined;
  /** `openai`: ask for structured output where the request has a schema (default true). */
  structuredOutput?: boolean | undefined;
  /** The context window in tokens; default the known window of `name` (the fake: none). */
  contextTokens?: number | undefined;
  /** `anthropic`: `max_tokens` (default 8192). */
  maxOutputTokens?: number | undefined;
  /** `anthropic`: extended thinking's `budget_tokens`; off when absent. */
  thinkingBudgetTokens?: number | undefined;
  /** `anthropic`: prompt caching of system and tools (default true). */
  promptCaching?: boolean | undefined;
  /** The fake: whose recorded context-length error it answers an over-limit request with. */
  fakeContextError?: 'openai' | 'gemini' | 'anthropic' | undefined;
  /** `GEMINI_API_KEY`. */
  apiKey?: string | undefined;
  /** `OPENAI_API_KEY`. */
  openaiApiKey?: string | undefined;
  /** `ANTHROPIC_API_KEY`. */
  anthropicApiKey?: string | undefined;
  /** The fake model's simulated latency. */
  latencyMs?: number | undefined;
}

/**
 * Builds the model an agent uses. Asking for `gemini` without a key is an error naming
 * `GEMINI_API_KEY` (`anthropic`: `ANTHROPIC_API_KEY`); `auto` without a key gives the offline
 * fake. `openai` needs `OPENAI_API_KEY` unless `baseUrl` points at a server that wants none
 * (Ollama, a local vLLM).
 */
export function createModel(choice: ModelChoice, fake: FakeModelOptions = {}): Model {
  if (choice.provider === 'openai') return createOpenAi(choice);
  if (choice.provider === 'anthropic') return createAnthropic(choice);
  const wantGemini = choice.provider === 'gemini' || (choice.provider === 'auto' && !!choice.apiKey);
  if (!wantGemini) {
    return new FakeModel({
      ...fake,
      ...(choice.latencyMs ? { latencyMs: choice.latencyMs } : {}),
      ...(choice.contextTokens ? { contextTokens: choice.contextTokens } : {}),
      ...(choice.fakeContextError ? { contextError: choice.fakeContextError } : {}),
    });
  }
  if (!choice.apiKey) {
    throw new BosunError('missing_api_key', 'model provider "gemini" needs GEMINI_API_KEY to be set');
  }
  return new GeminiModel({
    apiKey: choice.apiKey,
    model: choice.name,
    ...(choice.baseUrl ? { baseUrl: choice.baseUrl } : {}),
    ...(choice.timeoutMs ? { timeoutMs: choice.timeoutMs } : {}),
    ...(choice.contextTokens ? { contextTokens: choice.contextTokens } : {}),
  });
}

function createOpenAi(choice: ModelChoice): Model {
  if (!choice.openaiApiKey && !choice.baseUrl) {
    throw new BosunError('missing_api_key', 'model provider "openai" needs OPENAI_API_KEY to be set (or model.baseUrl for a local server)');
  }
  return new OpenAiModel({
    // A local server without authentication accepts any bearer token.
    apiKey: choice.openaiApiKey ?? 'none',
    model: choice.name,
    ...(choice.baseUrl ? { baseUrl: choice.baseUrl } : {}),
    ...(choice.timeoutMs ? { timeoutMs: choice.timeoutMs } : {}),
    ...(choice.structuredOutput === undefined ? {} : { structuredOutput: choice.structuredOutput }),
    ...(choice.contextTokens ? { contextTokens: choice.contextTokens } : {}),
  });
}

function createAnthropic(choice: ModelChoice): Model {
  if (!choice.anthropicApiKey) {
    throw new BosunError('missing_api_key', 'model provider "anthropic" needs ANTHROPIC_API_KEY to be set');
  }
  // The config's default name is Gemini's: an Anthropic agent that names no model gets Claude's default.
  const model = choice.name.startsWith('gemini-') ? undefined : choice.name;
  return new AnthropicModel({
    apiKey: choice.anthropicApiKey,
    ...(model ? { model } : {}),
    ...(choice.baseUrl ? { baseUrl: choice.baseUrl } : {}),
    ...(choice.timeoutMs ? { timeoutMs: choice.timeoutMs } : {}),
    ...(choice.contextTokens ? { contextTokens: choice.contextTokens } : {}),
    ...(choice.maxOutputTokens ? { maxOutputTokens: choice.maxOutputTokens } : {}),
    ...(choice.thinkingBudgetTokens ? { thinkingBudgetTokens: choice.thinkingBudgetTokens } : {}),
    ...(choice.promptCaching === undefined ? {} : { promptCaching: choice.promptCaching }),
  });
}
