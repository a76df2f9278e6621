import { createServer, type Server } from 'node:http';
import type { Logger } from '@bosun/config';

/** A started service. */
export interface ServiceHandle {
  /** Stops taking work, finishes or hands back what it holds, closes its connections. */
  close(): Promise<void>;
}

/** Options of {@link runService}. */
export interface RunServiceOptions {
  name: string;
  log: Logger;
  start: () => Promise<ServiceHandle>;
  /**
   * Time given to {@link ServiceHandle.close} after SIGTERM before the process exits anyway.
   * Default: `BOSUN_GRACE_MS` from the environment, else 30 s.
   */
  graceMs?: number;
}

/**
 * Runs a service process: starts it (a start-up error prints its message and exits 1), and on
 * SIGTERM or SIGINT closes it and exits 0 — or exits 1 if closing outlasts the grace period, in
 * which case unfinished jobs are picked up elsewhere by BullMQ's stalled-job check.
 */
export function runService(options: RunServiceOptions): void {
  const { name, log } = options;
  const rawGrace = process.env.BOSUN_GRACE_MS;
  const envGrace = rawGrace === undefined ? undefined : Number(rawGrace);
  if (envGrace !== undefined && !(Number.isInteger(envGrace) && envGrace > 0)) {
    process.stderr.write(`${name}: BOSUN_GRACE_MS: "${rawGrace}" must be a positive number of milliseconds\n`);
    process.exit(1);
  }
  const grace = options.graceMs ?? envGrace ?? 30_000;
  let handle: ServiceHandle | undefined;
  let stopping = false;
  const health = startHealthServer(name, log, () => (stopping ? 'stopping' : handle ? 'ready' : 'starting'));

  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal, graceMs: grace }, `${name} stopping`);
    const timer = setTimeout(() => {
      log.error({ graceMs: grace }, `${name} did not stop within the grace period; exiting`);
      process.exit(1);
    }, grace);
    timer.unref();
    Promise.resolve(handle?.close())
      .then(() => health?.close())
      .then(() => {
        log.info(`${name} stopped`);
        log.flush?.();
        process.exit(0);
      })
      .catch((err: unknown) => {
        log.error({ err }, `${name} failed to stop cleanly`);
        process.exit(1);
      });
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));

  options
    .start()
    .then((h) => {
      handle = h;
      log.info(`${name} started`);
      if (stopping) void h.close().then(() => process.exit(0));
    })
    .catch((err: unknown) => {
      const message = err instanceof Error ? err.message : String(err);
      log.fatal({ err }, `${name} failed to start: ${message}`);
      process.stderr.write(`${name}: ${message}\n`);
      process.exit(1);
    });
}

/**
 * With `BOSUN_HEALTH_PORT` set, serves `GET /healthz` (200 while the process runs) and
 * `GET /readyz` (200 once started, 503 while starting or draining) for orchestrators' probes.
 */
function startHealthServer(name: string, log: Logger, state: () => 'starting' | 'ready' | 'stopping'): Server | undefined {
  const raw = process.env.BOSUN_HEALTH_PORT;
  if (!raw) return undefined;
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    process.stderr.write(`${name}: BOSUN_HEALTH_PORT: "${raw}" must be a port number\n`);
    process.exit(1);
  }
  const server = createServer((req, res) => {
    const s = state();
    const ok = req.url === '/healthz' || (req.url === '/readyz' && s === 'ready');
    const known = req.url === '/healthz' || req.url === '/readyz';
    res.writeHead(known ? (ok ? 200 : 503) : 404, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ service: name, state: s }));
  });
  server.on('error', (err) => log.error({ err }, 'health server error'));
  server.listen(port, () => log.info({ port }, 'health endpoints on /healthz and /readyz'));
  return server;
}
