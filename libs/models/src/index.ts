export { ModelError } from './types.js';
export type {
  Model,
  ModelRequest,
  ModelResponse,
  Message,
  ToolCall,
  ToolResponse,
  ToolDeclaration,
  AgentMode,
  Usage,
  GenerateOptions,
  Reasoning,
  ModelErrorReason,
} from './types.js';
export { FakeModel } from './fake.js';
export type { FakeModelOptions, FakePlannedCall } from './fake.js';
export { GeminiModel } from './gemini.js';
export type { GeminiModelOptions } from './gemini.js';
export { OpenAiModel } from './openai.js';
export type { OpenAiModelOptions } from './openai.js';
export { retryAfterMs } from './openai-errors.js';
export { AnthropicModel } from './anthropic.js';
export type { AnthropicModelOptions } from './anthropic.js';
export { knownContextTokens, UNKNOWN_CONTEXT_TOKENS } from './context-windows.js';
export { isContextLengthError } from './context-errors.js';
export { createModel } from './factory.js';
export { ResilientModel, ThrottledError, estimateTokens } from './resilient.js';
export type { CallLimiter, RetryPolicy, ResilientModelOptions } from './resilient.js';
export type { ModelChoice } from './factory.js';
export { renderIncident, extractIncident, delegateToolName, DELEGATE_TOOL_PREFIX, renderFolded, extractFoldedCalls } from './prompt.js';
export type { FoldedCall } from './prompt.js';
