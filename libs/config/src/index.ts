export { BudgetLimits, ModelPrice, taskBudget, priceOf } from './budgets.js';
export { parseClusterConfig, loadClusterConfig, specialistConfig, mcpServerConfig, configSecrets, ConfigError } from './cluster.js';
export type { ParseOptions, ClusterConfig, WorkersConfig, SpecialistConfig, McpServerConfig, ModelSpec, FakeCall } from './cluster.js';
export { readEnv, defaultConfigFile, redactUrl, ENV_VARS } from './env.js';
export { findUp } from './paths.js';
export { normalizeHost, normalizeOrigin } from './http-origin.js';
export type { BosunEnv, EnvVarDoc } from './env.js';
export { SecretValue, readRedisSettings, readNatsSettings } from './connections.js';
export type { RedisSettings, NatsSettings, NatsAuth, TlsMaterial } from './connections.js';
export { createLogger, setLogLevel, addLogSecrets, knownSecrets, scrub, REDACT_PATHS } from './logger.js';
export type { Logger, LoggerOptions } from './logger.js';
export { validateAgainstSchema, deriveStallPayload, buildStallPayload, checkOutputSchema, OutputSchemaError } from './output-schema.js';
export type { OutputSpec } from './output-schema.js';
export { IntakeConfigSchema, JSON_PATH_PATTERN, resolveIntakeSecrets, intakeSecrets } from './intake.js';
export type {
  IntakeConfig,
  ResolvedIntakeConfig,
  IntakeSource,
  IntakeAuth,
  AlertmanagerSourceConfig,
  GenericSourceConfig,
  RunbookConfig,
} from './intake.js';
export { DeliveryConfigSchema, sinksFor, resolveDeliverySecrets, deliverySecrets, slackAppSinks } from './delivery.js';
export type { DeliveryConfig, DeliverySink, SlackAppSink } from './delivery.js';
export { A2aConfig, A2A_TENANT_PATTERN, RemoteA2aAgent } from './a2a.js';
export { RetentionConfigSchema, DEFAULT_RETENTION, parseDuration, formatDuration, retentionProblem } from './retention.js';
export type { RetentionConfig } from './retention.js';
export { ConsoleConfigSchema, resolveOidcSecret } from './console.js';
export type { ConsoleConfig, OidcSettings } from './console.js';
export { OperatorEntry, OperatorsConfig, OPERATOR_NAME_PATTERN } from './operators.js';
