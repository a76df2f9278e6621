import { BosunError } from '@bosun/contract';
import { FakeModel, type FakeModelOptions } from './fake.js';
import { GeminiModel } from './gemini.js';
import { OpenAiModel } from './openai.js';
import type { Model } from './types.js';

/** Which model to build: the config's model spec plus the keys from the environment. */
export interface ModelChoice {
  /** `auto`: Gemini when `apiKey` is set, otherwise the fake. `openai`: an OpenAI-compatible endpoint. */
  provider: 'auto' | 'fake' | 'gemini' | 'openai';
  /** Model name (Gemini model, OpenAI model or Azure deployment). */
  name: string;
  baseUrl?: string | undefined;
  timeoutMs?: number | undefined;
  /** `openai`: ask for structured output where the request has a schema (default true). */
  structuredOutput?: boolean | undefined;
  /** `GEMINI_API_KEY`. */
  apiKey?: string | undefined;
  /** `OPENAI_API_KEY`. */
  openaiApiKey?: string | undefined;
  /** The fake model's simulated latency. */
  latencyMs?: number | undefined;
}

/**
 * Builds the model an agent uses. Asking for `gemini` without a key is an error naming
 * `GEMINI_API_KEY`; `auto` without a key gives the offline fake. `openai` needs `OPENAI_API_KEY`
 * unless `baseUrl` points at a server that wants none (Ollama, a local vLLM).
 */
export function createModel(choice: ModelChoice, fake: FakeModelOptions = {}): Model {
  if (choice.provider === 'openai') return createOpenAi(choice);
  const wantGemini = choice.provider === 'gemini' || (choice.provider === 'auto' && !!choice.apiKey);
  if (!wantGemini) return new FakeModel({ ...fake, ...(choice.latencyMs ? { latencyMs: choice.latencyMs } : {}) });
  if (!choice.apiKey) {
    throw new BosunError('missing_api_key', 'model provider "gemini" needs GEMINI_API_KEY to be set');
  }
  return new GeminiModel({
    apiKey: choice.apiKey,
    model: choice.name,
    ...(choice.baseUrl ? { baseUrl: choice.baseUrl } : {}),
    ...(choice.timeoutMs ? { timeoutMs: choice.timeoutMs } : {}),
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
  });
}
