#!/usr/bin/env node
import { ConfigError, createLogger, loadClusterConfig, type BosunEnv, type ClusterConfig } from '@bosun/config';
import { ApprovalStore, RunControl, checkRuntime, openRuntime, runService, type Runtime, type ServiceArgs } from '@bosun/transport';
import { AGENT_CARD_PATH } from '@a2a-js/sdk';
import { ApprovalAnswers } from './answers.js';
import { TokenTable } from './auth.js';
import { buildAgentCard } from './card.js';
import { BosunA2AHandler } from './handler.js';
import { RunReader } from './runs.js';
import { a2aApp, listenA2a, type A2aServer } from './server.js';
import { A2aTaskStore } from './store.js';
import { PushConfigs, PushDispatcher } from './push.js';
import { taskOf } from './view.js';

const log = createLogger({ service: 'a2a' });

/** `--host` and `--port` override `a2a.host` and `a2a.port` (a container listens on 0.0.0.0; the shared config file says 127.0.0.1). */
function load(env: BosunEnv, args: ServiceArgs = {}): { config: ClusterConfig; a2a: NonNullable<ClusterConfig['a2a']> } {
  const config = loadClusterConfig(env.configFile, { resolveServers: false, resolveOperatorToken: false });
  if (!config.a2a) throw new ConfigError(`${env.configFile}: a2a: the A2A server is not configured (add an a2a section)`);
  if (config.a2a.tokens.length === 0 && !config.a2a.allowAnonymous)
    throw new ConfigError(`${env.configFile}: a2a.tokens: no token, and anonymous access is off: nobody could call the server`);
  const port = typeof args.port === 'string' ? Number(args.port) : config.a2a.port;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new ConfigError(`--port: must be an integer from 0 to 65535`);
  const host = typeof args.host === 'string' ? args.host : config.a2a.host;
  return { config, a2a: { ...config.a2a, host, port } };
}

/** The push dispatcher: it subscribes once NATS answers (NATS may be away at start-up). */
function startPush(
  handler: BosunA2AHandler,
  w: { push: PushConfigs; store: A2aTaskStore; runs: RunReader; rt: Runtime; prefix: string },
): { close(): void } {
  const dispatcher = new PushDispatcher({
    configs: w.push,
    record: (tenant, taskId) => w.store.get(tenant, taskId),
    task: async (record, event) => {
      const ended = event.type === 'run.completed' || event.type === 'run.failed';
      return taskOf(record, ended ? await handler.streams.settled(record) : await w.runs.view(record));
    },
    log,
  });
  const timer = setInterval(() => {
    const nc = w.rt.nats();
    if (!nc) return;
    clearInterval(timer);
    dispatcher.attach(nc, w.prefix);
  }, 200);
  timer.unref();
  return {
    close() {
      clearInterval(timer);
      dispatcher.close();
    },
  };
}

runService({
  name: 'a2a',
  log,
  args: { host: { type: 'string' }, port: { type: 'string' } },
  async check(args, env) {
    const { a2a } = load(env, args);
    const connections = await checkRuntime(env, { service: 'a2a' });
    return `config ${env.configFile} (A2A on ${a2a.host}:${a2a.port}, ${a2a.tokens.length} tokens${a2a.allowAnonymous ? ', anonymous allowed' : ''}); ${connections}`;
  },
  async start(args, env) {
    const { config, a2a } = load(env, args);
    const rt = await openRuntime(env, { service: 'a2a', log, retention: config.retention });
    const approvals = new ApprovalStore({ redis: rt.redis, prefix: env.prefix, log });
    const runs = new RunReader(rt.redis, env.prefix, approvals);
    const control = new RunControl({ redis: rt.redis, prefix: env.prefix });
    const store = new A2aTaskStore(rt.redis, env.prefix);
    const closeAll = async () => {
      await Promise.all([runs.close(), control.close(), approvals.close()]);
      await rt.close();
    };
    let server: A2aServer;
    let dispatcher: { close(): void } | undefined;
    try {
      // The card names the URL clients use; with port 0 it is known only once listening.
      let card = buildAgentCard(config, a2a.publicUrl ?? `http://${a2a.host}:${a2a.port}`);
      const answers = new ApprovalAnswers({ approvals, runs, store, events: rt.events, log });
      const push = a2a.pushNotifications ? new PushConfigs(rt.redis, env.prefix, a2a.pushNotifications) : undefined;
      const deps = { card, config: a2a, store, runs, control, answers, push, nats: () => rt.nats(), prefix: env.prefix, log };
      const handler = new BosunA2AHandler(deps);
      if (push) dispatcher = startPush(handler, { push, store, runs, rt, prefix: env.prefix });
      server = await listenA2a(a2aApp(handler, new TokenTable(a2a, config.operators), a2a.maxMessageBytes), {
        host: a2a.host,
        port: a2a.port,
        log,
      });
      if (!a2a.publicUrl && a2a.port === 0) {
        card = buildAgentCard(config, `http://${a2a.host}:${server.port}`);
        deps.card = card;
      }
    } catch (err) {
      await closeAll();
      throw err;
    }
    const base = a2a.publicUrl ?? `http://${a2a.host}:${server.port}`;
    log.info({ host: server.host, port: server.port, card: `${base}/${AGENT_CARD_PATH}` }, 'A2A server listening');
    return {
      async close() {
        dispatcher?.close();
        await server.close();
        await closeAll();
      },
    };
  },
});
