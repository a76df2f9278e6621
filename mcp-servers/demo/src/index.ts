/**
 * `@bosun/demo-mcp`: a simulated production environment served over MCP, for the
 * incident-response demo and for tests. Run it with `bosun-demo-mcp` (stdio), or embed
 * it with {@link createDemoServer} and any MCP transport.
 *
 * @packageDocumentation
 */
export {
  DEMO_NOW,
  DemoEnvironment,
  DemoEnvironmentError,
  type DemoArgument,
  type Deployment,
  type DeploymentsResult,
  type LogEntry,
  type LogLevel,
  type LogsResult,
  type MetricsWindow,
  type Pod,
  type PodStatus,
  type PodTermination,
  type PodsResult,
  type RestartResult,
  type RollbackResult,
  type ServiceMetrics,
  type ServiceSummary,
} from './environment.js';
export {
  DEMO_SERVER_NAME,
  DEMO_SERVER_VERSION,
  DEMO_TOOL_NAMES,
  createDemoServer,
  type DemoServerOptions,
  type DemoToolName,
} from './server.js';
