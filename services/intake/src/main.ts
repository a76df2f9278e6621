#!/usr/bin/env node
import {
  ConfigError,
  addLogSecrets,
  createLogger,
  intakeSecrets,
  loadClusterConfig,
  resolveIntakeSecrets,
  type BosunEnv,
  type ResolvedIntakeConfig,
} from '@bosun/config';
import { BosunError } from '@bosun/contract';
import { checkRuntime, openRuntime, runService } from '@bosun/transport';
import { IntakeQueue } from './queue.js';
import { startIntakeServer } from './server.js';

// Its level comes from LOG_LEVEL once runService has read the environment.
const log = createLogger({ service: 'intake' });

/** The intake's part of the config, its secrets substituted (only this service resolves them). */
function load(env: BosunEnv) {
  const config = loadClusterConfig(env.configFile, { resolveServers: false, resolveOperatorToken: false });
  if (!config.intake) throw new ConfigError(`${env.configFile}: intake: the section is missing (see docs/intake-and-delivery.md)`);
  let intake: ResolvedIntakeConfig;
  try {
    intake = resolveIntakeSecrets(config.intake, process.env);
  } catch (err) {
    if (err instanceof BosunError) throw new ConfigError(`${env.configFile}: ${err.message}`, { cause: err });
    throw err;
  }
  addLogSecrets(log, intakeSecrets(intake));
  return { config, intake };
}

runService({
  name: 'intake',
  log,
  async check(_args, env) {
    const { intake } = load(env);
    const connections = await checkRuntime(env, { service: 'intake' });
    return `config ${env.configFile} (${Object.keys(intake.sources).length} sources, listening on ${intake.host}:${intake.port}); ${connections}`;
  },
  async start(_args, env) {
    const { intake } = load(env);
    const rt = await openRuntime(env, { service: 'intake', log });
    const queue = new IntakeQueue({ redis: rt.redis, prefix: env.prefix, timeoutMs: intake.redisTimeoutMs });
    let server;
    try {
      server = await startIntakeServer({ config: intake, queue, deadLetters: rt.deadLetters, log });
    } catch (err) {
      await queue.close();
      await rt.close();
      throw err;
    }
    log.info({ host: server.host, port: server.port, sources: Object.keys(intake.sources) }, 'intake listening');
    return {
      async close() {
        await server.close();
        await queue.close();
        await rt.close();
      },
    };
  },
});
