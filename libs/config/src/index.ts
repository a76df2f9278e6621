export {
  parseClusterConfig,
  loadClusterConfig,
  toolAllowed,
  specialistConfig,
  mcpServerConfig,
  configSecrets,
  ConfigError,
} from './cluster.js';
export type { ParseOptions, ClusterConfig, WorkersConfig, SpecialistConfig, McpServerConfig, ModelSpec, FakeCall } from './cluster.js';
export { readEnv, defaultConfigFile, redactUrl, ENV_VARS } from './env.js';
export { normalizeHost, normalizeOrigin } from './http-origin.js';
export type { BosunEnv, EnvVarDoc } from './env.js';
export { SecretValue, readRedisSettings, readNatsSettings } from './connections.js';
export type { RedisSettings, NatsSettings, NatsAuth, TlsMaterial } from './connections.js';
export { createLogger, setLogLevel, addLogSecrets, knownSecrets, scrub, REDACT_PATHS } from './logger.js';
export type { Logger, LoggerOptions } from './logger.js';
export { validateAgainstSchema, deriveStallPayload, buildStallPayload, checkOutputSchema } from './output-schema.js';
export type { OutputSpec } from './output-schema.js';
export {
  MAX_TOOLS_PER_REQUEST,
  isReadOnlyTool,
  toolState,
  approvalTimeoutFor,
  specialistCaller,
  offeredTools,
  decideCall,
} from './policy.js';
export type { ToolState, PolicyTool, Caller, CallDecision } from './policy.js';
