import { setMaxListeners } from 'node:events';
import { hostname } from 'node:os';
import { Worker } from 'bullmq';
import { specialistQueue } from '@bosun/contract';
import {
  ConfigError,
  addLogSecrets,
  createLogger,
  loadClusterConfig,
  priceOf,
  specialistConfig,
  taskBudget,
  type BosunEnv,
  type ClusterConfig,
} from '@bosun/config';
import { createModel } from '@bosun/models';
import { buildModel, observedModel, specialistPolicy, type LocalSpecialist } from '@bosun/agent';
import {
  ApprovalStore,
  ApprovalWaiter,
  NatsToolClient,
  QueueToolClient,
  ToolCatalog,
  RunUsageLedger,
  TraceNotes,
  checkRuntime,
  keys,
  loopTelemetry,
  openRuntime,
  redisRateLimiters,
  watchWorkerLocks,
  type HostedOptions,
  type RunServiceOptions,
  type ServiceArgs,
  type ToolClient,
  type WorkerLocks,
} from '@bosun/transport';
import { startTracing } from '@bosun/otel';
import { SandboxPool } from '@bosun/sandbox';
import { localSpecialist, specialistProcessor, type SpecialistDeps } from './specialist.js';
import { RemoteSpecialist, resolveRemoteToken } from './remote.js';
import type { SpecialistConfig } from '@bosun/config';
import type { Runtime } from '@bosun/transport';

// Its level comes from LOG_LEVEL once runService has read the environment.
const log = createLogger({ service: 'specialist' });

/** The config file and the specialists this process runs (`--only`), as read at start-up (the environment comes from runService). */
function load(args: ServiceArgs, env: BosunEnv) {
  const config = loadClusterConfig(env.configFile, { resolveServers: false, resolveOperatorToken: false });
  const all = Object.keys(config.specialists);
  const names =
    typeof args.only === 'string'
      ? args.only
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean)
      : all;
  const unknown = names.filter((n) => !specialistConfig(config, n));
  if (unknown.length > 0) throw new ConfigError(`--only: unknown specialist(s) ${unknown.join(', ')} (known: ${all.join(', ')})`);
  return { env, config, names };
}

/** The remote A2A agent of a specialist configured with `a2a`; its token is resolved here, and never logged. */
function remoteSpecialist(
  name: string,
  spec: SpecialistConfig,
  with_: { rt: Runtime; draining: () => boolean; isCancelled: (taskId: string, runId: string) => Promise<boolean> },
): RemoteSpecialist {
  const { rt } = with_;
  const token = resolveRemoteToken(name, spec.a2a!.token);
  if (token) addLogSecrets(log, [token]);
  return new RemoteSpecialist({
    name,
    spec,
    token,
    checkpoints: rt.checkpoints,
    events: rt.events,
    deadLetters: rt.deadLetters,
    log: log.child({ agent: name }),
    shouldYield: with_.draining,
    isCancelled: with_.isCancelled,
  });
}

/**
 * The threads CodeAct scripts run on, when this process runs a CodeAct specialist: never on this
 * process's event loop (lock renewals, health, other tasks). One starts now, so that the first
 * script does not wait for it; the others when scripts need them (a thread costs about 0.35 s of
 * CPU to start, which a specialist that runs few scripts need not pay at every start).
 */
async function sandboxFor(config: ReturnType<typeof load>['config'], names: string[]): Promise<SandboxPool | undefined> {
  if (!names.some((n) => specialistConfig(config, n)!.loop === 'codeact')) return undefined;
  const pool = new SandboxPool();
  await pool.warm(1);
  return pool;
}

/** Options of {@link specialistService}. */
export interface SpecialistServiceOptions extends HostedOptions {
  /**
   * The tool client of every task, when the process hosts the gateway too (`bosun serve`: a
   * `DirectToolClient`). Default: the gateway's queue or NATS path, as `gateway.transport` says.
   */
  tools?: ToolClient;
  /**
   * Where the specialists of this process are registered for the coordinator of the same process
   * (`bosun serve`), which runs their tasks without a job (local tasks); removed as they drain.
   */
  local?: Map<string, LocalSpecialist>;
}

/** The specialists as a service: `runService(specialistService())` is their process (main.ts). */
export function specialistService(options: SpecialistServiceOptions = {}): RunServiceOptions {
  return {
    name: 'specialist',
    log,
    tracing: () => startTracing('specialist'),
    args: { only: { type: 'string' } },
    async check(args, env) {
      const { config, names } = load(args, env);
      const models = names.map(
        (name) =>
          `${name} (${createModel({ ...specialistConfig(config, name)!.model, apiKey: env.geminiApiKey, openaiApiKey: env.openaiApiKey, anthropicApiKey: env.anthropicApiKey }).name})`,
      );
      const connections = await checkRuntime(env, { service: 'specialist' });
      return `config ${env.configFile} (specialists ${models.join(', ')}); ${connections}`;
    },
    async start(args, env) {
      const { config, names } = load(args, env);

      // The sandbox's threads start while the connections open.
      const [rt, sandbox] = await Promise.all([
        options.runtime ?? openRuntime(env, { service: 'specialist', log, retention: config.retention }),
        sandboxFor(config, names),
      ]);
      // Given (the gateway is in this process), it is closed by its owner.
      const path = options.tools ? { tools: options.tools, close: () => Promise.resolve() } : await gatewayPath(config, env, rt);
      const tools = path.tools;
      const approvals = new ApprovalStore({ redis: rt.redis, prefix: env.prefix, log });
      // Denies, reason `timeout`, an approval nobody decided in time (the loops only ask it to).
      const approvalWaiter = new ApprovalWaiter({ approvals, events: rt.events, log });
      const ledger = new RunUsageLedger({ redis: rt.redis, prefix: env.prefix, ttlSeconds: config.retention.checkpoints });
      const workers: Worker[] = [];
      const lockWatches: WorkerLocks[] = [];
      // Aborted when the process starts draining: every task's model call, script or wait for
      // tools in flight stops at once and the task is handed back (libs/agent TaskStop).
      const drain = new AbortController();
      // One listener per task in flight: thousands, by design (no leak warning for them).
      setMaxListeners(0, drain.signal);
      // The task's own key (the coordinator gave up on it) and its run's (an operator cancelled
      // the run), read in one round trip.
      const isCancelled = async (taskId: string, runId: string) =>
        (await rt.redis.mget(keys.cancel(env.prefix, taskId), keys.cancelRun(env.prefix, runId))).some((v) => v !== null);
      const shared: WorkerContext = {
        config,
        env,
        rt,
        tools,
        approvals,
        approvalWaiter,
        ledger,
        isCancelled,
        drain: drain.signal,
        sandbox,
      };
      for (const name of names) {
        const { worker, locks, local } = specialistWorker(name, shared);
        workers.push(worker);
        lockWatches.push(locks);
        if (local) options.local?.set(name, local);
      }
      return {
        async close() {
          // Stop taking work; tasks in flight hand themselves back at once (what they wait on is aborted).
          drain.abort();
          for (const name of names) options.local?.delete(name);
          // Then the sandbox's threads: every task has handed itself back or ended (a running
          // script is stopped as the process drains).
          await Promise.all(workers.map((w) => w.close())).then(() => sandbox?.close());
          for (const l of lockWatches) l.close();
          await path.close();
          await approvals.close();
          await rt.close();
        },
      };
    },
  };
}

/**
 * The tool client of a specialist process without a gateway of its own: over NATS (the queue path
 * as its fallback: its Queue, QueueEvents and their connection open only if a call falls back), or
 * over the queue (opened now).
 */
async function gatewayPath(config: ClusterConfig, env: BosunEnv, rt: Runtime): Promise<{ tools: ToolClient; close(): Promise<void> }> {
  const catalog = new ToolCatalog({ redis: rt.redis, prefix: env.prefix });
  const queueTools = new QueueToolClient({ redis: rt.redis, prefix: env.prefix, catalog });
  const natsTools =
    config.gateway.transport === 'nats'
      ? new NatsToolClient({ nats: () => rt.nats(), prefix: env.prefix, catalog, fallback: queueTools, log })
      : undefined;
  if (!natsTools) await queueTools.ready();
  return {
    tools: natsTools ?? queueTools,
    async close() {
      natsTools?.close();
      await queueTools.close();
    },
  };
}

/** What every specialist worker of this process shares. */
interface WorkerContext {
  config: ClusterConfig;
  env: BosunEnv;
  rt: Runtime;
  tools: ToolClient;
  approvals: ApprovalStore;
  approvalWaiter: ApprovalWaiter;
  ledger: RunUsageLedger;
  isCancelled: (taskId: string, runId: string) => Promise<boolean>;
  /** Aborted when the process starts draining. */
  drain: AbortSignal;
  /** The CodeAct sandbox's threads, when a specialist of this process runs `loop: codeact`. */
  sandbox: SandboxPool | undefined;
}

/** The worker of one specialist's queue, the watch over its locks, and the specialist as its process's coordinator runs it (local tasks). */
function specialistWorker(name: string, ctx: WorkerContext): { worker: Worker; locks: WorkerLocks; local: LocalSpecialist | undefined } {
  const { config, env, rt, tools, approvals, approvalWaiter, ledger, isCancelled, drain, sandbox } = ctx;
  const draining = (): boolean => drain.aborted;
  const spec = specialistConfig(config, name)!;
  const model = buildModel({
    spec: spec.model,
    config,
    keys: { gemini: env.geminiApiKey, openai: env.openaiApiKey, anthropic: env.anthropicApiKey },
    fake: { plans: { [name]: spec.fakePlan } },
    limiters: redisRateLimiters(rt.redis, env.prefix),
  });
  const remote = spec.a2a ? remoteSpecialist(name, spec, { rt, draining, isCancelled }) : undefined;
  // Set once the worker exists; a task cannot lose a lock before that.
  const watch: { locks?: WorkerLocks } = {};
  const deps: SpecialistDeps = {
    name,
    spec: { ...spec, budget: taskBudget(config, spec) },
    model: observedModel(model, loopTelemetry),
    price: priceOf(config, model.name),
    fallbackPrice: model.fallbackName === undefined ? undefined : priceOf(config, model.fallbackName),
    ...(config.budgets.run ? { runBudget: { limits: config.budgets.run, ledger } } : {}),
    tools,
    checkpoints: rt.checkpoints,
    events: rt.events,
    deadLetters: rt.deadLetters,
    log,
    // Longer than any call the gateway may make, so the gateway's own timeout answers first.
    toolTimeoutMs: Math.max(config.gateway.callTimeoutMs, ...Object.values(config.mcpServers).map((s) => s.timeoutMs ?? 0)) + 30_000,
    shouldYield: draining,
    drain,
    approvals,
    approvalWaiter,
    telemetry: loopTelemetry,
    traceNotes: new TraceNotes({ redis: rt.redis, prefix: env.prefix }),
    remote,
    // What the model is offered is what the gateway would run for this agent (libs/agent/src/task-tools.ts).
    policy: specialistPolicy(config, name),
    isCancelled,
    sandbox,
    redis: rt.redis,
    onLockLost: (taskId) => watch.locks?.lost(taskId),
  };
  const worker = new Worker(specialistQueue(name), specialistProcessor(deps), {
    connection: rt.redis,
    prefix: env.prefix,
    name: `specialist-${hostname()}-${process.pid}`,
    concurrency: spec.concurrency,
    lockDuration: config.workers.lockDurationMs,
    stalledInterval: config.workers.stalledIntervalMs,
    maxStalledCount: config.workers.maxStalledCount,
  });
  const locks = (watch.locks = watchWorkerLocks(worker, {
    queue: specialistQueue(name),
    log,
    onError: (err) => log.error({ err, agent: name }, 'specialist worker error'),
  }));
  worker.on('failed', (job, err) => log.warn({ agent: name, jobId: job?.id, err }, 'task job failed'));
  log.info({ agent: name, model: model.name, concurrency: spec.concurrency }, 'specialist consuming');
  return { worker, locks, local: localSpecialist(deps) };
}
