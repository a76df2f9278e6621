import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import {
  AuthorizationError,
  UserAuthenticationExpiredError,
  connect,
  credsAuthenticator,
  nkeyAuthenticator,
  tokenAuthenticator,
  usernamePasswordAuthenticator,
  type NatsConnection,
  type NodeConnectionOptions,
} from '@nats-io/transport-node';
import type { NatsSettings, RedisSettings, TlsMaterial } from '@bosun/config';
import { BosunError, errorMessage, sleep } from '@bosun/contract';
import { CoalescingConnector } from './redis-writes.js';

/** A Redis connection: one server, or a Redis Cluster. */
export type RedisClient = Redis | Cluster;

/**
 * How a dead link is found (docs/configuration.md, "Dead connections"): a link that stops
 * answering without closing — a dead node, a dropped NAT entry, a blackhole — must be noticed
 * within 15 s and handled like a reset (the connection is torn down, and the client reconnects
 * and carries on).
 *
 * - Redis: a socket that has commands waiting and receives nothing for `socketTimeoutMs` is
 *   destroyed; ioredis then reconnects and sends the unanswered commands again. It must outlast
 *   the longest blocking command, which has its reply at most 10 s in (BullMQ caps a worker's
 *   BZPOPMIN at 10 s, and QueueEvents' XREAD BLOCK defaults to 10 s). Not `commandTimeout`: that
 *   fails the command but keeps the dead socket (every later command fails too), fires on the
 *   blocking commands BullMQ's workers wait in, and fails commands that are only waiting for
 *   Redis to come back from a restart, which Bosun lets wait.
 * - Redis, idle sockets: TCP keep-alive from `keepAliveMs` of silence (the kernel's probes then
 *   close a dead one).
 * - NATS: a ping every `natsPingIntervalMs`; a connection with `natsMaxPingOut` pings
 *   unanswered at the next one is stale, and the client reconnects. Pings run on idle
 *   connections too.
 */
export const DEAD_LINK = {
  socketTimeoutMs: 12_000,
  keepAliveMs: 5_000,
  natsPingIntervalMs: 4_000,
  natsMaxPingOut: 2,
} as const;

/** Options of {@link createRedis}. */
export interface CreateRedisOptions {
  /** The client name Redis shows in `CLIENT LIST`. */
  name?: string;
}

/** What {@link createRedis} hands to ioredis: the nodes of a Cluster, or one URL, and the options. */
export type RedisClientOptions =
  | { cluster: false; url: string; options: RedisOptions }
  | { cluster: true; nodes: { host: string; port: number }[]; options: ClusterOptions };

/** Node's TLS options for a client: CAs, client certificate and key (files read at start-up). */
function tlsOptions(tls: TlsMaterial): { ca?: string; cert?: string; key?: string } {
  return { ...(tls.ca ? { ca: tls.ca } : {}), ...(tls.cert && tls.key ? { cert: tls.cert, key: tls.key.reveal() } : {}) };
}

/**
 * The ioredis options for `settings`: the one place that turns the environment's URLs, TLS files
 * and credentials into a Redis client's options, for every client Bosun opens (services, CLI,
 * BullMQ's duplicates of them, Cluster node connections).
 */
export function redisClientOptions(settings: RedisSettings, options: CreateRedisOptions = {}): RedisClientOptions {
  // Back off up to 2 s between reconnect attempts, forever: a service outlives a Redis restart.
  const retryStrategy = (times: number) => Math.min(50 * times, 2_000);
  const common: RedisOptions = {
    // What BullMQ workers require: commands wait across a Redis restart instead of failing.
    maxRetriesPerRequest: null,
    enableReadyCheck: true,
    // A link that stops answering is found in seconds and handled like a reset (DEAD_LINK).
    socketTimeout: DEAD_LINK.socketTimeoutMs,
    keepAlive: DEAD_LINK.keepAliveMs,
    // The commands issued in one pass of the event loop leave in one write (redis-writes.ts).
    ...(settings.coalesceWrites ? { Connector: CoalescingConnector } : {}),
    connectionName: options.name,
    ...(settings.username !== undefined ? { username: settings.username } : {}),
    ...(settings.password !== undefined ? { password: settings.password.reveal() } : {}),
    ...(settings.tls ? { tls: tlsOptions(settings.tls) } : {}),
  };
  if (settings.cluster) {
    return {
      cluster: true,
      nodes: settings.urls.map((u) => {
        const parsed = new URL(u);
        return { host: parsed.hostname, port: Number(parsed.port || 6379) };
      }),
      options: { clusterRetryStrategy: retryStrategy, enableReadyCheck: true, redisOptions: common },
    };
  }
  // The URL carries no credentials (readEnv took them out), so these options are the only ones.
  return { cluster: false, url: settings.urls[0]!, options: { ...common, retryStrategy } };
}

/**
 * Opens a Redis connection for BullMQ and Bosun's own keys, from the environment's settings
 * (`readEnv().redis`): one server, or a Redis Cluster; TLS and credentials as configured.
 * BullMQ's `duplicate()`s of it inherit all of it.
 */
export function createRedis(settings: RedisSettings, options: CreateRedisOptions = {}): RedisClient {
  const o = redisClientOptions(settings, options);
  return o.cluster ? new Cluster(o.nodes, o.options) : new Redis(o.url, o.options);
}

/** Whether a prefix is a Redis Cluster hash tag, `{name}`: every key under it hashes to one slot. */
export function isHashTagged(prefix: string): boolean {
  return /^\{[^{}]+\}$/.test(prefix);
}

/**
 * Refuses a topology Bosun cannot run on safely: a Cluster client with a prefix that is not a
 * hash tag (BullMQ flows and runs span keys that must share one slot), or a plain client
 * pointed at a Cluster node (it would fail on the first key in another slot).
 */
export async function checkRedisTopology(redis: RedisClient, prefix: string): Promise<void> {
  if (redis instanceof Cluster) {
    if (!isHashTagged(prefix)) {
      throw new BosunError(
        'unsafe_prefix',
        `BOSUN_PREFIX "${prefix}" is not safe on Redis Cluster: use a hash tag such as {${prefix.replace(/[{}]/g, '')}} so that every key of a queue and of a run hashes to one slot (see docs/scaling.md)`,
      );
    }
    return;
  }
  const info = await redis.info('cluster');
  if (/cluster_enabled:1/.test(info)) {
    throw new BosunError(
      'cluster_not_configured',
      'REDIS_URL points at a Redis Cluster node: set REDIS_CLUSTER=1 (or list the nodes, comma-separated) and a hash-tagged BOSUN_PREFIX such as {bosun} (see docs/scaling.md)',
    );
  }
}

/**
 * The server refused Bosun's connection settings (credentials, certificates): trying again will
 * not help. The message names the variables to check and never holds a secret.
 */
export class ConnectionSettingsError extends BosunError {
  constructor(
    code: 'redis_auth_failed' | 'redis_tls_failed' | 'nats_auth_failed' | 'nats_tls_failed',
    message: string,
    cause: Error,
    settings: string[],
  ) {
    super(code, message, { cause: plainError(cause), data: { settings } });
    this.name = 'ConnectionSettingsError';
  }
}

/**
 * A copy of a client library's error with its message and code only: ioredis puts the arguments
 * of the failed command on its errors, and those of AUTH are the user and password.
 */
function plainError(err: Error): Error {
  const copy = new Error(err.message);
  copy.name = err.name;
  const code = (err as NodeJS.ErrnoException).code;
  if (typeof code === 'string') Object.assign(copy, { code });
  return copy;
}

/** Node's codes for a server certificate that no trusted CA signed. */
const UNKNOWN_CA = new Set([
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_SIGNATURE_FAILURE',
]);
/** TLS alerts a server sends when it does not accept the client's certificate. */
const CLIENT_CERT_REFUSED = new Set([
  'ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE',
  'ERR_SSL_TLSV1_ALERT_UNKNOWN_CA',
  'ERR_SSL_SSLV3_ALERT_CERTIFICATE_UNKNOWN',
  'ERR_SSL_SSLV3_ALERT_CERTIFICATE_EXPIRED',
  'ERR_SSL_TLSV1_ALERT_DECRYPT_ERROR',
  'ERR_SSL_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE',
]);
const CLIENT_CERT_REQUIRED = new Set(['ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED']);
const NOT_TLS = new Set(['ERR_SSL_WRONG_VERSION_NUMBER', 'ERR_SSL_PACKET_LENGTH_TOO_LONG', 'ERR_SSL_HTTP_REQUEST']);

/**
 * What a TLS failure means and which variables to check, from Node's error code; undefined for
 * errors that are not about TLS settings.
 */
function tlsFailure(err: Error, tls: TlsMaterial | undefined, url: string): { what: string; settings: string[] } | undefined {
  const code = (err as NodeJS.ErrnoException).code;
  if (typeof code !== 'string') return undefined;
  const v = tls?.vars;
  const prefix = url === 'REDIS_URL' ? 'REDIS' : 'NATS';
  const ca = v?.ca ?? `${prefix}_TLS_CA_FILE`;
  const cert = v?.cert ?? `${prefix}_TLS_CERT_FILE`;
  const key = v?.key ?? `${prefix}_TLS_KEY_FILE`;
  if (UNKNOWN_CA.has(code)) {
    return {
      what: `certificate signed by an unknown CA (${code}) — ${tls?.ca ? `check ${ca}` : `set ${ca} to the CA that signed the server's certificate`}`,
      settings: [ca],
    };
  }
  if (code === 'CERT_HAS_EXPIRED' || code === 'CERT_NOT_YET_VALID')
    return { what: `the server's certificate ${code === 'CERT_HAS_EXPIRED' ? 'has expired' : 'is not valid yet'} (${code})`, settings: [] };
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID')
    return { what: `the server's certificate does not name the host in ${url} (${code}) — connect by a name it lists`, settings: [url] };
  if (CLIENT_CERT_REQUIRED.has(code)) {
    return {
      what: `the server requires a client certificate (${code}) — ${tls?.cert ? `check ${cert} and ${key}` : `set ${cert} and ${key}`}`,
      settings: [cert, key],
    };
  }
  if (CLIENT_CERT_REFUSED.has(code))
    return {
      what: `the server refused the client certificate (${code}) — check ${cert} and ${key}: a CA the server trusts must sign it`,
      settings: [cert, key],
    };
  if (NOT_TLS.has(code)) return { what: `the server does not speak TLS on this port (${code}) — check ${url}`, settings: [url] };
  return undefined;
}

/** The first word of a Redis error reply is its code (`WRONGPASS`, `NOAUTH`, `ERR`). */
function redisReplyCode(err: Error): string | undefined {
  return err.name === 'ReplyError' ? /^[A-Z]+/.exec(err.message)?.[0] : undefined;
}

/** A {@link ConnectionSettingsError} when `err` means Redis refused the settings, else undefined. */
export function redisSettingsFailure(err: Error, settings: RedisSettings): ConnectionSettingsError | undefined {
  const reply = redisReplyCode(err);
  const authError = reply === 'WRONGPASS' || reply === 'NOAUTH' || (reply === 'ERR' && /\bAUTH\b/.test(err.message));
  if (authError) {
    const what =
      reply === 'NOAUTH' && settings.password === undefined
        ? 'the server requires a password: set REDIS_PASSWORD_FILE (and REDIS_USERNAME for an ACL user)'
        : `check ${settings.authFrom ?? 'REDIS_PASSWORD_FILE'}`;
    return new ConnectionSettingsError('redis_auth_failed', `Redis: authentication failed (${err.message.trim()}) — ${what}`, err, [
      settings.authFrom ?? 'REDIS_PASSWORD_FILE',
    ]);
  }
  const tls = settings.tls ? tlsFailure(err, settings.tls, 'REDIS_URL') : undefined;
  if (tls) return new ConnectionSettingsError('redis_tls_failed', `Redis TLS: ${tls.what}`, err, tls.settings);
  return undefined;
}

/**
 * Resolves when `redis` answers. Rejects at once with a {@link ConnectionSettingsError} when the
 * server refuses the credentials or the TLS settings, or after `timeoutMs` with a message naming
 * the URL and the last error.
 */
export async function waitForRedis(redis: RedisClient, settings: RedisSettings, timeoutMs = 10_000): Promise<void> {
  let last: Error | undefined;
  let refuse: (err: ConnectionSettingsError) => void = () => undefined;
  const refused = new Promise<never>((_, reject) => (refuse = reject));
  // Raced below; a refusal that comes after the race is decided has nobody left to tell.
  refused.catch(() => undefined);
  const failureOf = (err: Error): ConnectionSettingsError | undefined => {
    last = err;
    // A Cluster client reports its nodes' failures on 'node error', and wraps the last one.
    const nodeError = (err as Error & { lastNodeError?: Error }).lastNodeError;
    return redisSettingsFailure(err, settings) ?? (nodeError ? redisSettingsFailure(nodeError, settings) : undefined);
  };
  const onError = (err: Error) => {
    const failure = failureOf(err);
    if (failure) refuse(failure);
  };
  redis.on('error', onError);
  redis.on('node error', onError);
  const started = Date.now();
  const noAnswer = new Error('no answer in 2000 ms');
  try {
    for (;;) {
      try {
        await Promise.race([redis.ping(), refused, pause(2_000).then(() => Promise.reject(noAnswer))]);
        return;
      } catch (err) {
        if (err instanceof ConnectionSettingsError) throw err;
        const failure = err === noAnswer ? undefined : failureOf(err as Error);
        if (failure) throw failure;
        if (Date.now() - started > timeoutMs) {
          const reason = last ?? (err as Error);
          // A server that closes the connection without a word: plain text sent to a TLS port, or
          // a TLS server that wants a client certificate before its alert could be read.
          const reset = (reason as NodeJS.ErrnoException).code === 'ECONNRESET';
          const hint = !reset
            ? ''
            : !settings.tls
              ? ' If the server speaks TLS, use rediss://.'
              : !settings.tls.cert
                ? ` If the server requires client certificates, set ${settings.tls.vars.cert} and ${settings.tls.vars.key}.`
                : '';
          throw new BosunError(
            'redis_unreachable',
            `Redis at ${settings.display} did not answer within ${timeoutMs} ms (${reason.message}). Start it or set REDIS_URL.${hint}`,
            {
              cause: plainError(reason),
            },
          );
        }
        await Promise.race([refused, pause(200)]);
      }
    }
  } finally {
    redis.off('error', onError);
    redis.off('node error', onError);
  }
}

/** A wait between connection tries that does not keep the process alive. */
function pause(ms: number): Promise<boolean> {
  return sleep(ms, undefined, { unref: true });
}

/**
 * The NATS client options for `settings`: the one place that turns the environment's servers,
 * TLS files and credentials into connection options, for every NATS connection Bosun opens.
 * Secrets are handed over as functions, so the options object holds none.
 */
export function natsConnectOptions(settings: NatsSettings, options: { name?: string } = {}): NodeConnectionOptions {
  const auth = settings.auth;
  const bytes = (s: string) => new TextEncoder().encode(s);
  const authenticator =
    auth.kind === 'creds'
      ? credsAuthenticator(() => bytes(auth.creds.reveal()))
      : auth.kind === 'nkey'
        ? nkeyAuthenticator(() => bytes(auth.seed.reveal()))
        : auth.kind === 'token'
          ? tokenAuthenticator(() => auth.token.reveal())
          : auth.kind === 'user'
            ? usernamePasswordAuthenticator(auth.user, () => auth.password.reveal())
            : undefined;
  return {
    servers: [...settings.servers],
    name: options.name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    timeout: 5_000,
    // A server that stops answering is taken for gone within about 12 s (DEAD_LINK), not minutes.
    pingInterval: DEAD_LINK.natsPingIntervalMs,
    maxPingOut: DEAD_LINK.natsMaxPingOut,
    // Every JetStream publish is a request; async traces would build two Error objects
    // (stack capture included) per event for context we never show.
    noAsyncTraces: true,
    // An object, even empty, makes TLS required (tls:// URLs, or TLS files set).
    ...(settings.tls ? { tls: tlsOptions(settings.tls) } : {}),
    ...(authenticator ? { authenticator } : {}),
  };
}

/** A {@link ConnectionSettingsError} when `err` means NATS refused the settings, else undefined. */
export function natsSettingsFailure(err: Error, settings: NatsSettings): ConnectionSettingsError | undefined {
  const auth = settings.auth;
  const from = auth.kind === 'none' ? undefined : auth.from;
  if (err instanceof UserAuthenticationExpiredError) {
    return new ConnectionSettingsError(
      'nats_auth_failed',
      `NATS: the user's credentials have expired (${err.message}) — renew ${from ?? 'NATS_CREDS_FILE'}`,
      err,
      [from ?? 'NATS_CREDS_FILE'],
    );
  }
  if (err instanceof AuthorizationError) {
    const what = from
      ? `check ${from}`
      : 'the server requires credentials: set NATS_USER and NATS_PASSWORD_FILE, NATS_TOKEN_FILE, NATS_NKEY_SEED_FILE or NATS_CREDS_FILE';
    return new ConnectionSettingsError('nats_auth_failed', `NATS: ${err.message.toLowerCase()} — ${what}`, err, from ? [from] : []);
  }
  const tls = tlsFailure(err, settings.tls, 'NATS_URL');
  if (tls) return new ConnectionSettingsError('nats_tls_failed', `NATS TLS: ${tls.what}`, err, tls.settings);
  return undefined;
}

/**
 * Connects to NATS with the environment's settings (`readEnv().nats`), reconnecting forever
 * after a disconnect. Rejects with a {@link ConnectionSettingsError} when the server refuses the
 * credentials or the TLS settings, else with a message naming the URL when the first connection
 * fails.
 */
export async function connectNats(settings: NatsSettings, options: { name?: string } = {}): Promise<NatsConnection> {
  try {
    return await connect(natsConnectOptions(settings, options));
  } catch (err) {
    const failure = natsSettingsFailure(err as Error, settings);
    if (failure) throw failure;
    // A server that verifies client certificates may close the connection without a word.
    const hint =
      settings.tls && !settings.tls.cert
        ? ` If the server verifies client certificates, set ${settings.tls.vars.cert} and ${settings.tls.vars.key}.`
        : '';
    throw new BosunError(
      'nats_unreachable',
      `NATS at ${settings.display} is unreachable (${errorMessage(err)}). Start it or set NATS_URL.${hint}`,
      { cause: plainError(err as Error) },
    );
  }
}
