#!/usr/bin/env node
import type { Worker } from 'bullmq';
import {
  ConfigError,
  addLogSecrets,
  createLogger,
  deliverySecrets,
  intakeSecrets,
  loadClusterConfig,
  resolveDeliverySecrets,
  resolveIntakeSecrets,
  slackAppSinks,
  type BosunEnv,
  type DeliveryConfig,
  type OperatorEntry,
  type ResolvedIntakeConfig,
} from '@bosun/config';
import { BosunError } from '@bosun/contract';
import { ApprovalStore, checkRuntime, openRuntime, runService, type Runtime } from '@bosun/transport';
import { ApprovalAnnouncer } from './approval-announcer.js';
import { startDeliveryWorker } from './delivery-worker.js';
import { IntakeQueue } from './queue.js';
import { loadRunbooks, type LoadedRunbook } from './runbooks.js';
import { startIntakeServer, type IntakeServer } from './server.js';
import { RedisMessageUpdates, SlackInteractions, slackRoleCheck } from './slack-interactions.js';

// Its level comes from LOG_LEVEL once runService has read the environment.
const log = createLogger({ service: 'intake' });

/**
 * The intake's parts of the config, their secrets substituted (only this service resolves them):
 * `intake` (webhooks in) and `delivery` (answers out); at least one is required.
 */
function load(env: BosunEnv) {
  const config = loadClusterConfig(env.configFile, { resolveServers: false, resolveOperatorToken: false });
  if (!config.intake && !config.delivery)
    throw new ConfigError(
      `${env.configFile}: neither intake nor delivery is configured: the intake has nothing to do (see docs/intake-and-delivery.md)`,
    );
  let intake: ResolvedIntakeConfig | undefined;
  let delivery: DeliveryConfig | undefined;
  try {
    intake = config.intake ? resolveIntakeSecrets(config.intake, process.env) : undefined;
    delivery = config.delivery ? resolveDeliverySecrets(config.delivery, process.env) : undefined;
  } catch (err) {
    if (err instanceof BosunError) throw new ConfigError(`${env.configFile}: ${err.message}`, { cause: err });
    throw err;
  }
  addLogSecrets(log, [...intakeSecrets(intake), ...deliverySecrets(delivery)]);
  // Read now, so that --check finds a missing runbook file too.
  const runbooks = intake ? loadRunbooks(intake.runbooks, env.configFile) : [];
  return { config, intake, delivery, runbooks };
}

/** What {@link startIntake} starts from: the resolved sections, the runbooks and the config's people. */
interface IntakeParts {
  intake: ResolvedIntakeConfig;
  runbooks: LoadedRunbook[];
  delivery: DeliveryConfig | undefined;
  operators: readonly OperatorEntry[];
}

/** The webhook server, when `intake` is configured; with Slack app sinks, their buttons' route too. */
async function startIntake(rt: Runtime, env: BosunEnv, { intake, runbooks, delivery, operators }: IntakeParts) {
  const queue = new IntakeQueue({ redis: rt.redis, prefix: env.prefix, timeoutMs: intake.redisTimeoutMs });
  const approvals = new ApprovalStore({ redis: rt.redis, prefix: env.prefix, log });
  const sinks = slackAppSinks(delivery);
  const mayApprove = slackRoleCheck(operators);
  const slack =
    Object.keys(sinks).length > 0
      ? new SlackInteractions({
          sinks,
          approvals,
          // The message of each approval is updated once, whichever intake process (or restart) does it.
          updates: new RedisMessageUpdates({ redis: rt.redis, prefix: env.prefix }),
          events: rt.events,
          log,
          ...(mayApprove ? { mayApprove } : {}),
        })
      : undefined;
  let server: IntakeServer;
  try {
    server = await startIntakeServer({ config: intake, queue, deadLetters: rt.deadLetters, log, runbooks, ...(slack ? { slack } : {}) });
  } catch (err) {
    await queue.close();
    await approvals.close();
    throw err;
  }
  log.info(
    { host: server.host, port: server.port, sources: Object.keys(intake.sources), slackApps: Object.keys(sinks) },
    'intake listening',
  );
  return {
    async close() {
      await server.close();
      await queue.close();
      await approvals.close();
    },
  };
}

runService({
  name: 'intake',
  log,
  async check(_args, env) {
    const { intake, delivery } = load(env);
    const connections = await checkRuntime(env, { service: 'intake' });
    const parts = [
      ...(intake ? [`${Object.keys(intake.sources).length} sources, listening on ${intake.host}:${intake.port}`] : []),
      ...(delivery ? [`${Object.keys(delivery.sinks).length} delivery sinks`] : []),
    ];
    return `config ${env.configFile} (${parts.join('; ')}); ${connections}`;
  },
  async start(_args, env) {
    const { config, intake, delivery, runbooks } = load(env);
    const rt = await openRuntime(env, { service: 'intake', log, retention: config.retention });
    let http: { close(): Promise<void> } | undefined;
    try {
      http = intake ? await startIntake(rt, env, { intake, runbooks, delivery, operators: config.operators }) : undefined;
      if (!intake && Object.keys(slackAppSinks(delivery)).length > 0)
        log.warn('Slack app sinks are configured but intake is not: their Approve / Deny buttons have no route to answer them');
    } catch (err) {
      await rt.close();
      throw err;
    }
    let worker: Worker | undefined;
    let announcer: ApprovalAnnouncer | undefined;
    if (delivery && delivery.announceApprovals.length > 0)
      announcer = new ApprovalAnnouncer({ redis: rt.redis, prefix: env.prefix, delivery, log }).start();
    if (delivery) {
      worker = startDeliveryWorker({
        redis: rt.redis,
        prefix: env.prefix,
        delivery,
        workers: config.workers,
        deadLetters: rt.deadLetters,
        log,
      });
      log.info({ sinks: Object.keys(delivery.sinks) }, 'delivering answers');
    }
    return {
      async close() {
        await http?.close();
        await announcer?.close();
        await worker?.close();
        await rt.close();
      },
    };
  },
});
