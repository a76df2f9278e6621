import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, mkdtempSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Queue, QueueEvents } from 'bullmq';
import { INCIDENTS_QUEUE, type IncidentInput, type RunResult } from '@bosun/contract';
import { createLogger, readEnv } from '@bosun/config';
import { ApprovalStore, EventPublisher, approvalResolvedEvent, connectNats, createRedis, waitForRedis } from '@bosun/transport';
import { followEvents, formatEvent } from './events.js';
import { publishIncident } from './publish.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** The sample incidents of the demo; the third stalls one specialist on purpose. */
export function sampleIncidents(stamp: string): IncidentInput[] {
  return [
    {
      id: `demo-${stamp}-crashloop`,
      source: 'alertmanager',
      reason: 'PodCrashLooping',
      summary: 'checkout pod restarting repeatedly since the last deploy',
      severity: 'critical',
      labels: { service: 'checkout', namespace: 'shop' },
    },
    {
      id: `demo-${stamp}-latency`,
      source: 'alertmanager',
      reason: 'HighLatency',
      summary: 'payments p99 latency above 3 s for 30 minutes',
      severity: 'warning',
      labels: { service: 'payments', namespace: 'shop' },
    },
    {
      id: `demo-${stamp}-errors`,
      source: 'alertmanager',
      reason: 'ErrorRateHigh',
      summary: 'checkout 5xx rate above 5%',
      severity: 'critical',
      labels: { service: 'checkout', namespace: 'shop' },
      // The offline model is told to stall the database specialist: the run ends partial, with the marker.
      payload: { fake: { stall: ['database'] } },
    },
    {
      id: `demo-${stamp}-rollback`,
      source: 'alertmanager',
      reason: 'PodCrashLooping',
      summary: 'checkout OOMKilled after deploy v42: roll back',
      severity: 'critical',
      labels: { service: 'checkout', namespace: 'shop' },
      // The fix changes production, so the rollback waits for an operator's approval.
      payload: {
        fake: {
          calls: {
            kubernetes: [
              { tool: 'demo__get_pods', args: { service: 'checkout' } },
              { tool: 'demo__get_deployments', args: { service: 'checkout' } },
              { tool: 'demo__rollback_deployment', args: { service: 'checkout', toVersion: 'v41' } },
              { tool: 'demo__get_pods', args: { service: 'search' } },
            ],
          },
        },
      },
    },
  ];
}

function say(line: string): void {
  process.stdout.write(`${line}\n`);
}

/** Whether something accepts TCP connections at host:port. */
function reachable(host: string, port: number, timeoutMs = 1_000): Promise<boolean> {
  return new Promise((resolveP) => {
    const socket = createConnection({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolveP(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

function onPath(cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

async function waitFor(check: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 200));
  }
  return false;
}

/**
 * Makes sure a server answers at `url`; starts `binary` in a temporary folder when it does not
 * and the binary is on the PATH. Returns the started process, if any.
 */
async function ensureServer(
  kind: 'Redis' | 'NATS',
  url: string,
  binary: string,
  args: (port: number, dir: string) => string[],
  hint: string,
): Promise<ChildProcess | undefined> {
  const u = new URL(url);
  const host = u.hostname || '127.0.0.1';
  const port = Number(u.port || (kind === 'Redis' ? 6379 : 4222));
  if (await reachable(host, port)) return undefined;
  if (!onPath(binary)) {
    throw new Error(`${kind} does not answer at ${host}:${port} and ${binary} is not on the PATH. ${hint}`);
  }
  const dir = mkdtempSync(join(tmpdir(), `bosun-${binary}-`));
  say(`${kind} does not answer at ${host}:${port}: starting ${binary} in ${dir}`);
  const child = spawn(binary, args(port, dir), { stdio: 'ignore', detached: false });
  if (!(await waitFor(() => reachable(host, port), 10_000))) {
    child.kill('SIGKILL');
    throw new Error(`started ${binary} but it does not answer at ${host}:${port}`);
  }
  return child;
}

/** Options of {@link runDemo}. */
export interface DemoOptions {
  /** Exit after the sample incidents instead of running until Ctrl-C. */
  once: boolean;
}

/**
 * `npm start`: starts a demo cluster (coordinator, two specialists, gateway) as separate
 * processes, publishes the sample incidents, shows their events live and prints each result.
 */
export async function runDemo(options: DemoOptions): Promise<number> {
  const env = readEnv();
  const started: ChildProcess[] = [];
  const servers: ChildProcess[] = [];
  const hint = 'Install them (Debian/Ubuntu: apt-get install redis-server nats-server) or set REDIS_URL / NATS_URL.';
  const redisServer = await ensureServer(
    'Redis',
    env.redisUrl,
    'redis-server',
    (port, dir) => ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
    hint,
  );
  if (redisServer) servers.push(redisServer);
  const natsServer = await ensureServer(
    'NATS',
    env.natsUrl,
    'nats-server',
    (port, dir) => ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir],
    hint,
  );
  if (natsServer) servers.push(natsServer);

  const logDir = join(root, '.bosun', 'logs');
  mkdirSync(logDir, { recursive: true });
  let stopping = false;
  const launch = (name: string, script: string, args: string[] = []) => {
    const log = createWriteStream(join(logDir, `${name}.log`), { flags: 'a' });
    const child = spawn(process.execPath, [join(root, script), ...args], { env: process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    child.on('exit', (code, signal) => {
      if (!stopping) {
        say(`!! ${name} exited unexpectedly (code ${String(code)}, signal ${String(signal)}); see ${join(logDir, `${name}.log`)}`);
        void shutdown(1);
      }
    });
    started.push(child);
    return child;
  };

  let resolveExit: (code: number) => void = () => undefined;
  const exited = new Promise<number>((r) => (resolveExit = r));
  const shutdown = async (code: number) => {
    if (stopping) return;
    stopping = true;
    say('stopping the demo cluster…');
    await Promise.all(
      started.map(
        (c) =>
          new Promise<void>((r) => {
            if (c.exitCode !== null || c.signalCode !== null) return r();
            c.once('exit', () => r());
            c.kill('SIGTERM');
            setTimeout(() => c.kill('SIGKILL'), 15_000).unref();
          }),
      ),
    );
    for (const s of servers) s.kill('SIGTERM');
    resolveExit(code);
  };
  process.once('SIGINT', () => void shutdown(0));
  process.once('SIGTERM', () => void shutdown(0));

  say(`Bosun demo — prefix "${env.prefix}", logs in ${logDir}`);
  launch('tool-gateway', 'services/tool-gateway/dist/main.js');
  launch('coordinator', 'services/coordinator/dist/main.js');
  launch('specialist-1', 'services/specialist/dist/main.js');
  launch('specialist-2', 'services/specialist/dist/main.js');
  say('started: tool-gateway, coordinator, specialist-1, specialist-2 (separate processes)');

  const redis = createRedis(env.redis, { name: 'bosun-demo' });
  redis.on('error', () => undefined);
  await waitForRedis(redis, env.redis);
  const nc = await connectNats(env.nats, { name: 'bosun-demo' });
  const queue = new Queue(INCIDENTS_QUEUE, { connection: redis, prefix: env.prefix });
  const eventsConnection = redis.duplicate();
  const queueEvents = new QueueEvents(INCIDENTS_QUEUE, { connection: eventsConnection, prefix: env.prefix });
  await queueEvents.waitUntilReady();

  const approvals = new ApprovalStore({ redis, prefix: env.prefix });
  const demoEvents = new EventPublisher({ prefix: env.prefix, redis, nats: nc, log: createLogger({ service: 'demo', level: 'silent' }) });
  const onApproval = (id: string) => {
    say('');
    say(`  >> approval needed: ${id}`);
    if (options.once) {
      say('  >> --once: approving it as "demo" in 2 s (without --once, the run waits for you)');
      setTimeout(() => {
        approvals
          .decide(id, { approve: true, by: 'demo' })
          .then((a) => {
            demoEvents.emit(approvalResolvedEvent(a));
            say(`  >> approved ${id}`);
          })
          .catch((err: unknown) => say(`  !! could not approve ${id}: ${(err as Error).message}`));
      }, 2_000).unref();
    } else {
      say(`  >> approve it from another terminal:  npx bosun approve ${id}`);
      say(`  >> or deny it:                        npx bosun deny ${id} --reason "not now"`);
    }
    say('');
  };
  // Follow every run's events live (the stream exists once a service has connected).
  const ac = new AbortController();
  const follow = (async () => {
    for (let i = 0; i < 50 && !ac.signal.aborted; i++) {
      try {
        for await (const e of followEvents(nc, { prefix: env.prefix, from: 'new', signal: ac.signal })) {
          say(`  ${formatEvent(e)}`);
          if (e.type === 'approval.requested') onApproval(String(e.data.approvalId));
        }
        return;
      } catch {
        await new Promise((r) => setTimeout(r, 300));
      }
    }
  })();
  await new Promise((r) => setTimeout(r, 500));

  const stamp = new Date().toISOString().replace(/[-:T]/g, '').slice(0, 14);
  let failures = 0;
  const runs = await Promise.all(
    sampleIncidents(stamp).map(async (incident) => {
      const p = await publishIncident(queue, incident);
      say(`published ${p.incidentId} → run ${p.runId}`);
      return p;
    }),
  );
  await Promise.all(
    runs.map(async (p) => {
      const job = await queue.getJob(p.incidentId);
      try {
        const result = (await job!.waitUntilFinished(queueEvents, 180_000)) as RunResult;
        say('');
        say(
          `=== result of ${p.incidentId} (run ${result.runId}): ${result.status.toUpperCase()}${result.stalled ? `, ${result.stalled} incomplete` : ''}`,
        );
        say(result.answer);
        say('===');
      } catch (err) {
        failures++;
        say(`!! ${p.incidentId}: ${(err as Error).message}`);
      }
    }),
  );

  if (options.once) {
    ac.abort();
    await follow.catch(() => undefined);
  } else {
    say('');
    say('The cluster keeps running. In another terminal:');
    say('  npx bosun publish incident.json     # publish your own incident');
    say('  npx bosun watch                     # follow events');
    say('  npx bosun dlq                       # the dead-letter queue');
    say('Press Ctrl-C to stop.');
  }
  const cleanup = async () => {
    ac.abort();
    await demoEvents.flush(2_000);
    await approvals.close();
    await queueEvents.close();
    await queue.close();
    eventsConnection.disconnect();
    await nc.close();
    redis.disconnect();
  };
  if (options.once) {
    await cleanup();
    await shutdown(failures > 0 ? 1 : 0);
    return exited;
  }
  const code = await exited;
  await cleanup().catch(() => undefined);
  return code;
}
