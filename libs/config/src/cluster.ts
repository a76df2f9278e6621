import { BudgetLimits, Budgets, PriceTable } from './budgets.js';
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { z } from 'zod';
import { parse as parseYaml } from 'yaml';
import { AGENT_NAME_PATTERN, BosunError, describeIssues, isSecretKey, errorMessage } from '@bosun/contract';
import { checkOutputSchema } from './output-schema.js';
import { normalizeHost, normalizeOrigin } from './http-origin.js';
import { IntakeConfigSchema } from './intake.js';
import { DeliveryConfigSchema } from './delivery.js';
import { A2aConfig, RemoteA2aAgent } from './a2a.js';
import { ConsoleConfigSchema } from './console.js';
import { DEFAULT_RETENTION, RetentionConfigSchema, retentionProblem } from './retention.js';
import { OperatorsConfig } from './operators.js';

/** One `${NAME}` or `${NAME:-default}` placeholder. */
const PLACEHOLDER = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

/** A number or boolean field written as a `${VAR}` placeholder, until {@link resolveScalars} resolves it. */
class ScalarPlaceholder {
  constructor(
    readonly text: string,
    readonly schema: z.ZodType,
    readonly kind: 'number' | 'boolean',
  ) {}
}

/**
 * A number or boolean field that also takes a string with `${VAR}` placeholders. The schema
 * check keeps such a string aside; {@link resolveScalars} substitutes it afterwards (in the
 * services that resolve that field), converts it and checks it against `schema`. Any other
 * value is checked against `schema` as usual, with its usual messages.
 */
function substitutable<T extends z.ZodNumber | z.ZodBoolean>(schema: T): T {
  const kind = schema instanceof z.ZodBoolean ? 'boolean' : 'number';
  // Typed as the plain schema: no placeholder survives parseClusterConfig in a service that resolves the field.
  return z.unknown().transform((value, ctx) => {
    if (typeof value === 'string' && new RegExp(PLACEHOLDER.source).test(value)) return new ScalarPlaceholder(value, schema, kind);
    const checked = schema.safeParse(value);
    if (checked.success) return checked.data;
    for (const issue of checked.error.issues) ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path, input: value });
    return z.NEVER;
  }) as unknown as T;
}

/** A planned tool call of the offline fake model. */
const FakeCall = z.object({
  tool: z.string().min(1),
  args: z.record(z.string(), z.unknown()).default({}),
});

/**
 * Which model an agent uses. `auto`: Gemini when `GEMINI_API_KEY` is set, otherwise the fake;
 * `openai`: an OpenAI-compatible endpoint (OpenAI, Azure OpenAI, Ollama, vLLM) with `OPENAI_API_KEY`;
 * `anthropic`: Anthropic's Messages API with `ANTHROPIC_API_KEY`.
 */
const ModelFields = {
  provider: z.enum(['auto', 'fake', 'gemini', 'openai', 'anthropic']).default('auto'),
  /** Model name (for Azure OpenAI: the deployment name). */
  name: z.string().default('gemini-2.5-flash'),
  /** API base URL: the provider's when omitted (tests point it at a local server). */
  baseUrl: z.string().url().optional(),
  /** `openai`: ask for JSON matching the answer's schema (`response_format`); off for endpoints that reject it. */
  structuredOutput: z.boolean().default(true),
  timeoutMs: substitutable(z.number().int().positive()).default(60_000),
  /**
   * The model's context window in tokens: each request is fitted into it (docs/models.md#the-context-budget).
   * Default: the known window of the model's name (32,768 for a name Bosun does not know); the fake has none unless set.
   */
  contextTokens: substitutable(z.number().int().min(1024)).optional(),
  /** `anthropic`: `max_tokens` of each answer (default 8192). */
  maxOutputTokens: substitutable(z.number().int().positive()).optional(),
  /** `anthropic`: extended thinking with this `budget_tokens` (at least 1024, below `maxOutputTokens`); off when absent. */
  thinkingBudgetTokens: substitutable(z.number().int().min(1024)).optional(),
  /** `anthropic`: cache the stable prefix (system and tools) with `cache_control` breakpoints (default true). */
  promptCaching: z.boolean().default(true),
  /** `fake`: the provider whose recorded context-length error the fake answers an over-limit request with (default openai). */
  fakeContextError: z.enum(['openai', 'gemini', 'anthropic']).optional(),
  /** The fake model's simulated latency per call (benchmarks); ignored by real providers. */
  latencyMs: substitutable(z.number().int().nonnegative().max(600_000)).default(0),
  /** Retries of a failing call (429, 5xx, timeouts, connection errors): tries, first backoff, longest wait. */
  retry: z
    .object({
      attempts: z.number().int().min(1).max(20).optional(),
      baseDelayMs: z.number().int().positive().optional(),
      maxDelayMs: z.number().int().positive().optional(),
    })
    .strict()
    .optional(),
};
const ModelSpec = z
  .object({
    ...ModelFields,
    /** The model used when this one keeps failing (same fields, without a fallback of its own). */
    fallback: z.object(ModelFields).strict().optional(),
  })
  .strict();

/** What a tool may do: `allow` runs, `ask` needs an operator's approval, `off` is never offered. */
const ToolStateSchema = z.enum(['allow', 'ask', 'off']);
/**
 * Who must approve a call of an `ask` tool: `required` distinct people (1 to 5), and with
 * `distinctFrom: requester` none of them the person who started the run (docs/approvals.md).
 */
const ApprovalsPolicy = z
  .object({
    required: z.number().int().min(1).max(5),
    distinctFrom: z.enum(['requester', 'none']).default('none'),
  })
  .strict();
const ToolPolicy = z.union([
  ToolStateSchema,
  z
    .object({
      state: ToolStateSchema,
      approvalTimeoutMs: substitutable(z.number().int().positive()).optional(),
      /** This tool's approval rule; default the server's `approvals`, else one person. */
      approvals: ApprovalsPolicy.optional(),
    })
    .strict(),
]);
/** Policy fields every MCP server entry takes. */
const serverPolicy = {
  /** The state of this server's tools unless `tools` says otherwise. Default `allow`. */
  capability: ToolStateSchema.default('allow'),
  /** The approval rule of this server's `ask` tools unless a tool's entry says otherwise; default one person. */
  approvals: ApprovalsPolicy.optional(),
  /** Per-tool states, by the tool's name on its server. */
  tools: z.record(z.string(), ToolPolicy).default({}),
  /** Per-call timeout for this server; default `gateway.callTimeoutMs`. */
  timeoutMs: substitutable(z.number().int().positive()).optional(),
};

const McpServerStdio = z
  .object({
    ...serverPolicy,
    transport: z.literal('stdio'),
    command: z.string().min(1),
    args: z.array(z.string()).default([]),
    /** Environment of the server process, with `${VAR}` substitution. Values are secrets: never logged. */
    env: z.record(z.string(), z.string()).default({}),
    /** Working directory; relative paths are resolved against the config file's folder. */
    cwd: z.string().optional(),
  })
  .strict();

const McpServerHttp = z
  .object({
    ...serverPolicy,
    transport: z.literal('http'),
    url: z.string().url(),
    /** Request headers, with `${VAR}` substitution. Values are secrets: never logged. */
    headers: z.record(z.string(), z.string()).default({}),
  })
  .strict();

const McpServer = z.discriminatedUnion('transport', [McpServerStdio, McpServerHttp]);

const Specialist = z
  .object({
    description: z.string().min(1),
    /** System instruction; a default for unattended task agents is used when absent. */
    instruction: z.string().optional(),
    /** Catalog tools this specialist may use: exact names or `server__*` patterns. */
    tools: z.array(z.string().min(1)).default([]),
    /** `read-only`: only tools annotated `readOnlyHint: true` are offered or run. Default `read-write`. */
    mode: z.enum(['read-only', 'read-write']).default('read-write'),
    /** How long a call to an `ask` tool waits for an operator before it counts as denied (`timeout`). */
    approvalTimeoutMs: substitutable(z.number().int().positive()).default(300_000),
    /**
     * In-band tool routing: the model first sees tool groups and a `load_tools` tool, and loads
     * what it needs. Groups default to one per MCP server.
     */
    routing: z
      .object({
        enabled: substitutable(z.boolean()).default(false),
        /** Group name → tool patterns (`server__tool` or `server__*`). */
        groups: z.record(z.string().regex(/^[a-z][a-z0-9_-]{0,31}$/), z.array(z.string().min(1))).default({}),
        /** Groups loaded from the start. */
        alwaysOn: z.array(z.string()).default([]),
      })
      .strict()
      .default({ enabled: false, groups: {}, alwaysOn: [] }),
    /** JSON Schema of the output it reports with `finish_task`. */
    outputSchema: z.record(z.string(), z.unknown()),
    /**
     * What `finish_task` is given on the agent's behalf when it stalls. Any string value
     * `${stallText}` is replaced by the stall text. When absent, one is derived from the
     * schema if that is possible without inventing content (see docs/configuration.md).
     */
    stallPayload: z.record(z.string(), z.unknown()).optional(),
    /** Most tool rounds before the model is asked to finish. */
    maxToolRounds: substitutable(z.number().int().positive().max(100)).default(10),
    /** How many invalid `finish_task` outputs are fed back before the task fails. */
    maxInvalidOutputs: substitutable(z.number().int().nonnegative().max(10)).default(2),
    /** Tasks one specialist process runs at once for this specialist. */
    concurrency: substitutable(z.number().int().positive().max(10_000)).default(50),
    /** Time a delegation may take, from when it is handed out, before it becomes an INCOMPLETE `timeout` result. */
    deadlineMs: substitutable(z.number().int().positive()).default(600_000),
    /** Retries of a task that failed (exponential backoff from 1 s); after the last, an INCOMPLETE `failure` result. */
    retries: substitutable(z.number().int().nonnegative().max(20)).default(2),
    model: ModelSpec.default({
      provider: 'auto',
      name: 'gemini-2.5-flash',
      timeoutMs: 60_000,
      latencyMs: 0,
      structuredOutput: true,
      promptCaching: true,
    }),
    /** The fake model's plan when the incident gives none (`payload.fake.calls`). */
    fakePlan: z.array(FakeCall).default([]),
    /** This specialist's task limits, over `budgets.task`. */
    budget: BudgetLimits.optional(),
    /** `task`: one tool call per model turn (the default); `codeact`: one script per turn that calls tools (docs/codeact.md). */
    loop: z.enum(['task', 'codeact']).default('task'),
    /** The sandbox limits of a `codeact` specialist, per script. */
    codeact: z
      .object({
        timeMs: substitutable(z.number().int().positive().max(600_000)).default(5_000),
        memoryMb: substitutable(z.number().int().positive().max(1024)).default(64),
        stackKb: substitutable(z.number().int().positive().max(1024)).default(128),
        maxToolCalls: substitutable(z.number().int().positive().max(1000)).default(50),
        maxOutputChars: substitutable(z.number().int().positive().max(10_000_000)).default(262_144),
        maxConsoleChars: substitutable(z.number().int().positive().max(10_000_000)).default(65_536),
      })
      .strict()
      .default({ timeMs: 5_000, memoryMb: 64, stackKb: 128, maxToolCalls: 50, maxOutputChars: 262_144, maxConsoleChars: 65_536 }),
    /** A remote A2A agent does this specialist's work (docs/a2a.md#remote-a2a-agents-as-specialists); off when absent. */
    a2a: RemoteA2aAgent.optional(),
  })
  .strict();

const Coordinator = z
  .object({
    /** `route`: a one-shot classifier picks specialists; `delegate`: a chat model delegates in rounds. */
    mode: z.enum(['route', 'delegate']).default('route'),
    instruction: z.string().optional(),
    /** Incident `reason` → specialists. */
    routes: z.record(z.string(), z.array(z.string())).default({}),
    /** Specialists for a reason no route names. */
    defaultRoute: z.array(z.string()).default([]),
    /** Most delegation rounds in `delegate` mode. */
    maxRounds: substitutable(z.number().int().positive().max(20)).default(4),
    /** Incidents one coordinator process handles at once. */
    concurrency: substitutable(z.number().int().positive().max(10_000)).default(50),
    /** Time a run may take; at it the run ends `partial` with what it has. */
    runDeadlineMs: substitutable(z.number().int().positive()).default(1_800_000),
    /** The operators' HTTP API (`GET /approvals`, `POST /approvals/<id>`); off when absent. */
    http: z
      .object({
        port: substitutable(z.number().int().min(0).max(65535)),
        host: z.string().default('127.0.0.1'),
        /** Bearer token operators present. A secret: use `${ENV}`; never logged. */
        operatorToken: z.string().min(1),
      })
      .strict()
      .optional(),
    model: ModelSpec.default({
      provider: 'auto',
      name: 'gemini-2.5-flash',
      timeoutMs: 60_000,
      latencyMs: 0,
      structuredOutput: true,
      promptCaching: true,
    }),
  })
  .strict();

const Gateway = z
  .object({
    /** Tool calls one gateway process runs at once. */
    concurrency: substitutable(z.number().int().positive().max(10_000)).default(64),
    /**
     * How specialists send tool calls to the gateways: `nats` (request/reply to the gateways'
     * queue group, the queue as fallback) or `queue` (one BullMQ job per call). The gateways
     * answer both. docs/durability.md, "Tool calls".
     */
    transport: z.enum(['nats', 'queue']).default('nats'),
    /** Per-call timeout. */
    callTimeoutMs: substitutable(z.number().int().positive()).default(60_000),
    /** Results longer than this many characters are truncated with an explicit marker. */
    maxResultChars: substitutable(z.number().int().positive()).default(100_000),
    /**
     * The gateway's own MCP face (Streamable HTTP): the policy-enforced tools for any MCP client,
     * under the same policy, approvals and audit. Off when absent.
     */
    mcpServer: z
      .object({
        port: substitutable(z.number().int().min(0).max(65535)),
        host: z.string().default('127.0.0.1'),
        /** Bearer token clients present. A secret: use `${ENV}`; never logged. */
        token: z.string().min(1),
        /** Tools offered: patterns as for specialists. */
        tools: z.array(z.string().min(1)).default([]),
        /**
         * `Host` values accepted (DNS-rebinding protection), as `name[:port]`. Default: localhost,
         * 127.0.0.1, [::1] and a non-wildcard `host`, each with the face's port.
         */
        allowedHosts: z
          .array(z.string().refine((v) => normalizeHost(v) !== undefined, 'must be a Host value: name[:port] or [v6][:port]'))
          .optional(),
        /** `Origin` values accepted, as `http(s)://host[:port]`. Default: `http://` and each default host. A request without `Origin` passes. */
        allowedOrigins: z
          .array(z.string().refine((v) => normalizeOrigin(v) !== undefined, 'must be an origin: http(s)://host[:port]'))
          .optional(),
        mode: z.enum(['read-only', 'read-write']).default('read-write'),
        approvalTimeoutMs: substitutable(z.number().int().positive()).default(300_000),
      })
      .strict()
      .optional(),
  })
  .strict();

/**
 * How BullMQ notices a dead worker. A job whose worker stops renewing its lock for
 * `lockDurationMs` is moved back to waiting at the next stalled check (every
 * `stalledIntervalMs`) and resumed elsewhere from its checkpoint; after `maxStalledCount`
 * such losses it fails for good and becomes an INCOMPLETE result.
 */
const Workers = z
  .object({
    lockDurationMs: substitutable(z.number().int().min(1_000)).default(10_000),
    stalledIntervalMs: substitutable(z.number().int().min(500)).default(5_000),
    // At least 1: a lost job must come back once, or a tool call lost mid-flight could never be found in doubt.
    maxStalledCount: substitutable(z.number().int().min(1).max(100)).default(2),
  })
  .strict();

const ClusterConfigSchema = z
  .object({
    coordinator: Coordinator.default({
      mode: 'route',
      routes: {},
      defaultRoute: [],
      maxRounds: 4,
      concurrency: 50,
      runDeadlineMs: 1_800_000,
      model: { provider: 'auto', name: 'gemini-2.5-flash', timeoutMs: 60_000, latencyMs: 0, structuredOutput: true, promptCaching: true },
    }),
    specialists: z.record(z.string().regex(AGENT_NAME_PATTERN, 'specialist names must match [a-z][a-z0-9-]*'), Specialist),
    mcpServers: z.record(z.string().regex(/^[a-z][a-z0-9-]{0,31}$/, 'server names must match [a-z][a-z0-9-]*'), McpServer).default({}),
    gateway: Gateway.default({ concurrency: 64, transport: 'nats', callTimeoutMs: 60_000, maxResultChars: 100_000 }),
    workers: Workers.default({ lockDurationMs: 10_000, stalledIntervalMs: 5_000, maxStalledCount: 2 }),
    /** The alert intake (`services/intake`, docs/intake-and-delivery.md); off when absent. */
    intake: IntakeConfigSchema.optional(),
    /** Deliveries of run results to webhooks and Slack (docs/intake-and-delivery.md); off when absent. */
    delivery: DeliveryConfigSchema.optional(),
    /** Default limits of every task and of every run (see docs/configuration.md#budgets). */
    budgets: Budgets.default({}),
    /** Model prices, for the estimated cost in usage and `costUsd` budgets. */
    prices: PriceTable.default({}),
    /** Cluster-wide rate limits, by the model's name as Bosun shows it (`openai:gpt-4.1-mini`). */
    rateLimits: z
      .record(
        z.string().min(1),
        z
          .object({
            requests: z.number().int().positive().optional(),
            tokens: z.number().int().positive().optional(),
            windowMs: z.number().int().positive().default(60_000),
            concurrency: z.number().int().positive().optional(),
          })
          .strict(),
      )
      .default({}),
    /** The A2A server (`services/a2a`); off when absent. */
    a2a: A2aConfig.optional(),
    /** The operator console's login (docs/approvals.md#openid-connect-login); the shared token only when absent. */
    console: ConsoleConfigSchema.default({ allowTokenLogin: false }),
    /** How long each kind of data a run leaves is kept (docs/configuration.md#retention). */
    retention: RetentionConfigSchema.default(DEFAULT_RETENTION),
    /** The people who decide, with their token hashes and roles (docs/approvals.md#identities). */
    operators: OperatorsConfig,
  })
  .strict();

/** The parsed cluster config. */
export type ClusterConfig = z.output<typeof ClusterConfigSchema>;
/** One specialist's config. */
export type SpecialistConfig = z.output<typeof Specialist>;
/** One MCP server's config. */
export type McpServerConfig = z.output<typeof McpServer>;
/** Worker (stalled-job) settings. */
export type WorkersConfig = z.output<typeof Workers>;
/** Model selection of one agent. */
export type ModelSpec = z.output<typeof ModelSpec>;
/** A planned call of the fake model. */
export type FakeCall = z.output<typeof FakeCall>;

/** A config file with a mistake. The message names the file and the field. */
export class ConfigError extends BosunError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('invalid_config', message, options);
    this.name = 'ConfigError';
  }
}

/**
 * Replaces `${NAME}` with the value of the environment variable NAME, or `${NAME:-default}` with
 * the default when NAME is unset. A missing variable without a default is an error naming the
 * field, never an empty string that fails later.
 */
function substitute(value: string, env: NodeJS.ProcessEnv, field: string, file: string): string {
  return value.replace(PLACEHOLDER, (_, name: string, fallback: string | undefined) => {
    const v = env[name];
    if (v !== undefined) return v;
    if (fallback !== undefined) return fallback;
    throw new ConfigError(`${file}: ${field}: environment variable ${name} is not set`);
  });
}

/**
 * Whether this service resolves the placeholders of a number or boolean field at `path`: the
 * fields of `gateway.mcpServer` only in the gateway, those of `coordinator.http` only in the
 * coordinator (as their tokens), every other one in every service (any of them may read it).
 */
function resolvesScalarAt(path: readonly string[], options: ParseOptions): boolean {
  if (path[0] === 'gateway' && path[1] === 'mcpServer') return options.resolveServers !== false;
  if (path[0] === 'coordinator' && path[1] === 'http') return options.resolveOperatorToken !== false;
  return true;
}

/**
 * Replaces every {@link ScalarPlaceholder} in the parsed config: substituted, converted and
 * checked where this service resolves it, left as written (the string) where it does not. A
 * value taken from the environment is never printed: it may be a secret put there by mistake.
 */
function resolveScalars(node: unknown, path: string[], options: ParseOptions, env: NodeJS.ProcessEnv): void {
  if (!node || typeof node !== 'object') return;
  for (const [key, value] of Object.entries(node)) {
    const at = [...path, key];
    if (!(value instanceof ScalarPlaceholder)) {
      resolveScalars(value, at, options, env);
      continue;
    }
    (node as Record<string, unknown>)[key] = resolvesScalarAt(at, options)
      ? resolveScalar(value, at.join('.'), options.file, env)
      : value.text;
  }
}

function resolveScalar(placeholder: ScalarPlaceholder, field: string, file: string, env: NodeJS.ProcessEnv): number | boolean {
  const text = substitute(placeholder.text, env, field, file).trim();
  const fromEnv = [...placeholder.text.matchAll(PLACEHOLDER)].map((m) => m[1]!).filter((name) => env[name] !== undefined);
  const source = fromEnv.length > 0 ? `environment variable ${fromEnv.join(', ')}; its value is not shown` : `"${text}"`;
  let value: number | boolean | undefined;
  if (placeholder.kind === 'number') value = /^-?\d+(\.\d+)?$/.test(text) ? Number(text) : undefined;
  else value = /^true$/i.test(text) ? true : /^false$/i.test(text) ? false : undefined;
  if (value === undefined) {
    throw new ConfigError(
      `${file}: ${field}: ${placeholder.text} must give ${placeholder.kind === 'number' ? 'a number' : 'true or false'} (${source})`,
    );
  }
  const checked = placeholder.schema.safeParse(value);
  if (!checked.success) {
    throw new ConfigError(`${file}: ${field}: ${placeholder.text}: ${checked.error.issues.map((i) => i.message).join('; ')} (${source})`);
  }
  return checked.data as number | boolean;
}

/**
 * Parses and checks a cluster config: the schema, then the references between its parts
 * (routes name known specialists, tool patterns name known servers, output schemas compile,
 * a stall payload can be built for every specialist).
 */
/** Options of {@link parseClusterConfig}. */
export interface ParseOptions {
  /** The file the config came from (for messages and relative paths). */
  file: string;
  /** Environment for `${VAR}` substitution; default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /**
   * Substitute `${VAR}` in the MCP servers' env, args and headers and in `gateway.mcpServer`
   * (default true). Only the gateway needs those values — and their secrets — so the other
   * services pass false, and get those fields as written (a placeholder stays a string, even
   * in a number field): they must not read them.
   */
  resolveServers?: boolean;
  /**
   * Substitute `${VAR}` in `coordinator.http` (default true; only the coordinator needs it).
   * With false, its fields stay as written, as with {@link resolveServers}.
   */
  resolveOperatorToken?: boolean;
}

export function parseClusterConfig(raw: unknown, options: ParseOptions): ClusterConfig {
  const { file } = options;
  const env = options.env ?? process.env;
  // A `__proto__` key would be dropped silently while parsing (it names the prototype, not an entry).
  const proto = protoKeyPath(raw);
  if (proto !== undefined) throw new ConfigError(`${file}: ${proto}: "__proto__" cannot be used as a name`);
  const parsed = ClusterConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const { issues } = describeIssues(parsed.error);
    throw new ConfigError(`${file}: ${issues.join('; ')}`);
  }
  const config = parsed.data;
  resolveScalars(config, [], options, env);
  checkPeople(config, file);
  const retention = retentionProblem(config.retention, config.coordinator.runDeadlineMs);
  if (retention) throw new ConfigError(`${file}: ${retention}`);
  const names = Object.keys(config.specialists);
  if (names.length === 0) throw new ConfigError(`${file}: specialists: at least one specialist is required`);
  if (names.includes('mcp-client'))
    throw new ConfigError(`${file}: specialists.mcp-client: the name is reserved for clients of the gateway's MCP face`);
  for (const [reason, targets] of Object.entries(config.coordinator.routes)) {
    for (const t of targets) {
      if (!specialistConfig(config, t)) {
        throw new ConfigError(`${file}: coordinator.routes.${reason}: unknown specialist "${t}" (known: ${names.join(', ')})`);
      }
    }
  }
  for (const t of config.coordinator.defaultRoute) {
    if (!specialistConfig(config, t)) {
      throw new ConfigError(`${file}: coordinator.defaultRoute: unknown specialist "${t}" (known: ${names.join(', ')})`);
    }
  }
  const servers = Object.keys(config.mcpServers);
  const baseDir = dirname(resolve(file));
  for (const [name, server] of Object.entries(config.mcpServers)) {
    if (options.resolveServers === false) continue;
    if (server.transport === 'stdio') {
      for (const [k, v] of Object.entries(server.env)) server.env[k] = substitute(v, env, `mcpServers.${name}.env.${k}`, file);
      server.args = server.args.map((a, i) => substitute(a, env, `mcpServers.${name}.args.${i}`, file));
      server.cwd = resolve(baseDir, server.cwd ?? '.');
    } else {
      for (const [k, v] of Object.entries(server.headers)) {
        server.headers[k] = substitute(v, env, `mcpServers.${name}.headers.${k}`, file);
      }
    }
  }
  if (options.resolveServers !== false && config.gateway.mcpServer) {
    config.gateway.mcpServer.token = substitute(config.gateway.mcpServer.token, env, 'gateway.mcpServer.token', file);
  }
  if (options.resolveOperatorToken !== false && config.coordinator.http) {
    config.coordinator.http.operatorToken = substitute(config.coordinator.http.operatorToken, env, 'coordinator.http.operatorToken', file);
  }
  const checkPattern = (pattern: string, field: string) => {
    const server = pattern.split('__')[0] ?? '';
    if (!pattern.includes('__') || !servers.includes(server)) {
      throw new ConfigError(
        `${file}: ${field}: "${pattern}" must be "<server>__<tool>" or "<server>__*" with a server from mcpServers (known: ${servers.join(', ') || 'none'})`,
      );
    }
  };
  for (const [i, pattern] of (config.gateway.mcpServer?.tools ?? []).entries()) checkPattern(pattern, `gateway.mcpServer.tools.${i}`);
  for (const [name, spec] of Object.entries(config.specialists)) {
    for (const [group, patterns] of Object.entries(spec.routing.groups)) {
      for (const [i, pattern] of patterns.entries()) checkPattern(pattern, `specialists.${name}.routing.groups.${group}.${i}`);
    }
    for (const g of spec.routing.alwaysOn) {
      const known = Object.keys(spec.routing.groups).length > 0 ? Object.keys(spec.routing.groups) : servers;
      if (!known.includes(g))
        throw new ConfigError(`${file}: specialists.${name}.routing.alwaysOn: unknown group "${g}" (known: ${known.join(', ')})`);
    }
    for (const [i, pattern] of spec.tools.entries()) checkPattern(pattern, `specialists.${name}.tools.${i}`);
    try {
      checkOutputSchema(name, spec);
    } catch (err) {
      throw new ConfigError(`${file}: specialists.${name}: ${errorMessage(err)}`, { cause: err });
    }
  }
  return deepFreeze(config);
}

/**
 * Every `a2a.tokens[].person` names one of the config's `operators`; so does every name a Slack
 * app sink maps a user to, when the config names operators (their roles then decide who may
 * approve in Slack, and a name outside them would hold none).
 */
function checkPeople(config: ClusterConfig, file: string): void {
  const people = config.operators.map((o) => o.name);
  const known = `(known: ${people.join(', ') || 'none'})`;
  for (const [i, t] of (config.a2a?.tokens ?? []).entries()) {
    if (t.person !== undefined && !people.includes(t.person))
      throw new ConfigError(`${file}: a2a.tokens.${i}.person: unknown operator "${t.person}" ${known}`);
  }
  if (people.length === 0) return;
  for (const [name, sink] of Object.entries(config.delivery?.sinks ?? {})) {
    if (sink.type !== 'slack') continue;
    for (const map of ['users', 'emails'] as const)
      for (const [key, person] of Object.entries(sink[map]))
        if (!people.includes(person))
          throw new ConfigError(`${file}: delivery.sinks.${name}.${map}.${key}: unknown operator "${person}" ${known}`);
  }
}

/** Reads, parses and checks a YAML (or JSON) cluster config file. */
export function loadClusterConfig(file: string, options: Omit<ParseOptions, 'file'> = {}): ClusterConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read config file ${file}: ${errorMessage(err)}`, { cause: err });
  }
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new ConfigError(`${file}: not valid YAML: ${errorMessage(err)}`, { cause: err });
  }
  return parseClusterConfig(raw, { file, ...options });
}

/** The path of the first own `__proto__` key in a parsed YAML/JSON value, or undefined. */
function protoKeyPath(value: unknown, path = ''): string | undefined {
  if (!value || typeof value !== 'object') return undefined;
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    const here = path ? `${path}.${k}` : k;
    if (k === '__proto__') return here;
    const found = protoKeyPath(v, here);
    if (found !== undefined) return found;
  }
  return undefined;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value as Record<string, unknown>)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/**
 * A configured specialist by name, or undefined. Names come from outside (routes, a model's
 * reply, job data, command lines): only the config's own entries count, never a property every
 * object has (`constructor`, `toString`, `__proto__`).
 */
export function specialistConfig(config: ClusterConfig, name: string): SpecialistConfig | undefined {
  return Object.hasOwn(config.specialists, name) ? config.specialists[name] : undefined;
}

/** A configured MCP server by name, or undefined (own entries only, as {@link specialistConfig}). */
export function mcpServerConfig(config: ClusterConfig, name: string): McpServerConfig | undefined {
  return Object.hasOwn(config.mcpServers, name) ? config.mcpServers[name] : undefined;
}

/**
 * The secret values a parsed config holds, for the logger ({@link addLogSecrets}): the MCP
 * servers' `env` and `headers` values under secret-looking names (`API_KEY`, `Authorization`, …),
 * `gateway.mcpServer.token` and `coordinator.http.operatorToken`, as far as this service
 * resolved them.
 */
export function configSecrets(config: ClusterConfig): string[] {
  const out: string[] = [];
  for (const server of Object.values(config.mcpServers)) {
    const named = server.transport === 'stdio' ? server.env : server.headers;
    for (const [k, v] of Object.entries(named)) if (isSecretKey(k)) out.push(v);
  }
  if (config.gateway.mcpServer) out.push(config.gateway.mcpServer.token);
  if (config.coordinator.http) out.push(config.coordinator.http.operatorToken);
  // An unresolved `${VAR}` is a placeholder, not a secret.
  return out.filter((v) => !/^\$\{[^}]+\}$/.test(v));
}
