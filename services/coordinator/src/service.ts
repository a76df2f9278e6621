import { hostname } from 'node:os';
import { Worker, type Job } from 'bullmq';
import { COORDINATOR_TIMERS_QUEUE, INCIDENTS_QUEUE } from '@bosun/contract';
import {
  ConfigError,
  addLogSecrets,
  configSecrets,
  createLogger,
  loadClusterConfig,
  type BosunEnv,
  type ClusterConfig,
} from '@bosun/config';
import { createModel } from '@bosun/models';
import { buildModel, observedModel, type LocalSpecialists } from '@bosun/agent';
import { startTracing } from '@bosun/otel';
import {
  ApprovalReader,
  ApprovalStore,
  RunControl,
  checkRuntime,
  loopTelemetry,
  metrics,
  openRuntime,
  redisClusterProbe,
  redisRateLimiters,
  watchWorkerLocks,
  type HostedOptions,
  type RunServiceOptions,
  type ServiceHandle,
  type Runtime,
  type WorkerLocks,
} from '@bosun/transport';
import { Coordinator } from './coordinator.js';
import { RunResultSweeper } from './sweep.js';
import { startOperatorApi, type OperatorApi } from './http.js';

// Its level comes from LOG_LEVEL once runService has read the environment.
const log = createLogger({ service: 'coordinator' });

/** The config file and the model, as the coordinator reads them at start-up (the environment comes from runService). */
function load(env: BosunEnv) {
  const config = loadClusterConfig(env.configFile, { resolveServers: false, resolveOperatorToken: true });
  // The secrets it resolved from the config file (tokens) are never logged.
  addLogSecrets(log, configSecrets(config));
  const c = config.coordinator;
  const model = createModel(
    { ...c.model, apiKey: env.geminiApiKey, openaiApiKey: env.openaiApiKey, anthropicApiKey: env.anthropicApiKey },
    {
      routes: c.routes,
      defaultRoute: c.defaultRoute,
    },
  );
  return { env, config, model };
}

/** Options of {@link coordinatorService}. */
export interface CoordinatorServiceOptions extends HostedOptions {
  /** The specialists of the same process (`bosun serve`): a round that goes only to them runs here, without child jobs. */
  local?: LocalSpecialists;
}

/** The coordinator as a service: `runService(coordinatorService())` is its process (main.ts). */
export function coordinatorService(options: CoordinatorServiceOptions = {}): RunServiceOptions {
  return {
    name: 'coordinator',
    log,
    tracing: () => startTracing('coordinator'),
    async check(_args, env) {
      const { config, model } = load(env);
      const http = config.coordinator.http;
      if (http && http.operatorToken === '')
        throw new ConfigError(`${env.configFile}: coordinator.http.operatorToken is empty after substitution`);
      const connections = await checkRuntime(env, { service: 'coordinator' });
      const api = http ? `, operator API on ${http.host}:${http.port}` : '';
      return `config ${env.configFile} (${config.coordinator.mode} mode, model ${model.name}, ${Object.keys(config.specialists).length} specialists${api}); ${connections}`;
    },
    start: (_args, env) => startCoordinator(env, options),
  };
}

/** Starts the coordinator: its worker, timers, sweeper, probe and (when configured) operator API. */
async function startCoordinator(env: BosunEnv, options: CoordinatorServiceOptions): Promise<ServiceHandle> {
  const { config } = load(env);
  const c = config.coordinator;
  const rt = options.runtime ?? (await openRuntime(env, { service: 'coordinator', log, retention: config.retention }));
  // Approvals: decided over HTTP, and denied for the tasks of a cancelled run.
  const approvals = new ApprovalStore({ redis: rt.redis, prefix: env.prefix, log });
  // Set once the worker exists; a run cannot lose a lock before that.
  const watch: { locks?: WorkerLocks } = {};
  const { coordinator, modelName } = newCoordinator(config, env, rt, {
    approvals,
    onLockLost: (jobId) => watch.locks?.lost(jobId),
    local: options.local,
  });
  // Three parameters: BullMQ then hands the processor the signal it aborts when the lock is lost.
  const worker = new Worker(INCIDENTS_QUEUE, (job, token, signal) => coordinator.process(job, token, signal), {
    connection: rt.redis,
    prefix: env.prefix,
    name: `coordinator-${hostname()}-${process.pid}`,
    concurrency: c.concurrency,
    lockDuration: config.workers.lockDurationMs,
    stalledInterval: config.workers.stalledIntervalMs,
    maxStalledCount: config.workers.maxStalledCount,
  });
  const locks = (watch.locks = watchWorkerLocks(worker, {
    queue: INCIDENTS_QUEUE,
    log,
    onError: (err) => log.error({ err }, 'incidents worker error'),
  }));
  const { worker: timers, locks: timerLocks } = timersWorker(config, env, rt, coordinator);
  worker.on('failed', (job, err) => log.warn({ jobId: job?.id, err }, 'incident job failed'));
  log.info({ mode: c.mode, model: modelName, prefix: env.prefix, concurrency: c.concurrency }, 'coordinator consuming incidents');
  // Finished runs past `retention.runResults` (none by default: their publishers decide).
  const { runResults } = config.retention;
  const sweeper =
    runResults === null ? undefined : new RunResultSweeper({ redis: rt.redis, prefix: env.prefix, keepMs: runResults * 1000, log });
  sweeper?.start();
  // The queue, approval and in-doubt gauges of /metrics: read by the coordinator only, so they
  // are not counted once per process.
  const probe = redisClusterProbe({ redis: rt.redis, prefix: env.prefix, specialists: Object.keys(config.specialists) });
  metrics.setClusterProbe(probe.probe);
  // The operators' HTTP API (approvals, runs), when configured.
  let api: OperatorApi | undefined;
  const runs = new RunControl({ redis: rt.redis, prefix: env.prefix });
  if (c.http) {
    try {
      api = await startOperatorApi({
        port: c.http.port,
        host: c.http.host,
        token: c.http.operatorToken,
        operators: config.operators,
        approvals,
        reader: new ApprovalReader({ redis: rt.redis, prefix: env.prefix }),
        runs,
        events: rt.events,
        log,
      });
    } catch (err) {
      metrics.setClusterProbe(undefined);
      await probe.close();
      await runs.close();
      await sweeper?.close();
      await Promise.all([worker.close(), timers.close()]);
      await coordinator.close();
      await approvals.close();
      await rt.close();
      // A ListenError names the API and host:port; a ConfigError the empty token.
      throw err;
    }
    log.info({ host: api.host, port: api.port }, 'operator API listening');
  }
  return {
    async close() {
      await api?.close();
      metrics.setClusterProbe(undefined);
      await probe.close();
      await runs.close();
      await sweeper?.close();
      await Promise.all([worker.close(), timers.close()]);
      locks.close();
      timerLocks.close();
      await coordinator.close();
      await approvals.close();
      await rt.close();
    },
  };
}

/** The coordinator over its model: retries, fallback and the cluster-wide rate limit (which needs Redis), observed for /metrics. */
function newCoordinator(
  config: ClusterConfig,
  env: BosunEnv,
  rt: Runtime,
  with_: { approvals: ApprovalStore; onLockLost: (jobId: string) => void; local: LocalSpecialists | undefined },
): { coordinator: Coordinator; modelName: string } {
  const c = config.coordinator;
  const resilient = buildModel({
    spec: c.model,
    config,
    keys: { gemini: env.geminiApiKey, openai: env.openaiApiKey, anthropic: env.anthropicApiKey },
    fake: { routes: c.routes, defaultRoute: c.defaultRoute },
    limiters: redisRateLimiters(rt.redis, env.prefix),
    waitInline: true,
  });
  const coordinator = new Coordinator({
    redis: rt.redis,
    prefix: env.prefix,
    config,
    model: observedModel(resilient, loopTelemetry),
    events: rt.events,
    checkpoints: rt.checkpoints,
    deadLetters: rt.deadLetters,
    log,
    approvals: with_.approvals,
    onLockLost: with_.onLockLost,
    ...(with_.local ? { local: with_.local } : {}),
  });
  return { coordinator, modelName: resilient.name };
}

/** The worker of the coordinator's own timers (deadlines, retries, cancellations), and the watch over its locks. */
function timersWorker(
  config: ClusterConfig,
  env: BosunEnv,
  rt: Runtime,
  coordinator: { onTimer(job: Job): Promise<unknown> },
): { worker: Worker; locks: WorkerLocks } {
  const worker = new Worker(COORDINATOR_TIMERS_QUEUE, (job) => coordinator.onTimer(job), {
    connection: rt.redis,
    prefix: env.prefix,
    concurrency: 16,
    lockDuration: config.workers.lockDurationMs,
    stalledInterval: config.workers.stalledIntervalMs,
  });
  const locks = watchWorkerLocks(worker, {
    queue: COORDINATOR_TIMERS_QUEUE,
    log,
    onError: (err) => log.error({ err }, 'timers worker error'),
  });
  return { worker, locks };
}
