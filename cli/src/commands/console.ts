/**
 * `bosun console [--port 8092] [--host 127.0.0.1]`: the operator web console (`npm run console`),
 * its own small process next to the CLI's operator commands, whose code it shares. It needs the
 * operator token in BOSUN_CONSOLE_TOKEN: without it, it does not start and says why.
 */
import { addLogSecrets, createLogger, type BosunEnv } from '@bosun/config';
import { ApprovalStore, EventPublisher, RunControl, connectNats, ensureRunsStream, readyLine } from '@bosun/transport';
import { UsageError } from '../args.js';
import { defineCommand, withRedis } from '../command.js';
import { startConsole } from '../console/server.js';
import { OperatorError } from '../operator.js';

/** The console's port by default (the intake has 8090, A2A 8091). */
export const CONSOLE_PORT = 8092;

/** The token variable; the console does not start without it. */
export const CONSOLE_TOKEN_ENV = 'BOSUN_CONSOLE_TOKEN';

function consoleToken(): string {
  const token = process.env[CONSOLE_TOKEN_ENV] ?? '';
  if (token.trim() === '')
    throw new OperatorError(
      `console: ${CONSOLE_TOKEN_ENV} is not set: the console does not start without an operator token ` +
        `(set it to a long random secret; operators log in with it)`,
      2,
    );
  return token;
}

/** Serves the console until SIGINT or SIGTERM. */
async function serve(env: BosunEnv, opts: { port: number; host: string; token: string; secureCookie: boolean }): Promise<number> {
  const log = createLogger({ service: 'console' });
  addLogSecrets(log, [opts.token]);
  const nc = await connectNats(env.nats, { name: 'bosun-console' });
  try {
    await ensureRunsStream(nc, env.prefix, { replicas: env.streamReplicas });
    return await withRedis(env, async (redis) => {
      const approvals = new ApprovalStore({ redis, prefix: env.prefix });
      const runs = new RunControl({ redis, prefix: env.prefix });
      const events = new EventPublisher({ prefix: env.prefix, redis, nats: nc, log });
      const deps = { redis, prefix: env.prefix, runs, approvals, events };
      const c = await startConsole({ ...opts, deps, nats: nc, log });
      process.stdout.write(`console listening on http://${c.host}:${c.port}/\n${readyLine('console')}\n`);
      await new Promise<void>((resolve) => {
        process.once('SIGINT', resolve);
        process.once('SIGTERM', resolve);
      });
      await c.close();
      await events.flush();
      await approvals.close();
      await runs.close();
      return 0;
    });
  } finally {
    await nc.close().catch(() => undefined);
  }
}

export const consoleCommand = defineCommand({
  name: 'console',
  usage: `  bosun console [--port ${CONSOLE_PORT}] [--host 127.0.0.1] [--secure-cookie]
                                    the operator web console (log in with ${CONSOLE_TOKEN_ENV})`,
  options: {
    port: { type: 'string', default: process.env.BOSUN_CONSOLE_PORT || String(CONSOLE_PORT) },
    host: { type: 'string', default: '127.0.0.1' },
    'secure-cookie': { type: 'boolean', default: false },
  },
  positionals: 0,
  check({ values }) {
    const port = Number(values.port);
    if (!/^\d+$/.test(values.port) || port > 65535) throw new UsageError(`console: --port must be a port number (got "${values.port}")`);
    return { port, host: values.host, token: consoleToken(), secureCookie: values['secure-cookie'] };
  },
  handler: (opts, env) => serve(env, opts),
});
