#!/usr/bin/env node
// The operator web console as a service process (`npm run console`): see docs/observability.md,
// "The console". Options: --port (default BOSUN_CONSOLE_PORT, else 8092), --host (default
// 127.0.0.1), --secure-cookie; --check checks the login settings, Redis and NATS.
import { createLogger } from '@bosun/config';
import { checkRuntime, runService } from '@bosun/transport';
import { CONSOLE_PORT, consoleSection, loginPlan, openConsole } from './process.js';

const log = createLogger({ service: 'console' });

/** `--port`, checked. */
function portOf(value: unknown): number {
  const text = typeof value === 'string' ? value : process.env.BOSUN_CONSOLE_PORT || String(CONSOLE_PORT);
  const port = Number(text);
  if (!/^\d+$/.test(text) || port > 65535) throw new Error(`--port (or BOSUN_CONSOLE_PORT) must be a port number (got "${text}")`);
  return port;
}

runService({
  name: 'console',
  log,
  args: { port: { type: 'string' }, host: { type: 'string' }, 'secure-cookie': { type: 'boolean' } },
  async check(args, env) {
    const port = portOf(args.port);
    const host = typeof args.host === 'string' ? args.host : '127.0.0.1';
    const plan = loginPlan(consoleSection(env), { host, port });
    const logins = [plan.token !== undefined ? 'token' : '', plan.oidc ? `OpenID Connect (${plan.oidc.issuer})` : ''].filter(Boolean);
    return `login: ${logins.join(' and ')}, port ${port}; ${await checkRuntime(env, { service: 'console' })}`;
  },
  start: async (args, env) =>
    openConsole(env, {
      port: portOf(args.port),
      host: typeof args.host === 'string' ? args.host : '127.0.0.1',
      secureCookie: args['secure-cookie'] === true,
      log,
    }),
});
