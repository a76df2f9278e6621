/**
 * Recognising a provider's "the request does not fit the context window" answer. Providers say it
 * with a code where they have one (OpenAI's `context_length_exceeded`) and otherwise only in the
 * message, so the message is read as a last resort — a provider's wording, never one of ours.
 * The phrases are the ones recorded from the live APIs (test/fixtures/README.md):
 * - OpenAI, vLLM: "This model's maximum context length is 128000 tokens. However, your messages resulted in …"
 * - OpenAI Responses, Azure: "Your input exceeds the context window of this model"
 * - Gemini: "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575)."
 * - Anthropic: "prompt is too long: 208310 tokens > 200000 maximum",
 *   "input length and `max_tokens` exceed context limit: 199000 + 8000 > 200000"
 * - llama.cpp: "the request exceeds the available context size", Ollama/others: "too many tokens"
 */
const CONTEXT_PHRASES: readonly RegExp[] = [
  /maximum context length/i,
  /exceeds? the context window/i,
  /exceeds the maximum number of tokens/i,
  /prompt is too long/i,
  /exceed context limit/i,
  /exceeds the available context size/i,
  /context length exceeded/i,
  /too many tokens/i,
];

/** Codes providers give a context-window error. */
const CONTEXT_CODES = new Set(['context_length_exceeded', 'model_context_window_exceeded', 'request_too_large']);

/** Whether a provider's error code or message says the request was too long for the model's context. */
export function isContextLengthError(code: string | undefined, message: string | undefined): boolean {
  if (code !== undefined && CONTEXT_CODES.has(code)) return true;
  return message !== undefined && CONTEXT_PHRASES.some((p) => p.test(message));
}
