import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PREFIX_PATTERN } from '@bosun/contract';
import { ConfigError } from './cluster.js';
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
  /** `LOG_LEVEL`, default `info`. */
  readonly logLevel: string;
  /** `BOSUN_STREAM_REPLICAS`: replicas of the runs stream, default 1; set it (e.g. 3) on a NATS cluster. */
  readonly streamReplicas: number;
}

/** The bundled demo config: `infra/demo/bosun.yaml` at the repository root. */
export function defaultConfigFile(): string {
  // libs/config/dist/env.js → repository root is three levels up.
  const here = dirname(fileURLToPath(import.meta.url));
  return resolve(here, '../../../infra/demo/bosun.yaml');
}

/** Reads and checks the environment once; a bad value is an error naming the variable. */
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
  const streamReplicas = Number(env.BOSUN_STREAM_REPLICAS ?? 1);
  if (!Number.isInteger(streamReplicas) || streamReplicas < 1 || streamReplicas > 5) {
    throw new ConfigError(`BOSUN_STREAM_REPLICAS: "${env.BOSUN_STREAM_REPLICAS ?? ''}" must be 1 to 5`);
  }
  return Object.freeze({
    redisUrl,
    redisCluster,
    natsUrl,
    redis,
    nats,
    prefix,
    configFile,
    geminiApiKey,
    logLevel: env.LOG_LEVEL ?? 'info',
    streamReplicas,
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
