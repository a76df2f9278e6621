import { hostname } from 'node:os';
import { Worker } from 'bullmq';
import { TOOLS_QUEUE } from '@bosun/contract';
import { ConfigError, addLogSecrets, configSecrets, createLogger, loadClusterConfig } from '@bosun/config';
import {
  ApprovalStore,
  checkRuntime,
  openRuntime,
  serveToolCalls,
  watchWorkerLocks,
  type HostedOptions,
  type RunServiceOptions,
  type Runtime,
  type ServiceHandle,
  type ToolCallResponder,
} from '@bosun/transport';
import type { BosunEnv, Logger } from '@bosun/config';
import { startTracing } from '@bosun/otel';
import { ToolGateway } from './gateway.js';
import { checkMcpServers } from './mcp.js';
import { startMcpFace, type McpFace } from './mcp-face.js';

// Its level comes from LOG_LEVEL once runService has read the environment.
const log = createLogger({ service: 'tool-gateway' });

/** A started gateway: what a process hosting it beside other services may call (`bosun serve`). */
export interface StartedGateway extends ServiceHandle {
  gateway: ToolGateway;
}

/**
 * Starts the gateway: its connections, the MCP servers and the catalog, the MCP face when
 * configured, and its two ways in, the `tools` queue and NATS requests.
 */
export async function startGateway(env: BosunEnv, options: HostedOptions = {}): Promise<StartedGateway> {
  const config = loadClusterConfig(env.configFile, { resolveOperatorToken: false });
  // The secrets it resolved from the config file (server env and headers, tokens) are never logged.
  addLogSecrets(log, configSecrets(config));
  // Its own connections, or (`bosun serve`) those lent by the process that hosts it.
  const rt = options.runtime ?? (await openRuntime(env, { service: 'tool-gateway', log, retention: config.retention }));
  const gateway = new ToolGateway({ redis: rt.redis, prefix: env.prefix, config, events: rt.events, deadLetters: rt.deadLetters, log });
  const catalog = await gateway.start();
  log.info({ tools: catalog.tools.length, unavailable: Object.keys(catalog.unavailable) }, 'tool catalog published');
  // The gateway's own MCP face, when configured (its token is a secret: never logged).
  let face: McpFace | undefined;
  let faceApprovals: ApprovalStore | undefined;
  const faceConfig = config.gateway.mcpServer;
  if (faceConfig) {
    faceApprovals = new ApprovalStore({ redis: rt.redis, prefix: env.prefix });
    face = await startMcpFace({
      gateway,
      config,
      approvals: faceApprovals,
      events: rt.events,
      log,
      port: faceConfig.port,
      host: faceConfig.host,
      token: faceConfig.token,
    });
    log.info({ host: faceConfig.host, port: face.port, tools: faceConfig.tools, mode: faceConfig.mode }, 'gateway MCP face listening');
  }
  const worker = new Worker(TOOLS_QUEUE, (job) => gateway.process(job), {
    connection: rt.redis,
    prefix: env.prefix,
    name: `gateway-${hostname()}-${process.pid}`,
    concurrency: config.gateway.concurrency,
    lockDuration: config.workers.lockDurationMs,
    stalledInterval: config.workers.stalledIntervalMs,
    maxStalledCount: config.workers.maxStalledCount,
  });
  // A tool job's lock matters less here (the call's record decides what runs), but its losses are counted and logged once per burst.
  const locks = watchWorkerLocks(worker, { queue: TOOLS_QUEUE, log, onError: (err) => log.error({ err }, 'tools worker error') });
  const nats = answerOverNats(rt, gateway, { prefix: env.prefix, concurrency: config.gateway.concurrency, log });
  return {
    gateway,
    async close() {
      await face?.close();
      await nats.close();
      await faceApprovals?.close();
      await worker.close();
      locks.close();
      await gateway.close();
      await rt.close();
    },
  };
}

/** The gateway as a service: `runService(gatewayService)` is its process (main.ts). */
export const gatewayService: RunServiceOptions = {
  name: 'tool-gateway',
  log,
  tracing: () => startTracing('tool-gateway'),
  async check(_args, env) {
    const config = loadClusterConfig(env.configFile, { resolveOperatorToken: false });
    const face = config.gateway.mcpServer;
    if (face && face.token === '') throw new ConfigError(`${env.configFile}: gateway.mcpServer.token is empty after substitution`);
    const connections = await checkRuntime(env, { service: 'tool-gateway' });
    const servers = await checkMcpServers(config, log);
    const faceText = face ? ` (MCP face on ${face.host}:${face.port})` : '';
    return `config ${env.configFile}${faceText}; ${connections}; MCP servers: ${servers.join(', ') || 'none'}`;
  },
  start: (_args, env) => startGateway(env),
};

/**
 * Answers tool calls over NATS too (the callers' default path, docs/durability.md "Tool calls"),
 * from when NATS answers: the runtime may start without it.
 */
function answerOverNats(
  rt: Runtime,
  gateway: ToolGateway,
  options: { prefix: string; concurrency: number; log: Logger },
): { close(): Promise<void> } {
  let responder: ToolCallResponder | undefined;
  let closed = false;
  let retry: NodeJS.Timeout | undefined;
  const attach = () => {
    if (closed) return;
    const nc = rt.nats();
    if (!nc) {
      retry = setTimeout(attach, 1_000);
      return;
    }
    responder = serveToolCalls({ nc, ...options, handle: (data) => gateway.answer(data) });
    options.log.info('answering tool calls over NATS');
  };
  attach();
  return {
    async close() {
      closed = true;
      clearTimeout(retry);
      await responder?.close();
    },
  };
}
