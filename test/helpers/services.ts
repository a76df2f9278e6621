import { spawnSync } from 'node:child_process';
import { createConnection } from 'node:net';

/** Where the tests find Redis and NATS. */
export interface ServiceUrls {
  redisUrl: string;
  natsUrl: string;
}

function reachable(url: string, defaultPort: number): Promise<boolean> {
  const u = new URL(url.split(',')[0] ?? url);
  return new Promise((resolve) => {
    const socket = createConnection({ host: u.hostname || '127.0.0.1', port: Number(u.port || defaultPort) });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(2_000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

function dockerAvailable(): boolean {
  return spawnSync('docker', ['info'], { stdio: 'ignore', timeout: 10_000 }).status === 0;
}

/**
 * Finds Redis and NATS for the test run: `REDIS_URL` / `NATS_URL` (default: the local ports).
 * When nothing answers and Docker is available, starts them with testcontainers; otherwise
 * fails with a message that says what to do. Tests are never skipped silently.
 */
export async function resolveServices(): Promise<{ urls: ServiceUrls; stop: () => Promise<void> }> {
  let redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  let natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
  const stops: (() => Promise<void>)[] = [];
  const redisUp = await reachable(redisUrl, 6379);
  const natsUp = await reachable(natsUrl, 4222);
  if ((!redisUp || !natsUp) && dockerAvailable()) {
    const { GenericContainer, Wait } = await import('testcontainers');
    if (!redisUp) {
      const c = await new GenericContainer('redis:7-alpine').withExposedPorts(6379).start();
      redisUrl = `redis://${c.getHost()}:${c.getMappedPort(6379)}`;
      stops.push(async () => void (await c.stop()));
    }
    if (!natsUp) {
      const c = await new GenericContainer('nats:2.10-alpine')
        .withCommand(['-js'])
        .withExposedPorts(4222)
        .withWaitStrategy(Wait.forLogMessage(/Server is ready/))
        .start();
      natsUrl = `nats://${c.getHost()}:${c.getMappedPort(4222)}`;
      stops.push(async () => void (await c.stop()));
    }
  } else {
    const missing = [!redisUp && `Redis at ${redisUrl}`, !natsUp && `NATS at ${natsUrl}`].filter(Boolean);
    if (missing.length > 0) {
      throw new Error(
        `The tests need real services: ${missing.join(' and ')} did not answer, and Docker is not available for testcontainers. ` +
          'Start them (redis-server; nats-server -js) or set REDIS_URL / NATS_URL. .ci/run starts them when it can.',
      );
    }
  }
  return { urls: { redisUrl, natsUrl }, stop: async () => void (await Promise.all(stops.map((s) => s()))) };
}
