import { BosunError } from '@bosun/contract';
import { FakeModel, type FakeModelOptions } from './fake.js';
import { GeminiModel } from './gemini.js';
import type { Model } from './types.js';

/** Which model to build: the config's model spec plus the key from the environment. */
export interface ModelChoice {
  /** `auto`: Gemini when `apiKey` is set, otherwise the fake. */
  provider: 'auto' | 'fake' | 'gemini';
  /** Gemini model name. */
  name: string;
  baseUrl?: string | undefined;
  timeoutMs?: number | undefined;
  /** `GEMINI_API_KEY`. */
  apiKey?: string | undefined;
  /** The fake model's simulated latency. */
  latencyMs?: number | undefined;
}

/**
 * Builds the model an agent uses. Asking for `gemini` without a key is an error naming
 * `GEMINI_API_KEY`; `auto` without a key gives the offline fake.
 */
export function createModel(choice: ModelChoice, fake: FakeModelOptions = {}): Model {
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
