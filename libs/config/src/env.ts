import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { PREFIX_PATTERN, errorMessage } from '@bosun/contract';
import { ConfigError } from './cluster.js';
import { findUp } from './paths.js';
import { readNatsSettings, readRedisSettings, type NatsSettings, type RedisSettings } from './connections.js';

/** What every Bosun process reads from its environment. */
export interface BosunEnv {
  /** `REDIS_URL`, default `redis://127.0.0.1:6379`; several comma-separated URLs name Redis Cluster nodes. */
  readonly redisUrl: string;
  /** Redis Cluster: `REDIS_CLUSTER=1`, or several URLs in `REDIS_URL`. */
  readonly redisCluster: boolean;
  /** `NATS_URL`, default `nats://127.0.0.1:4222`. */
  readonly natsUrl: string;
  /** Redis: URLs, TLS and credentials, files read; what every Redis client is built from. */
  readonly redis: RedisSettings;
  /** NATS: servers, TLS and credentials, files read; what every NATS connection is built from. */
  readonly nats: NatsSettings;
  /** `BOSUN_PREFIX`, default `bosun`: root of every Redis key and NATS subject. */
  readonly prefix: string;
  /** `BOSUN_CONFIG`, default the bundled demo config. */
  readonly configFile: string;
  /** `GEMINI_API_KEY`, when set. A secret: never log it. */
  readonly geminiApiKey: string | undefined;
  /** `OPENAI_API_KEY`, when set: the key of `model.provider: openai`. A secret: never log it. */
  readonly openaiApiKey: string | undefined;
  /** `ANTHROPIC_API_KEY`, when set: the key of `model.provider: anthropic`. A secret: never log it. */
  readonly anthropicApiKey: string | undefined;
  /** `LOG_LEVEL`, default `info`. */
  readonly logLevel: string;
  /** `BOSUN_STREAM_REPLICAS`: replicas of the runs stream, default 1; set it (e.g. 3) on a NATS cluster. */
  readonly streamReplicas: number;
  /** `BOSUN_GRACE_MS`: how long a service may take to stop after SIGTERM; unset: the service's default (30 s). */
  readonly graceMs: number | undefined;
  /** `BOSUN_HEALTH_PORT`: the port of a service's `/healthz` and `/readyz`; unset: none. */
  readonly healthPort: number | undefined;
  /** `USER`, trimmed, when set: the CLI's default for `--by` (who decided, acknowledged or cancelled). */
  readonly user: string | undefined;
  /** `BOSUN_TOKEN`, when set: the CLI's per-person token (the config's `operators`). A secret: never log it. */
  readonly operatorToken: string | undefined;
}

/** One variable of {@link ENV_VARS}. */
export interface EnvVarDoc {
  /** What it sets. */
  readonly about: string;
  /** Its default, in words; absent: unset means off (or none). */
  readonly default?: string;
  /** Whether its value is a secret (never logged). */
  readonly secret?: boolean;
  /** Read by the CLI only; the services ignore it. */
  readonly cliOnly?: boolean;
}

/**
 * Every environment variable a Bosun process reads (services, CLI, `bosun demo`), by name: the
 * documented list that {@link readEnv} reads and nothing else (a unit test holds it to that).
 * The config file may name further variables of its own in `${VAR}` placeholders.
 */
export const ENV_VARS: Readonly<Record<string, EnvVarDoc>> = Object.freeze({
  REDIS_URL: { about: 'Redis URL(s); several comma-separated URLs name Redis Cluster nodes', default: 'redis://127.0.0.1:6379' },
  REDIS_CLUSTER: { about: 'connect as a Redis Cluster client (1, true or yes)' },
  REDIS_USERNAME: { about: 'Redis ACL user' },
  REDIS_PASSWORD: { about: 'Redis password', secret: true },
  REDIS_PASSWORD_FILE: { about: 'file holding the Redis password' },
  REDIS_TLS_CA_FILE: { about: 'PEM CA for rediss:// URLs' },
  REDIS_TLS_CERT_FILE: { about: 'PEM client certificate for Redis' },
  REDIS_TLS_KEY_FILE: { about: 'PEM private key of the Redis client certificate' },
  REDIS_COALESCE_WRITES: {
    about: 'send the Redis commands of one event-loop pass in one socket write (0 or off: one write each)',
    default: 'on',
  },
  NATS_URL: { about: 'NATS server(s)', default: 'nats://127.0.0.1:4222' },
  NATS_USER: { about: 'NATS user (with NATS_PASSWORD or NATS_PASSWORD_FILE)' },
  NATS_PASSWORD: { about: 'NATS password', secret: true },
  NATS_PASSWORD_FILE: { about: 'file holding the NATS password' },
  NATS_TOKEN: { about: 'NATS token', secret: true },
  NATS_TOKEN_FILE: { about: 'file holding the NATS token' },
  NATS_NKEY_SEED_FILE: { about: 'file holding a NATS user NKEY seed' },
  NATS_CREDS_FILE: { about: 'NATS credentials file (user JWT and NKEY seed)' },
  NATS_TLS_CA_FILE: { about: 'PEM CA for NATS' },
  NATS_TLS_CERT_FILE: { about: 'PEM client certificate for NATS' },
  NATS_TLS_KEY_FILE: { about: 'PEM private key of the NATS client certificate' },
  BOSUN_PREFIX: { about: 'root of every Redis key and NATS subject', default: 'bosun' },
  BOSUN_CONFIG: { about: 'the cluster config file', default: 'the bundled infra/demo/bosun.yaml' },
  BOSUN_STREAM_REPLICAS: { about: 'replicas of the runs stream', default: '1' },
  GEMINI_API_KEY: { about: 'selects Gemini for agents whose model provider is auto', secret: true },
  OPENAI_API_KEY: { about: 'the API key of agents whose model provider is openai', secret: true },
  ANTHROPIC_API_KEY: { about: 'the API key of agents whose model provider is anthropic', secret: true },
  LOG_LEVEL: { about: 'the pino log level', default: 'info' },
  BOSUN_GRACE_MS: { about: 'how long a service may take to stop after SIGTERM (ms)', default: '30000' },
  BOSUN_HEALTH_PORT: { about: 'port of /healthz and /readyz' },
  USER: { about: "the CLI's default for --by", cliOnly: true },
  BOSUN_TOKEN: { about: "the CLI's per-person operator token (the config's operators)", secret: true, cliOnly: true },
} satisfies Record<string, EnvVarDoc>);

/** The demo config, the default of `BOSUN_CONFIG`, relative to the repository (or image) root. */
const DEMO_CONFIG = 'infra/demo/bosun.yaml';

/** The bundled demo config: `infra/demo/bosun.yaml` at the repository root. */
export function defaultConfigFile(): string {
  try {
    return join(findUp(import.meta.url, DEMO_CONFIG), DEMO_CONFIG);
  } catch (err) {
    throw new ConfigError(`BOSUN_CONFIG: not set, and the demo config it defaults to is not here (${errorMessage(err)})`);
  }
}

/**
 * Reads and checks the environment (the variables of {@link ENV_VARS}, nothing else) into a
 * frozen object: each process calls it once at start-up — a service through `runService`, which
 * hands the object to its `start` and `check` — and takes what it needs from it. A bad value is
 * a {@link ConfigError} naming the variable.
 */
export function readEnv(env: NodeJS.ProcessEnv = process.env): BosunEnv {
  const prefix = env.BOSUN_PREFIX ?? 'bosun';
  if (!PREFIX_PATTERN.test(prefix)) {
    throw new ConfigError(
      `BOSUN_PREFIX: "${prefix}" must be 1 to 64 characters of A-Z, a-z, 0-9, "_" or "-", or such a name in braces ({bosun}) for Redis Cluster`,
    );
  }
  const redisUrl = env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  // TLS files and secrets are read here, once, at start-up: a missing one names its variable.
  const redis = readRedisSettings(env);
  const redisCluster = redis.cluster;
  const natsUrl = env.NATS_URL ?? 'nats://127.0.0.1:4222';
  const nats = readNatsSettings(env);
  const configFile = resolve(env.BOSUN_CONFIG ?? defaultConfigFile());
  if (!existsSync(configFile)) throw new ConfigError(`BOSUN_CONFIG: file ${configFile} does not exist`);
  const geminiApiKey = env.GEMINI_API_KEY && env.GEMINI_API_KEY.trim() !== '' ? env.GEMINI_API_KEY : undefined;
  const openaiApiKey = env.OPENAI_API_KEY && env.OPENAI_API_KEY.trim() !== '' ? env.OPENAI_API_KEY : undefined;
  const anthropicApiKey = env.ANTHROPIC_API_KEY && env.ANTHROPIC_API_KEY.trim() !== '' ? env.ANTHROPIC_API_KEY : undefined;
  const streamReplicas = Number(env.BOSUN_STREAM_REPLICAS ?? 1);
  if (!Number.isInteger(streamReplicas) || streamReplicas < 1 || streamReplicas > 5) {
    throw new ConfigError(`BOSUN_STREAM_REPLICAS: "${env.BOSUN_STREAM_REPLICAS ?? ''}" must be 1 to 5`);
  }
  const rawGrace = env.BOSUN_GRACE_MS;
  const graceMs = rawGrace === undefined ? undefined : Number(rawGrace);
  if (graceMs !== undefined && !(Number.isInteger(graceMs) && graceMs > 0)) {
    throw new ConfigError(`BOSUN_GRACE_MS: "${rawGrace}" must be a positive number of milliseconds`);
  }
  const rawPort = env.BOSUN_HEALTH_PORT;
  const healthPort = rawPort ? Number(rawPort) : undefined;
  if (healthPort !== undefined && !(Number.isInteger(healthPort) && healthPort >= 0 && healthPort <= 65535)) {
    throw new ConfigError(`BOSUN_HEALTH_PORT: "${rawPort}" must be a port number`);
  }
  const user = env.USER?.trim() || undefined;
  const operatorToken = env.BOSUN_TOKEN?.trim() || undefined;
  return Object.freeze({
    redisUrl,
    redisCluster,
    natsUrl,
    redis,
    nats,
    prefix,
    configFile,
    geminiApiKey,
    openaiApiKey,
    anthropicApiKey,
    logLevel: env.LOG_LEVEL ?? 'info',
    streamReplicas,
    graceMs,
    healthPort,
    user,
    operatorToken,
  });
}

/** A URL with its password (and user) replaced, safe to print. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    if (u.username && u.password) u.username = '***';
    return u.toString();
  } catch {
    return '(unparseable url)';
  }
}
