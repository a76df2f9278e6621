import type * as AnthropicSdk from '@anthropic-ai/sdk';
import type * as GeminiSdk from '@google/genai';
import type * as OpenAiSdk from 'openai';

/**
 * The providers' SDKs, loaded when a model first calls its provider, not when this package is
 * imported: a process loads only the SDK it uses, and one on the offline fake loads none. The
 * three together cost about 0.6 s of CPU at every start of a coordinator or specialist (measured
 * by importing them into a bare `node`), which a test suite of a few hundred process starts pays
 * in full. An SDK's error classes exist only once it is loaded, and only a call through it can
 * throw them, so the error mappers ask for the SDK that is already loaded ({@link loadedSdk}).
 */
type Sdks = {
  openai: typeof OpenAiSdk;
  gemini: typeof GeminiSdk;
  anthropic: typeof AnthropicSdk;
};

const loaded: Partial<Sdks> = {};

const importers: { [K in keyof Sdks]: () => Promise<Sdks[K]> } = {
  openai: () => import('openai'),
  gemini: () => import('@google/genai'),
  anthropic: () => import('@anthropic-ai/sdk'),
};

/** The provider's SDK, imported once per process. */
export async function sdk<K extends keyof Sdks>(provider: K): Promise<Sdks[K]> {
  const module = loaded[provider] ?? (await importers[provider]());
  loaded[provider] = module;
  return module;
}

/** The provider's SDK if a call has loaded it (an error it threw can only come from there). */
export function loadedSdk<K extends keyof Sdks>(provider: K): Sdks[K] | undefined {
  return loaded[provider];
}
