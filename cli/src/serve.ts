/**
 * `bosun serve`: the coordinator, the specialists and the tool gateway in one process (the
 * co-located layout, docs/scaling.md). Each is the same service as its own process would run,
 * with its own workers, over one set of connections the process lends them, and the same records
 * in Redis; what changes is that the specialists' tool calls reach the gateway as function calls
 * (`DirectToolClient`), with no job and no NATS request. A run it started and that it dies in resumes in any other process, co-located or not:
 * its checkpoints, claims and records are where every process looks for them.
 */
import { createLogger, loadClusterConfig, setLogLevel, type BosunEnv, type Logger } from '@bosun/config';
import { errorMessage } from '@bosun/contract';
import { startTracing } from '@bosun/otel';
import {
  DirectToolClient,
  lentRuntime,
  openRuntime,
  runService,
  type RunServiceOptions,
  type ServiceArgs,
  type ServiceHandle,
} from '@bosun/transport';
import { coordinatorService } from '@bosun/coordinator';
import { specialistService, type LocalSpecialist } from '@bosun/specialist';
import { gatewayService, startGateway, type StartedGateway } from '@bosun/tool-gateway';

// Its level comes from LOG_LEVEL once runService has read the environment.
const log = createLogger({ service: 'bosun-serve' });

/** The services one `bosun serve` hosts, as their own processes would run them. */
const HOSTED = ['tool-gateway', 'coordinator', 'specialist'] as const;

/**
 * Runs `bosun serve [--only <names>] [--check]` with what follows `serve` on the command line. The
 * process is the services': it exits on SIGTERM (after closing them) or when one fails to start,
 * so the promise never resolves.
 */
export function runServe(argv: string[]): Promise<number> {
  runService(serveService(argv));
  return new Promise<number>(() => {});
}

/** The loggers of the hosted services (their modules' own). */
function hostedLogs(): Logger[] {
  return [gatewayService.log, coordinatorService().log, specialistService().log];
}

function serveService(argv: string[]): RunServiceOptions {
  return {
    name: 'bosun-serve',
    log,
    argv,
    // As the specialist process's: the specialists to host (default: every one of the config).
    args: { only: { type: 'string' } },
    tracing: () => startTracing('bosun-serve'),
    async check(args, env) {
      // Standard output holds the one result line (runService silences this process's own logger).
      for (const hosted of hostedLogs()) hosted.level = 'silent';
      // One after the other: each names what it found, and the first that fails says why.
      const gateway = await gatewayService.check(args, env);
      const coordinator = await coordinatorService().check({}, env);
      const specialists = await specialistService().check(args, env);
      return `tool-gateway: ${gateway} | coordinator: ${coordinator} | specialist: ${specialists}`;
    },
    start: startAll,
  };
}

/**
 * One set of connections (Redis, NATS, the event publisher and the stores over them), lent to
 * each service; then the gateway (the specialists' tool client is its in-process face), then the
 * coordinator and the specialists at once. A failure to start any of them closes the others and
 * fails the start. Closing: the coordinator and the specialists hand back what they hold, then
 * the gateway closes (a call of theirs still running in it is recorded, or found in flight by the
 * next owner), then the connections, after the events are flushed.
 */
async function startAll(args: ServiceArgs, env: BosunEnv): Promise<ServiceHandle> {
  for (const hosted of hostedLogs()) setLogLevel(hosted, env.logLevel);
  const config = loadClusterConfig(env.configFile, { resolveServers: false, resolveOperatorToken: false });
  const rt = await openRuntime(env, { service: 'bosun-serve', log, retention: config.retention });
  const runtime = lentRuntime(rt);
  let gateway: StartedGateway;
  try {
    gateway = await startGateway(env, { runtime });
  } catch (err) {
    await rt.close();
    throw err;
  }
  const tools = new DirectToolClient(gateway.gateway.inProcess());
  // The specialists register here as they start; the coordinator runs their tasks in this process.
  const local = new Map<string, LocalSpecialist>();
  const started = await Promise.allSettled([
    coordinatorService({ runtime, local }).start({}, env),
    specialistService({ tools, runtime, local }).start(args, env),
  ]);
  const handles = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  const close = async () => {
    await Promise.all(handles.map((h) => h.close()));
    await gateway.close();
    await rt.close();
  };
  if (failed) {
    await close().catch((err: unknown) => log.error({ err }, `could not close what had started: ${errorMessage(err)}`));
    throw failed.reason;
  }
  log.info({ services: HOSTED }, 'co-located: coordinator, specialists and tool gateway in one process');
  return { close };
}
