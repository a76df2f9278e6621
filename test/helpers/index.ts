export { openContext, demoConfig, writeConfig } from './context.js';
export type { TestContext } from './context.js';
export { ServiceProcess, TestCluster, startService } from './processes.js';
export { EventCollector } from './events.js';
export { ROOT, ENTRY } from './paths.js';
export { OwnServer, RedisClusterServers, NatsClusterServers, randomPort, freePort } from './servers.js';
export { openClient, runCli, callLog, replayRun, waitUntil } from './harness.js';
export type { Client, ClientOptions, CliRun, CallLog, LoggedCall } from './harness.js';
export { reap } from './reaper.js';
