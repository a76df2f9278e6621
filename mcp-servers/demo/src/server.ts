import { appendFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import {
  DEFAULT_LOG_LINES,
  DemoEnvironment,
  DemoEnvironmentError,
  MAX_LOG_LINES,
  METRICS_WINDOWS,
  type Deployment,
  type LogEntry,
  type Pod,
  type ServiceMetrics,
  type ServiceSummary,
} from './environment.js';

/** Name the server reports in its MCP `initialize` answer. */
export const DEMO_SERVER_NAME = 'bosun-demo-mcp';
/** Version the server reports in its MCP `initialize` answer. */
export const DEMO_SERVER_VERSION = '0.1.0';

/** Every tool the demo server registers, in registration order. */
export const DEMO_TOOL_NAMES = [
  'list_services',
  'get_pods',
  'get_logs',
  'get_metrics',
  'get_deployments',
  'restart_pod',
  'rollback_deployment',
] as const;

/** Name of one of the demo server's tools. */
export type DemoToolName = (typeof DEMO_TOOL_NAMES)[number];

/** Test behaviours of {@link createDemoServer}; all off by default. */
export interface DemoServerOptions {
  /** Milliseconds every tool call waits before answering. A cancelled call stops waiting and changes nothing. */
  slowMs?: number;
  /**
   * File to append one JSON line per tool call to, `{ tool, args, pid, at }`, written
   * synchronously when the call reaches its handler, before any delay, so lines survive a kill.
   * Calls the SDK rejects before the handler (unknown tool, arguments failing the input
   * schema) are not recorded.
   */
  callLogPath?: string;
  /** Tools whose calls never answer, until cancelled or the process ends. */
  hangTools?: readonly string[];
  /** Where diagnostics go; defaults to stderr, since stdout is the protocol channel under stdio. */
  log?: (message: string) => void;
}

// ---------------------------------------------------------------------------
// Schemas. Each is checked against the environment's types with `satisfies`, so the
// advertised output schema cannot drift from what the environment returns.
// ---------------------------------------------------------------------------

const serviceArg = z.string().min(1).describe('Service name, as returned by list_services (e.g. "checkout", "payments", "search").');
const podArg = z.string().min(1).describe('Pod name, as returned by get_pods for the service.');

const podSchema = z.object({
  name: z.string(),
  service: z.string(),
  status: z.enum(['Running', 'CrashLoopBackOff']),
  ready: z.boolean(),
  restarts: z.number().int(),
  version: z.string(),
  node: z.string(),
  startedAt: z.string(),
  memoryLimitMi: z.number(),
  lastTermination: z.object({ reason: z.string(), exitCode: z.number().int(), at: z.string() }).nullable(),
}) satisfies z.ZodType<Pod>;

const logEntrySchema = z.object({
  at: z.string(),
  pod: z.string(),
  level: z.enum(['INFO', 'WARN', 'ERROR']),
  source: z.enum(['app', 'kubelet']),
  message: z.string(),
}) satisfies z.ZodType<LogEntry>;

const deploymentSchema = z.object({
  version: z.string(),
  deployedAt: z.string(),
  author: z.string(),
  change: z.string(),
  current: z.boolean(),
  rolledBackAt: z.string().nullable(),
}) satisfies z.ZodType<Deployment>;

const serviceSummarySchema = z.object({
  name: z.string(),
  description: z.string(),
  team: z.string(),
  currentVersion: z.string(),
  podCount: z.number().int(),
  readyPods: z.number().int(),
}) satisfies z.ZodType<ServiceSummary>;

const metricsSchema = z.object({
  service: z.string(),
  window: z.enum(METRICS_WINDOWS),
  asOf: z.string(),
  latencyP50Ms: z.number(),
  latencyP99Ms: z.number(),
  errorRatePercent: z.number(),
  cpuPercent: z.number(),
  memoryPercent: z.number(),
  requestsPerSecond: z.number(),
}) satisfies z.ZodType<ServiceMetrics>;

const READ_ONLY: ToolAnnotations = { readOnlyHint: true, openWorldHint: false };
const DESTRUCTIVE: ToolAnnotations = { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false };

// ---------------------------------------------------------------------------

/** Resolves once `signal` aborts; never otherwise. */
function untilAborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}

function asToolResult(value: object): CallToolResult {
  return {
    content: [{ type: 'text', text: JSON.stringify(value, null, 2) }],
    structuredContent: value as Record<string, unknown>,
  };
}

function asToolError(message: string): CallToolResult {
  return { content: [{ type: 'text', text: message }], isError: true };
}

/**
 * Creates the demo MCP server: an `McpServer` with the seven demo tools registered
 * against `env`, not yet connected to a transport.
 *
 * Read-only tools: `list_services`, `get_pods`, `get_logs`, `get_metrics`,
 * `get_deployments`. Mutating tools: `restart_pod`, `rollback_deployment`.
 * Every answer carries the result both as pretty JSON text and as `structuredContent`
 * matching the tool's `outputSchema`. Unknown services, pods or versions produce a
 * tool error (`isError: true`) whose message names the bad argument.
 *
 * @param env - The simulated environment; a fresh one by default. Pass your own to inspect state from a test.
 * @param options - Test behaviours (delay, call log, hanging tools).
 */
export function createDemoServer(env: DemoEnvironment = new DemoEnvironment(), options: DemoServerOptions = {}): McpServer {
  const log = options.log ?? ((message: string) => process.stderr.write(`[demo-mcp] ${message}\n`));
  const hangTools = new Set(options.hangTools ?? []);
  for (const name of hangTools) {
    if (!(DEMO_TOOL_NAMES as readonly string[]).includes(name)) log(`hangTools names unknown tool "${name}"; ignored`);
  }
  const run = callRunner(options, hangTools, log);

  const server = new McpServer(
    { name: DEMO_SERVER_NAME, version: DEMO_SERVER_VERSION },
    {
      instructions:
        'A simulated production environment (services checkout, payments, search) for incident-response demos. ' +
        'Start with list_services, then get_pods, get_logs, get_metrics and get_deployments. ' +
        'restart_pod and rollback_deployment change the simulated state.',
    },
  );

  registerReadTools(server, env, run);
  registerWriteTools(server, env, run);
  return server;
}

/** Runs one tool call of the demo server (see {@link callRunner}). */
type CallRunner = (
  tool: DemoToolName,
  args: Record<string, unknown>,
  signal: AbortSignal,
  compute: () => object,
) => Promise<CallToolResult>;

/**
 * Wraps one call: records it, applies the test delays, runs `compute`, and turns environment
 * errors into tool errors instead of protocol errors.
 */
function callRunner(options: DemoServerOptions, hangTools: ReadonlySet<string>, log: (message: string) => void): CallRunner {
  const slowMs = options.slowMs ?? 0;
  return async function run(
    tool: DemoToolName,
    args: Record<string, unknown>,
    signal: AbortSignal,
    compute: () => object,
  ): Promise<CallToolResult> {
    if (options.callLogPath !== undefined) {
      const line = JSON.stringify({ tool, args, pid: process.pid, at: new Date().toISOString() });
      try {
        appendFileSync(options.callLogPath, `${line}\n`);
      } catch (error) {
        // A broken call log must not change the answer the client gets; the test reading it will notice.
        log(`could not append to call log ${options.callLogPath}: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    if (hangTools.has(tool)) {
      await untilAborted(signal);
      // The SDK sends nothing for a cancelled request; this only ends the handler.
      throw new Error(`${tool} cancelled`);
    }
    if (slowMs > 0) {
      // Rejects on cancellation, so a cancelled mutation never reaches `compute`.
      await delay(slowMs, undefined, { signal });
    }
    try {
      return asToolResult(compute());
    } catch (error) {
      if (error instanceof DemoEnvironmentError) return asToolError(error.message);
      throw error;
    }
  };
}

/** The read-only tools: services, pods, logs, metrics, deployments. */
function registerReadTools(server: McpServer, env: DemoEnvironment, run: CallRunner): void {
  server.registerTool(
    'list_services',
    {
      title: 'List services',
      description:
        'List every service in the environment with its description, owning team, current deployed version, and how many of its pods are ready.',
      inputSchema: {},
      outputSchema: { services: z.array(serviceSummarySchema) },
      annotations: READ_ONLY,
    },
    async (args, extra) => run('list_services', args, extra.signal, () => env.listServices()),
  );

  server.registerTool(
    'get_pods',
    {
      title: 'Get pods',
      description:
        'List the pods of a service with status (Running or CrashLoopBackOff), readiness, restart count, version, node, start time, memory limit, and the reason of the last container termination (e.g. OOMKilled).',
      inputSchema: { service: serviceArg },
      outputSchema: { service: z.string(), pods: z.array(podSchema) },
      annotations: READ_ONLY,
    },
    async (args, extra) => run('get_pods', args, extra.signal, () => env.getPods(args.service)),
  );

  server.registerTool(
    'get_logs',
    {
      title: 'Get logs',
      description:
        'Return the most recent log lines of a service, oldest first: of one pod if `pod` is given, else of all its pods merged by time. Lines come from the application and from the kubelet (container terminations, back-offs).',
      inputSchema: {
        service: serviceArg,
        pod: podArg.optional().describe('Pod name, as returned by get_pods; omit to merge every pod of the service.'),
        lines: z
          .number()
          .int()
          .min(1)
          .max(MAX_LOG_LINES)
          .default(DEFAULT_LOG_LINES)
          .describe(`How many recent lines to return (1-${MAX_LOG_LINES}, default ${DEFAULT_LOG_LINES}).`),
      },
      outputSchema: { service: z.string(), pod: z.string().nullable(), lines: z.array(logEntrySchema) },
      annotations: READ_ONLY,
    },
    async (args, extra) => run('get_logs', args, extra.signal, () => env.getLogs(args.service, args.pod, args.lines)),
  );

  server.registerTool(
    'get_metrics',
    {
      title: 'Get metrics',
      description:
        'Return service metrics over a window: latency p50 and p99 (ms), error rate (%), CPU and memory use (% of limit) and request rate.',
      inputSchema: {
        service: serviceArg,
        window: z.enum(METRICS_WINDOWS).default('1h').describe('Aggregation window: "5m", "1h" (default) or "24h".'),
      },
      outputSchema: metricsSchema.shape,
      annotations: READ_ONLY,
    },
    async (args, extra) => run('get_metrics', args, extra.signal, () => env.getMetrics(args.service, args.window)),
  );

  server.registerTool(
    'get_deployments',
    {
      title: 'Get deployments',
      description:
        'Return the deployment history of a service, newest first, with version, time, author, change summary, which version is current, and when a version was rolled back.',
      inputSchema: { service: serviceArg },
      outputSchema: { service: z.string(), currentVersion: z.string(), deployments: z.array(deploymentSchema) },
      annotations: READ_ONLY,
    },
    async (args, extra) => run('get_deployments', args, extra.signal, () => env.getDeployments(args.service)),
  );
}

/** The mutating tools: restart a pod, roll a deployment back. */
function registerWriteTools(server: McpServer, env: DemoEnvironment, run: CallRunner): void {
  server.registerTool(
    'restart_pod',
    {
      title: 'Restart pod',
      description:
        'Restart one pod of a service. The pod comes back Running and ready with its restart count reset. This does not fix the cause of a crash; check logs and deployments first.',
      inputSchema: {
        service: serviceArg,
        pod: podArg,
        reason: z.string().max(500).optional().describe('Why the pod is restarted; recorded in the call log for audit.'),
      },
      outputSchema: {
        service: z.string(),
        pod: podSchema,
        previousStatus: podSchema.shape.status,
        previousRestarts: z.number().int(),
        at: z.string(),
      },
      annotations: DESTRUCTIVE,
    },
    async (args, extra) => run('restart_pod', args, extra.signal, () => env.restartPod(args.service, args.pod)),
  );

  server.registerTool(
    'rollback_deployment',
    {
      title: 'Roll back deployment',
      description:
        'Roll a service back (or forward) to a version from its deployment history. Every pod is replaced by a fresh Running pod on that version. Rolling to the current version changes nothing and reports changed: false.',
      inputSchema: {
        service: serviceArg,
        toVersion: z.string().min(1).describe('Target version label from get_deployments, e.g. "v41".'),
      },
      outputSchema: {
        service: z.string(),
        fromVersion: z.string(),
        toVersion: z.string(),
        changed: z.boolean(),
        at: z.string(),
        pods: z.array(podSchema),
      },
      annotations: DESTRUCTIVE,
    },
    async (args, extra) => run('rollback_deployment', args, extra.signal, () => env.rollbackDeployment(args.service, args.toVersion)),
  );
}
