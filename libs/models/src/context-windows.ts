/**
 * The context windows of the models Bosun knows, in tokens, by the start of the model's name as
 * the provider spells it (the first prefix that matches wins). `model.contextTokens` in the config
 * overrides it; an unknown model gets {@link UNKNOWN_CONTEXT_TOKENS}, a conservative size that a
 * local server (Ollama, vLLM, llama.cpp) usually serves — set `model.contextTokens` for yours.
 */
const KNOWN: readonly [prefix: string, tokens: number][] = [
  ['gpt-4.1', 1_047_576],
  ['gpt-4o', 128_000],
  ['gpt-4-turbo', 128_000],
  ['gpt-5', 400_000],
  ['o1', 200_000],
  ['o3', 200_000],
  ['o4', 200_000],
  ['gpt-3.5-turbo', 16_385],
  ['gemini-1.5-pro', 2_097_152],
  ['gemini-', 1_048_576],
  ['claude-', 200_000],
  ['mistral-large', 131_072],
  ['mistral-medium', 131_072],
  ['mistral-small', 131_072],
  ['deepseek-', 128_000],
  ['qwen', 131_072],
];

/** What an unknown model is given: 32,768 tokens. */
export const UNKNOWN_CONTEXT_TOKENS = 32_768;

/** The context window of a model by its name (the provider's, e.g. `gpt-4.1-mini`, `claude-sonnet-4-5`). */
export function knownContextTokens(model: string): number {
  const name = model.toLowerCase().replace(/^models\//, '');
  for (const [prefix, tokens] of KNOWN) if (name.startsWith(prefix)) return tokens;
  return UNKNOWN_CONTEXT_TOKENS;
}
