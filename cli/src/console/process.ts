/**
 * The console process's set-up: its token (BOSUN_CONSOLE_TOKEN, required), its connections
 * (NATS for the event streams, Redis for runs, approvals and dead letters) and its HTTP server.
 * `main.ts` runs it as a service (health port, ready line, graceful stop).
 */
import { ConfigError, addLogSecrets, loadClusterConfig, type BosunEnv, type Logger } from '@bosun/config';
import { ApprovalStore, EventPublisher, RunControl, connectNats, createRedis, ensureRunsStream, waitForRedis } from '@bosun/transport';
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
  const token = consoleToken();
  addLogSecrets(log, [token]);
  // The people who log in with their own tokens (hashes only; nothing of it is a secret).
  const { operators } = loadClusterConfig(env.configFile, { resolveServers: false, resolveOperatorToken: false });
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
    token,
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
