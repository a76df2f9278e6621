import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inject } from 'vitest';
import { Redis } from 'ioredis';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { parse as parseYaml } from 'yaml';
import { assertFreshBundles } from './bundles.js';
import { ENTRY } from './paths.js';

/** What one test file gets: its own prefix, connections, a temp folder, and clean-up. */
export interface TestContext {
  prefix: string;
  redisUrl: string;
  natsUrl: string;
  redis: Redis;
  nats: NatsConnection;
  dir: string;
  /** Environment for the processes this file starts. */
  env: Record<string, string>;
  close(): Promise<void>;
}

/**
 * Opens a test context with a random `BOSUN_PREFIX`, so test files never share queues, keys or
 * subjects. `close()` deletes the prefix's keys and stream and closes every connection.
 */
export async function openContext(label: string): Promise<TestContext> {
  const redisUrl = inject('redisUrl');
  const natsUrl = inject('natsUrl');
  const prefix = `t-${label}-${randomUUID().slice(0, 8)}`;
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const nats = await connect({ servers: natsUrl });
  const dir = mkdtempSync(join(tmpdir(), `bosun-${label}-`));
  return {
    prefix,
    redisUrl,
    natsUrl,
    redis,
    nats,
    dir,
    env: { REDIS_URL: redisUrl, NATS_URL: natsUrl, BOSUN_PREFIX: prefix, LOG_LEVEL: 'info' },
    async close() {
      let cursor = '0';
      do {
        const [next, found] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
        cursor = next;
        if (found.length > 0) await redis.del(...found);
      } while (cursor !== '0');
      const jsm = await jetstreamManager(nats);
      await jsm.streams.delete(`${prefix}-runs`).catch(() => undefined);
      await nats.close();
      redis.disconnect();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The demo config as an object, to change and write for a test. */
export function demoConfig(): Record<string, any> {
  const config = parseYaml(readFileSync(ENTRY.demoConfig, 'utf8')) as Record<string, any>;
  // Tests run from anywhere: give the demo server an absolute path.
  assertFreshBundles();
  config.mcpServers.demo.args = [ENTRY.demoMcp];
  return config;
}

/** Writes a config (JSON is YAML) into the context's folder and returns its path. */
export function writeConfig(ctx: TestContext, config: unknown, name = 'bosun.json'): string {
  const file = join(ctx.dir, name);
  writeFileSync(file, JSON.stringify(config, null, 2));
  return file;
}
