import { errorMessage } from '@bosun/contract';
import type { ServerResponse } from 'node:http';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { readEnv, scrub, setLogLevel, type BosunEnv, type Logger } from '@bosun/config';
import { sendJson } from '../http/json.js';
import { Router } from '../http/router.js';
import { HttpServer } from '../http/server.js';
import { metrics } from '../base/metrics.js';

/** A started service. */
export interface ServiceHandle {
  /** Stops taking work, finishes or hands back what it holds, closes its connections. */
  close(): Promise<void>;
}

/** The command-line options a service declares (`node:util` parseArgs), besides `--check`. */
export type ServiceArgOptions = NonNullable<ParseArgsConfig['options']>;

/** Parsed command-line options, by name. */
export type ServiceArgs = Record<string, string | boolean | (string | boolean)[] | undefined>;

/**
 * The line a service prints on standard output once it is ready (when `/readyz` starts to
 * answer 200), whatever `LOG_LEVEL` says: one JSON object on a line of its own, among the JSON
 * log lines, e.g. `{"bosun":"ready","service":"coordinator","pid":4242}`. Documented in
 * docs/architecture.md ("Knowing that a service is ready").
 */
export function readyLine(service: string, pid: number = process.pid): string {
  return JSON.stringify({ bosun: 'ready', service, pid });
}

/** Matches a {@link readyLine}, exactly as a service prints it. */
export const READY_LINE = /^\{"bosun":"ready","service":"[a-z0-9-]+","pid":\d+\}$/;

/** Options of {@link runService}. */
export interface RunServiceOptions {
  name: string;
  log: Logger;
  /** Command-line options of this service besides `--check`; an unknown option is a usage error (exit 2). */
  args?: ServiceArgOptions;
  /** The command line to parse. Default: `process.argv.slice(2)` (`bosun serve` passes what follows its name). */
  argv?: string[];
  /** Starts the service, with its command-line options and the environment as read once at start-up. */
  start: (args: ServiceArgs, env: BosunEnv) => Promise<ServiceHandle>;
  /**
   * `--check`: checks what the service needs to start (environment, config file, Redis, NATS
   * and what else it uses) without taking any work, closes what it opened, and returns a
   * one-line summary, printed as `<name>: check ok: <summary>` (exit 0). Throws with a clear
   * message when something is wrong (`<name>: check failed: <message>` on standard error, exit 1).
   * Neither may contain a secret.
   */
  check: (args: ServiceArgs, env: BosunEnv) => Promise<string>;
  /**
   * Starts the OpenTelemetry SDK (`startTracing` of `@bosun/otel`), called once the environment
   * is read; the service starts once what it returns has resolved (so that its first span
   * records), and that is shut down (its last spans exported) after the service has closed,
   * within the grace period. An error it throws (a bad OTEL_* variable) prints its message and
   * exits 1, as a bad variable of Bosun's does; one it rejects with fails the start.
   */
  tracing?: () => Promise<{ shutdown(): Promise<void> }> | undefined;
  /**
   * Time given to {@link ServiceHandle.close} after SIGTERM before the process exits anyway.
   * Default: `BOSUN_GRACE_MS` from the environment (`BosunEnv.graceMs`), else 30 s.
   */
  graceMs?: number;
}

/**
 * Runs a service process: reads the environment once (`readEnv`; a bad variable prints its
 * message and exits 1), sets the logger's level from `LOG_LEVEL`, starts the service with that
 * environment (a start-up error prints its message and exits 1), prints
 * {@link readyLine} once started, and on SIGTERM or SIGINT closes it and exits 0 — or exits 1
 * if closing outlasts the grace period, in which case unfinished jobs are picked up elsewhere by
 * BullMQ's stalled-job check. With `--check` it runs {@link RunServiceOptions.check} instead
 * and exits 0 or 1; a bad command line exits 2.
 */
export function runService(options: RunServiceOptions): void {
  const { name, log } = options;
  const args = parseServiceArgs(options);
  if (args.check === true) {
    return runCheck(name, log, async () => options.check(args, readEnv()));
  }
  let env: BosunEnv;
  let tracing: { shutdown(): Promise<void> } | undefined;
  let tracingStarted: Promise<{ shutdown(): Promise<void> }> | undefined;
  try {
    env = readEnv();
    tracingStarted = options.tracing?.();
  } catch (err) {
    // Before LOG_LEVEL is known: the one line on standard error names the variable.
    process.stderr.write(`${name}: ${errorMessage(err)}\n`);
    process.exit(1);
  }
  setLogLevel(log, env.logLevel);
  const grace = options.graceMs ?? env.graceMs ?? 30_000;
  let handle: ServiceHandle | undefined;
  let stopping = false;
  const health =
    env.healthPort === undefined
      ? undefined
      : startHealthServer(name, log, env.healthPort, () => (stopping ? 'stopping' : handle ? 'ready' : 'starting'));
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    stopService({ name, log, grace, signal }, async () => {
      await handle?.close();
      await (await health)?.close({ graceMs: HEALTH_GRACE_MS });
      await tracing?.shutdown();
    });
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));

  Promise.resolve(tracingStarted)
    .then((t) => {
      tracing = t;
      return options.start(args, env);
    })
    .then((h) => {
      handle = h;
      log.info(`${name} started`);
      // A stop asked for while starting closes what started, as the signal handler would.
      if (stopping) return stopService({ name, log, grace, signal: 'start' }, () => h.close());
      process.stdout.write(`${readyLine(name)}\n`);
    })
    .catch((err: unknown) => {
      const message = errorMessage(err);
      log.fatal({ err }, `${name} failed to start: ${message}`);
      process.stderr.write(`${name}: ${message}\n`);
      process.exit(1);
    });
}

/** The service's command line (`--check` and its own options); a bad one prints why and exits 2. */
function parseServiceArgs(options: RunServiceOptions): ServiceArgs {
  try {
    return parseArgs({
      args: options.argv ?? process.argv.slice(2),
      options: { ...options.args, check: { type: 'boolean', default: false } },
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (err) {
    const flags = ['--check', ...Object.keys(options.args ?? {}).map((k) => `--${k}`)].join(', ');
    process.stderr.write(`${options.name}: ${errorMessage(err)} (options: ${flags})\n`);
    process.exit(2);
  }
}

/**
 * Closes a service and exits: 0 once `close` is done, 1 if it fails or outlasts the grace
 * period (then BullMQ's stalled-job check gives unfinished jobs to other processes).
 */
function stopService(stop: { name: string; log: Logger; grace: number; signal: string }, close: () => Promise<void>): void {
  const { name, log, grace, signal } = stop;
  if (signal !== 'start') log.info({ signal, graceMs: grace }, `${name} stopping`);
  const timer = setTimeout(() => {
    log.error({ graceMs: grace }, `${name} did not stop within the grace period; exiting`);
    process.exit(1);
  }, grace);
  timer.unref();
  close().then(
    () => {
      log.info(`${name} stopped`);
      log.flush?.();
      process.exit(0);
    },
    (err: unknown) => {
      log.error({ err }, `${name} failed to stop cleanly`);
      process.exit(1);
    },
  );
}

/**
 * `--check`: the logger is silenced so that standard output holds the one result line; an
 * error's message is scrubbed of known secret values before it is printed.
 */
function runCheck(name: string, log: Logger, check: () => Promise<string>): void {
  log.level = 'silent';
  check().then(
    (summary) => process.stdout.write(`${name}: check ok: ${scrub(summary)}\n`, () => process.exit(0)),
    (err: unknown) => {
      const message = errorMessage(err);
      process.stderr.write(`${name}: check failed: ${scrub(message)}\n`, () => process.exit(1));
    },
  );
}

/** How long an open probe may take once the service has stopped. */
const HEALTH_GRACE_MS = 1_000;

/**
 * Serves `GET /healthz` (200 while the process runs), `GET /readyz` (200 once started, 503
 * while starting or draining) and `GET /metrics` (Prometheus text, docs/observability.md) on `port`, on every interface, for orchestrators' probes; other
 * paths get 404, other methods than GET and HEAD 405. Every answer is
 * `{"service": name, "state": state}`. A port it cannot listen on is logged (the service runs on,
 * without probes) and resolves undefined.
 */
async function startHealthServer(
  name: string,
  log: Logger,
  port: number,
  state: () => 'starting' | 'ready' | 'stopping',
): Promise<HttpServer | undefined> {
  const answer = (res: ServerResponse, status: (s: ReturnType<typeof state>) => number) => {
    const s = state();
    sendJson(res, status(s), { service: name, state: s });
  };
  metrics.collectProcessMetrics();
  const router = new Router({ notFound: (_req, res) => answer(res, () => 404) })
    .on(['GET', 'HEAD'], '/healthz', ({ res }) => answer(res, () => 200))
    .on(['GET', 'HEAD'], '/readyz', ({ res }) => answer(res, (s) => (s === 'ready' ? 200 : 503)))
    .on(['GET', 'HEAD'], '/metrics', async ({ res }) => {
      const text = await metrics.text();
      res.writeHead(200, { 'content-type': metrics.contentType }).end(text);
    });
  try {
    const server = await HttpServer.listen({ name: 'health server', port, log, handle: (req, res) => router.handle(req, res) });
    log.info({ port: server.port }, 'health endpoints on /healthz and /readyz, metrics on /metrics');
    return server;
  } catch (err) {
    log.error({ err }, 'health server error');
    return undefined;
  }
}
