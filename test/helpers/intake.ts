import { Queue } from 'bullmq';
import { DEAD_LETTER_QUEUE, INCIDENTS_QUEUE, type DeadLetter } from '@bosun/contract';
import { demoConfig, writeConfig, type TestContext } from './context.js';
import { startService, type ServiceProcess } from './processes.js';
import { freePort } from './servers.js';

/** One intake process of a service-layer test: its base URL, its process, and the queues it writes. */
export interface IntakeUnderTest {
  base: string;
  port: number;
  process: ServiceProcess;
  /** The config file it was started with. */
  configFile: string;
  incidents: Queue;
  deadLetterQueue: Queue;
  /** Posts `body` to `/alerts/<source>` (`content-type: application/json` unless `headers` says otherwise). */
  post(source: string, body: string, headers?: Record<string, string>): Promise<Response>;
  /** The `poison` dead letters of a source, newest last. */
  poison(source: string): Promise<DeadLetter[]>;
  close(): Promise<void>;
}

/**
 * Starts the intake as a process of its own (no coordinator, gateway or specialist) with the
 * given `intake` section over the demo config, at log level `info`: for the intake's HTTP
 * surface, against real Redis and NATS. `env` adds variables (secrets, another `REDIS_URL`);
 * `delivery` is the config's `delivery` section (the intake delivers too); `config` sets other
 * top-level sections (`operators`, say).
 */
export async function startIntake(
  ctx: TestContext,
  intake: Record<string, unknown>,
  options: { env?: Record<string, string>; name?: string; delivery?: Record<string, unknown>; config?: Record<string, unknown> } = {},
): Promise<IntakeUnderTest> {
  const port = await freePort();
  const config = { ...demoConfig(), ...options.config };
  config.intake = { host: '127.0.0.1', ...intake, port };
  if (options.delivery) config.delivery = options.delivery;
  const name = options.name ?? 'intake';
  const configFile = writeConfig(ctx, config, `${name}.json`);
  const process = startService('intake', { ...ctx.env, LOG_LEVEL: 'info', BOSUN_CONFIG: configFile, ...options.env }, { name });
  const incidents = new Queue(INCIDENTS_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
  const deadLetterQueue = new Queue(DEAD_LETTER_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
  try {
    await process.ready();
  } catch (err) {
    await Promise.all([process.stop(), incidents.close(), deadLetterQueue.close()]);
    throw err;
  }
  const base = `http://127.0.0.1:${port}`;
  return {
    base,
    port,
    process,
    configFile,
    incidents,
    deadLetterQueue,
    post: (source, body, headers = {}) =>
      fetch(`${base}/alerts/${source}`, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } }),
    async poison(source) {
      const jobs = (await deadLetterQueue.getWaiting(0, 1000)).sort((a, b) => a.timestamp - b.timestamp);
      const all = jobs.map((j) => j.data as DeadLetter);
      return all.filter((d) => d.kind === 'poison' && d.reason.startsWith(`intake/${source}:`));
    },
    async close() {
      await process.stop();
      await incidents.close();
      await deadLetterQueue.close();
    },
  };
}
