import type { RedisClient } from '../base/connections.js';
import type { NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { BosunError, errorMessage, sleep } from '@bosun/contract';
import { redactUrl, type BosunEnv, type Logger, type RetentionConfig } from '@bosun/config';
import { ConnectionSettingsError, checkRedisTopology, connectNats, createRedis, waitForRedis } from '../base/connections.js';
import { EventPublisher } from '../events/events.js';
import { RedisCheckpointStore } from '../stores/checkpoints.js';
import { DeadLetters } from '../stores/dead-letters.js';
import { ensureRunsStream, type RunsStreamLimits } from '../events/stream.js';

/** The connections and stores every service uses. */
export interface Runtime {
  redis: RedisClient;
  /** Null until NATS answers; events are buffered meanwhile. */
  nats(): NatsConnection | null;
  events: EventPublisher;
  checkpoints: RedisCheckpointStore;
  deadLetters: DeadLetters;
  /** Flushes events and closes every connection the runtime opened. */
  close(): Promise<void>;
}

/**
 * Opens the runtime of a service: RedisClient (required: start-up fails with a clear message when it
 * does not answer) and NATS (optional at start-up: the service runs and buffers events until
 * NATS answers, so observers never hold up a run). Either server refusing the credentials or the
 * TLS settings at start-up fails it with a {@link ConnectionSettingsError} naming the variables.
 * `retention` (the config's section) sets the checkpoints' expiry, the run event counter's, and
 * the runs stream's limits; without it the defaults apply and an existing stream is left as is.
 */
export async function openRuntime(
  env: BosunEnv,
  options: { service: string; log: Logger; retention?: RetentionConfig | undefined },
): Promise<Runtime> {
  const { service, log, retention } = options;
  const redis = await openRedis(env, { service, onError: (err) => log.warn({ err }, 'redis connection error') });
  // A run's event counter outlives its checkpoints by a day: a late event of the run still numbers on.
  const seqTtl = retention ? { seqTtlSeconds: retention.checkpoints + 86_400 } : {};
  const events = new EventPublisher({ prefix: env.prefix, redis, nats: null, log, ...seqTtl });
  let nc: NatsConnection | null = null;
  // Aborted by close(): the NATS retries and their waits stop at once.
  const closing = new AbortController();
  const streamLimits = runsStreamLimits(env, retention);
  // Credentials or certificates NATS refuses at start-up stop the service: they will not fix
  // themselves. Later (NATS was away at start-up), the refusal is logged and retried.
  let starting = true;
  let refusedAtStart: ConnectionSettingsError | undefined;
  let refusalLogged = false;

  const attach = async (): Promise<void> => {
    for (let attempt = 0; !closing.signal.aborted; attempt++) {
      try {
        const conn = await openNats(env, service);
        if (closing.signal.aborted) {
          await conn.close();
          return;
        }
        // The stream captures events for late observers: without holding up the service.
        await Promise.race([
          ensureRunsStreamRetrying(conn, streamLimits, log, closing.signal),
          sleep(5_000, closing.signal, { unref: true }),
        ]);
        nc = conn;
        events.attach(conn);
        log.info('connected to NATS');
        // While NATS is away, events go to the publisher's bounded buffer instead of the
        // client's own (unbounded) one; they are flushed when it is back.
        void (async () => {
          for await (const status of conn.status()) {
            if (status.type === 'disconnect') {
              log.warn('NATS disconnected; buffering events');
              events.attach(null);
            } else if (status.type === 'reconnect') {
              log.info('NATS reconnected; flushing buffered events');
              events.attach(conn);
            }
          }
        })().catch((err: unknown) => log.warn({ err }, 'NATS status watch ended'));
        return;
      } catch (err) {
        if (err instanceof ConnectionSettingsError) {
          if (starting) {
            refusedAtStart = err;
            return;
          }
          if (!refusalLogged) log.error({ err }, 'NATS refused the connection settings; events are buffered until it accepts them');
          refusalLogged = true;
        } else if (attempt === 0) log.warn({ err }, 'NATS unreachable; events are buffered until it answers');
        await sleep(Math.min(500 * 2 ** attempt, 5_000), closing.signal);
      }
    }
  };
  const attaching = attach();
  // Give NATS a moment at start-up so the first events go straight out.
  await Promise.race([attaching, sleep(3_000, undefined, { unref: true })]);
  starting = false;
  if (refusedAtStart) {
    redis.disconnect();
    throw refusedAtStart;
  }

  const checkpoints = new RedisCheckpointStore({ redis, prefix: env.prefix, ...(retention ? { ttlSeconds: retention.checkpoints } : {}) });
  const deadLetters = new DeadLetters({ redis, prefix: env.prefix });
  return {
    redis,
    nats: () => nc,
    events,
    checkpoints,
    deadLetters,
    async close() {
      closing.abort();
      await events.flush();
      await deadLetters.close();
      const conn = nc;
      // Closing: a drain that fails leaves nothing to flush (events.flush() ran above).
      if (conn) await conn.drain().catch(() => undefined);
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}

/**
 * A runtime lent to a service hosted beside others in one process (`bosun serve`): the same
 * connections and stores, and a `close` that leaves them open, for their owner closes them once
 * every service it lent them to has closed.
 */
export function lentRuntime(rt: Runtime): Runtime {
  return { ...rt, close: () => Promise.resolve() };
}

/** How a process that hosts several services (`bosun serve`) starts each one over its connections. */
export interface HostedOptions {
  /** The connections to use (a {@link lentRuntime}). Default: the service opens its own. */
  runtime?: Runtime;
}

/** The runs stream's limits from `retention.events` (none without it: an existing stream is left as is). */
function runsStreamLimits(env: BosunEnv, retention: RetentionConfig | undefined): RunsStreamLimits & { prefix: string } {
  const { events } = retention ?? {};
  return {
    prefix: env.prefix,
    replicas: env.streamReplicas,
    ...(events ? { maxAgeMs: events.maxAge * 1000, maxBytes: events.maxBytes, maxMsgs: events.maxMessages } : {}),
  };
}

/**
 * Creates the runs stream, trying again every second up to 30 times while JetStream does not
 * take it (a NATS cluster may still be electing its leader), unless the runtime is closing;
 * then logs that late observers cannot replay runs.
 */
async function ensureRunsStreamRetrying(
  conn: NatsConnection,
  limits: RunsStreamLimits & { prefix: string },
  log: Logger,
  closing: AbortSignal,
): Promise<void> {
  for (let tries = 30; ; tries--) {
    try {
      await ensureRunsStream(conn, limits.prefix, limits);
      return;
    } catch (err) {
      if (tries === 0 || closing.aborted) return log.error({ err }, 'could not create the runs stream; late observers cannot replay runs');
      log.warn({ err }, 'runs stream not ready; retrying');
      await sleep(1_000, closing);
    }
  }
}

/**
 * The Redis connection of a service: waits up to `timeoutMs` (default 10 s) for Redis, then
 * refuses a topology Bosun cannot run on. Rejects with a message naming `REDIS_URL`, or a
 * {@link ConnectionSettingsError} naming the credential or TLS setting Redis refused.
 */
async function openRedis(
  env: BosunEnv,
  options: { service: string; onError: (err: Error) => void; timeoutMs?: number },
): Promise<RedisClient> {
  const redis = createRedis(env.redis, { name: `bosun-${options.service}` });
  redis.on('error', options.onError);
  try {
    await waitForRedis(redis, env.redis, options.timeoutMs);
    await checkRedisTopology(redis, env.prefix);
  } catch (err) {
    redis.disconnect();
    throw err;
  }
  return redis;
}

/** The NATS connection of a service. Rejects with a message naming `NATS_URL` (or the credential and TLS settings it refused). */
function openNats(env: BosunEnv, service: string): Promise<NatsConnection> {
  return connectNats(env.nats, { name: `bosun-${service}` });
}

/**
 * `--check` of a service: connects to Redis (waiting up to 5 s) and NATS as the service would,
 * checks the Redis topology and that JetStream answers, and closes both. Takes no work and
 * changes nothing. Returns a summary without secrets (URLs with their passwords replaced);
 * throws a {@link BosunError} naming the variable to fix.
 */
export async function checkRuntime(env: BosunEnv, options: { service: string }): Promise<string> {
  const redis = await openRedis(env, { service: `${options.service}-check`, timeoutMs: 5_000, onError: () => undefined });
  try {
    const nc = await openNats(env, `${options.service}-check`);
    try {
      await (await jetstreamManager(nc)).getAccountInfo();
    } catch (err) {
      throw new BosunError(
        'jetstream_unavailable',
        `NATS at ${redactUrl(env.natsUrl)} answers, but JetStream does not (${errorMessage(err)}). Start nats-server with -js.`,
        { cause: err },
      );
    } finally {
      // The check's own connection: the check's result is already decided.
      await nc.close().catch(() => undefined);
    }
  } finally {
    redis.disconnect();
  }
  const urls = (list: string) =>
    list
      .split(',')
      .map((u) => redactUrl(u.trim()))
      .join(',');
  return `Redis ${urls(env.redisUrl)} (prefix ${env.prefix}), NATS ${urls(env.natsUrl)} with JetStream`;
}
