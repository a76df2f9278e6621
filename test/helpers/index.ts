export { openContext, demoConfig, writeConfig } from './context.js';
export type { TestContext } from './context.js';
export {
  TestCluster,
  startService,
  wholeOutput,
  TAIL_LINES,
  READY_LINE,
  type ServiceProcess,
  type ServiceKind,
  type ClusterOptions,
  type ClusterRole,
  testLayout,
} from './processes.js';
export { startServiceTest, type ServiceTest, type ServiceTestOptions } from './service-test.js';
export { EventCollector } from './events.js';
export { ROOT, ENTRY } from './paths.js';
export { OwnServer, RedisClusterServers, NatsClusterServers, randomPort, freePort } from './servers.js';
export { openClient, runCli, runEntry, callLog, replayRun } from './harness.js';
export { waitUntil } from './wait.js';
export { startClusterTest, type ClusterTest } from './cluster-test.js';
export { makeCertificates, secretFile, type TestCertificates } from './tls.js';
export type { OwnServerOptions, RedisClusterOptions } from './servers.js';
export type { Client, ClientOptions, CliRun, CallLog, LoggedCall } from './harness.js';
export { reap } from './reaper.js';
export {
  a2aClient,
  a2aClient03,
  bearerFetch,
  schema03,
  tokenEntry,
  userMessage,
  userMessage03,
  sendRequest,
  collect,
  text as textPart,
  data as dataPart,
} from './a2a.js';
export { openBrowser, consoleLogin, CHROMIUM } from './browser.js';
export { FaultProxy } from './fault-proxy.js';
export { FaultCluster, COUNTER_MCP, effectLog, type EffectLog, type ServiceLinks, type FaultClusterOptions } from './fault-cluster.js';
