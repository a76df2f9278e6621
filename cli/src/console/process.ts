/**
 * The console process's set-up: its login (BOSUN_CONSOLE_TOKEN, and/or OpenID Connect from the
 * config's `console.oidc`), its connections
 * (NATS for the event streams, Redis for runs, approvals and dead letters) and its HTTP server.
 * `main.ts` runs it as a service (health port, ready line, graceful stop).
 */
import {
  ConfigError,
  addLogSecrets,
  loadClusterConfig,
  resolveOidcSecret,
  type BosunEnv,
  type ConsoleConfig,
  type Logger,
  type OidcSettings,
} from '@bosun/config';
import { ApprovalStore, EventPublisher, RunControl, connectNats, createRedis, ensureRunsStream, waitForRedis } from '@bosun/transport';
import { OidcLogin } from './oidc.js';
import { startConsole } from './server.js';

/** The console's port by default (the intake has 8090, A2A 8091). */
export const CONSOLE_PORT = 8092;

/** The token variable; the console does not start without it. */
export const CONSOLE_TOKEN_ENV = 'BOSUN_CONSOLE_TOKEN';

/** The operator token; a {@link ConfigError} saying why the console does not start when it is not set. */
export function consoleToken(vars: NodeJS.ProcessEnv = process.env): string {
  const token = vars[CONSOLE_TOKEN_ENV] ?? '';
  if (token.trim() === '')
    throw new ConfigError(
      `${CONSOLE_TOKEN_ENV} is not set: the console does not start without an operator token ` +
        '(set it to a long random secret; operators log in with it)',
    );
  return token;
}

/** How people log in to a console: the operator token (undefined: token login off) and OpenID Connect (absent: off). */
export interface LoginPlan {
  token: string | undefined;
  oidc?: OidcSettings & { redirectUrl: string };
  /** BOSUN_CONSOLE_TOKEN is set but token login is off: it is not used. */
  tokenIgnored: boolean;
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1']);

/**
 * The console's logins from its config section and environment: without `oidc` the token is
 * required (as always); with `oidc` the token is used only when `allowTokenLogin` is true (and
 * then required). The client secret is resolved here, and only here.
 * @throws ConfigError naming the setting that is missing or wrong.
 */
export function loginPlan(
  section: ConsoleConfig,
  listen: { host: string; port: number },
  vars: NodeJS.ProcessEnv = process.env,
): LoginPlan {
  if (!section.oidc) return { token: consoleToken(vars), tokenIgnored: false };
  let oidc: OidcSettings;
  try {
    oidc = resolveOidcSecret(section.oidc, vars);
  } catch (err) {
    throw new ConfigError((err as Error).message, { cause: err });
  }
  let redirectUrl = oidc.redirectUrl;
  if (redirectUrl === undefined) {
    if (!LOOPBACK.has(listen.host) || listen.port === 0)
      throw new ConfigError(
        `console.oidc.redirectUrl: required when the console listens on ${listen.host}:${listen.port} ` +
          '(the URL of its /auth/callback as browsers reach it, e.g. https://console.example/auth/callback, registered at the provider)',
      );
    redirectUrl = `http://127.0.0.1:${listen.port}/auth/callback`;
  }
  const token = section.allowTokenLogin ? consoleToken(vars) : undefined;
  const tokenIgnored = !section.allowTokenLogin && (vars[CONSOLE_TOKEN_ENV] ?? '').trim() !== '';
  return { token, oidc: { ...oidc, redirectUrl }, tokenIgnored };
}

/** The console's section of the config file (BOSUN_CONFIG), parsed and checked with the rest. */
export function consoleSection(env: BosunEnv): ConsoleConfig {
  return loadClusterConfig(env.configFile, { resolveServers: false, resolveOperatorToken: false }).console;
}

/** Options of {@link openConsole}. */
export interface ConsoleProcessOptions {
  port: number;
  host: string;
  secureCookie: boolean;
  log: Logger;
}

/** Connects, starts the console, and returns what closes it all. */
export async function openConsole(env: BosunEnv, options: ConsoleProcessOptions): Promise<{ port: number; close(): Promise<void> }> {
  const { log } = options;
  const config = loadClusterConfig(env.configFile, { resolveServers: false, resolveOperatorToken: false });
  const plan = loginPlan(config.console, options);
  addLogSecrets(
    log,
    [plan.token, plan.oidc?.clientSecret].filter((v): v is string => v !== undefined),
  );
  if (plan.tokenIgnored)
    log.warn(`${CONSOLE_TOKEN_ENV} is set but not used: console.oidc is configured and console.allowTokenLogin is not true`);
  // Discovery first: a provider that cannot be reached stops the start-up with its reason.
  const oidc = plan.oidc ? await OidcLogin.discover({ settings: plan.oidc }) : undefined;
  // The people who log in with their own tokens (hashes only; nothing of it is a secret).
  const { operators } = config;
  const nc = await connectNats(env.nats, { name: 'bosun-console' });
  const redis = createRedis(env.redis, { name: 'bosun-console' });
  redis.on('error', (err) => log.warn({ err }, 'redis connection error'));
  try {
    await waitForRedis(redis, env.redis, 10_000);
    await ensureRunsStream(nc, env.prefix, { replicas: env.streamReplicas });
  } catch (err) {
    redis.disconnect();
    await nc.close();
    throw err;
  }
  const approvals = new ApprovalStore({ redis, prefix: env.prefix });
  const runs = new RunControl({ redis, prefix: env.prefix });
  const events = new EventPublisher({ prefix: env.prefix, redis, nats: nc, log });
  const deps = { redis, prefix: env.prefix, runs, approvals, events };
  const c = await startConsole({
    port: options.port,
    host: options.host,
    token: plan.token,
    ...(oidc ? { oidc } : {}),
    operators,
    secureCookie: options.secureCookie,
    deps,
    nats: nc,
    log,
  });
  log.info({ url: `http://${c.host}:${c.port}/` }, 'console listening');
  return {
    port: c.port,
    async close() {
      await c.close();
      await events.flush();
      await approvals.close();
      await runs.close();
      redis.disconnect();
      await nc.close();
    },
  };
}
