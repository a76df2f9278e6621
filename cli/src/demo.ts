import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, mkdtempSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue, QueueEvents } from 'bullmq';
import { INCIDENTS_QUEUE, RunResult, parseStored, type IncidentInput, errorMessage, sleep } from '@bosun/contract';
import { createLogger, findUp, readEnv, type BosunEnv } from '@bosun/config';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  ApprovalStore,
  EventPublisher,
  ProcessGroup,
  approvalResolvedEvent,
  connectNats,
  createRedis,
  waitForRedis,
  type ServiceProcess,
} from '@bosun/transport';
import { CliError } from './errors.js';
import { followEvents, formatEvent } from './events.js';
import { publishIncident } from './publish.js';
import { prepareDemoAlert, type DemoAlertHop } from './demo-alert.js';
import { a2aDemoLines } from './demo-a2a.js';
import { prepareDemoConsole } from './demo-console.js';

/** The repository's root (found upwards: this module runs compiled and bundled, scripts/bundle.mjs). */
const root = findUp(import.meta.url, 'infra/demo/bosun.yaml');

/** The sample incidents of the demo; the third stalls one specialist on purpose, the fifth goes to the CodeAct specialist. */
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
    {
      id: `demo-${stamp}-disk`,
      source: 'alertmanager',
      reason: 'DiskPressure',
      summary: 'search node disk above 90%',
      severity: 'warning',
      labels: { service: 'search', namespace: 'shop' },
      // Routed to the CodeAct specialist: its fake plan chains three tools in one script (one model turn).
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
    await sleep(200);
  }
  return false;
}

/** A server the demo needs, and how to start one when none answers. */
interface ServerSpec {
  kind: 'Redis' | 'NATS';
  url: string;
  binary: string;
  args: (port: number, dir: string) => string[];
}

const SERVER_HINT = 'Install them (Debian/Ubuntu: apt-get install redis-server nats-server) or set REDIS_URL / NATS_URL.';

/**
 * Makes sure a server answers at `spec.url`; starts `spec.binary` in a temporary folder when it
 * does not and the binary is on the PATH. Returns the started process, if any.
 */
async function ensureServer(spec: ServerSpec): Promise<ChildProcess | undefined> {
  const { kind, binary } = spec;
  const u = new URL(spec.url);
  const host = u.hostname || '127.0.0.1';
  const port = Number(u.port || (kind === 'Redis' ? 6379 : 4222));
  if (await reachable(host, port)) return undefined;
  if (!onPath(binary)) {
    throw new CliError('demo_server', `${kind} does not answer at ${host}:${port} and ${binary} is not on the PATH. ${SERVER_HINT}`);
  }
  const dir = mkdtempSync(join(tmpdir(), `bosun-${binary}-`));
  say(`${kind} does not answer at ${host}:${port}: starting ${binary} in ${dir}`);
  const child = spawn(binary, spec.args(port, dir), { stdio: 'ignore', detached: false });
  if (!(await waitFor(() => reachable(host, port), 10_000))) {
    child.kill('SIGKILL');
    throw new CliError('demo_server', `started ${binary} but it does not answer at ${host}:${port}`);
  }
  return child;
}

/** Redis and NATS for the demo: those that answer, or servers it starts (returned, to stop at the end). */
async function ensureServers(env: BosunEnv): Promise<ChildProcess[]> {
  const redis = await ensureServer({
    kind: 'Redis',
    url: env.redisUrl,
    binary: 'redis-server',
    args: (port, dir) => ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
  });
  const nats = await ensureServer({
    kind: 'NATS',
    url: env.natsUrl,
    binary: 'nats-server',
    args: (port, dir) => ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir],
  });
  return [redis, nats].filter((s): s is ChildProcess => s !== undefined);
}

/** The demo's services, each a separate process; its output goes to `.bosun/logs/<name>.log`. */
const DEMO_SERVICES = [
  ['tool-gateway', 'services/tool-gateway/dist/bundle/main.js'],
  ['coordinator', 'services/coordinator/dist/bundle/main.js'],
  ['specialist-1', 'services/specialist/dist/bundle/main.js'],
  ['specialist-2', 'services/specialist/dist/bundle/main.js'],
  ['a2a', 'services/a2a/dist/bundle/main.js'],
] as const;

/**
 * The demo's service processes, started with the shared launcher (`@bosun/transport`): started
 * together, stopped together (SIGTERM, SIGKILL after 15 s), and the whole demo stopped when one
 * exits unexpectedly.
 */
class DemoCluster {
  /** Resolves with the demo's exit code once every process has stopped. */
  readonly exited: Promise<number>;
  private readonly group = new ProcessGroup({ killOnExit: true });
  private readonly procs: ServiceProcess[] = [];
  private stopping = false;
  private resolveExit: (code: number) => void = () => undefined;

  constructor(
    private readonly servers: ChildProcess[],
    private readonly logDir: string,
  ) {
    this.exited = new Promise<number>((r) => (this.resolveExit = r));
  }

  /** Starts every service of {@link DEMO_SERVICES} (and `extra`, with their arguments) with this process's environment. */
  launch(extra: readonly (readonly [string, string, (readonly string[])?])[] = []): void {
    for (const [name, script, args] of [...DEMO_SERVICES, ...extra]) {
      const file = join(this.logDir, `${name}.log`);
      const log = createWriteStream(file, { flags: 'a' });
      const p = this.group.launch({
        name,
        script: join(root, script),
        ...(args ? { args } : {}),
        env: process.env,
        keepLines: 20,
        onLine: (l) => log.write(`${l}\n`),
      });
      void p.exited.then(({ code, signal }) => {
        log.end();
        if (this.stopping) return;
        say(`!! ${name} exited unexpectedly (code ${String(code)}, signal ${String(signal)}); see ${file}`);
        void this.shutdown(1);
      });
      this.procs.push(p);
    }
  }

  /** Waits (60 s at most) for every service's ready line; false, with the demo stopping, when one is missing. */
  async ready(): Promise<boolean> {
    try {
      await Promise.all(this.procs.map((p) => p.ready({ timeoutMs: 60_000 })));
      return true;
    } catch {
      // A service that exited has said so (above); one that is still starting is named here.
      const late = this.procs.filter((p) => p.running).map((p) => p.name);
      if (!this.stopping) say(`!! not ready within 60 s: ${late.join(', ')}; see the logs in ${this.logDir}`);
      await this.shutdown(1);
      return false;
    }
  }

  /** Stops every service, then the servers the demo started, and resolves {@link exited} with `code`. */
  async shutdown(code: number): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    say('stopping the demo cluster…');
    await this.group.stopAll(15_000);
    for (const s of this.servers) s.kill('SIGTERM');
    this.resolveExit(code);
  }
}

/** The demo's own connections: the incidents queue and its events, approvals, and an event publisher. */
interface DemoClients {
  nc: NatsConnection;
  queue: Queue;
  queueEvents: QueueEvents;
  approvals: ApprovalStore;
  events: EventPublisher;
  close(): Promise<void>;
}

async function openClients(env: BosunEnv): Promise<DemoClients> {
  const redis = createRedis(env.redis, { name: 'bosun-demo' });
  redis.on('error', () => undefined);
  await waitForRedis(redis, env.redis);
  const nc = await connectNats(env.nats, { name: 'bosun-demo' });
  const queue = new Queue(INCIDENTS_QUEUE, { connection: redis, prefix: env.prefix });
  const eventsConnection = redis.duplicate();
  const queueEvents = new QueueEvents(INCIDENTS_QUEUE, { connection: eventsConnection, prefix: env.prefix });
  await queueEvents.waitUntilReady();
  const approvals = new ApprovalStore({ redis, prefix: env.prefix });
  const events = new EventPublisher({ prefix: env.prefix, redis, nats: nc, log: createLogger({ service: 'demo', level: 'silent' }) });
  return {
    nc,
    queue,
    queueEvents,
    approvals,
    events,
    async close() {
      await events.flush(2_000);
      await approvals.close();
      await queueEvents.close();
      await queue.close();
      eventsConnection.disconnect();
      await nc.close();
      redis.disconnect();
    },
  };
}

/** What the demo says when a run asks for an approval; with `--once` it approves it itself after 2 s. */
function approvalPrompt(clients: DemoClients, once: boolean, consoleUrl: string): (id: string) => void {
  return (id) => {
    say('');
    say(`  >> approval needed: ${id}`);
    if (once) {
      say('  >> --once: approving it as "demo" in 2 s (without --once, the run waits for you)');
      setTimeout(() => {
        clients.approvals
          .decide(id, { approve: true, by: 'demo' })
          .then((a) => {
            clients.events.emit(approvalResolvedEvent(a));
            say(`  >> approved ${id}`);
          })
          .catch((err: unknown) => say(`  !! could not approve ${id}: ${errorMessage(err)}`));
      }, 2_000).unref();
    } else {
      say(`  >> approve it from another terminal:  npx bosun approve ${id}`);
      say(`  >> or deny it:                        npx bosun deny ${id} --reason "not now"`);
      say(`  >> or in the console:                 ${consoleUrl}#/approvals`);
    }
    say('');
  };
}

/** Shows every run's events live until `signal` aborts (the stream exists once a service has connected). */
async function followLive(options: { nc: NatsConnection; prefix: string; signal: AbortSignal; onApproval: (id: string) => void }) {
  const { nc, prefix, signal, onApproval } = options;
  for (let i = 0; i < 50 && !signal.aborted; i++) {
    try {
      for await (const e of followEvents(nc, { prefix, from: 'new', signal })) {
        say(`  ${formatEvent(e)}`);
        if (e.type === 'approval.requested') onApproval(String(e.data.approvalId));
      }
      return;
    } catch {
      await sleep(300);
    }
  }
}

/** Publishes the sample incidents and prints each result; returns how many did not finish. */
async function publishSamples(clients: DemoClients, stamp: string): Promise<number> {
  const { queue, queueEvents } = clients;
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
        const result = parseStored(RunResult, await job!.waitUntilFinished(queueEvents, 180_000), `the result of ${p.incidentId}`);
        say('');
        say(
          `=== result of ${p.incidentId} (run ${result.runId}): ${result.status.toUpperCase()}${result.stalled ? `, ${result.stalled} incomplete` : ''}`,
        );
        say(result.answer);
        say('===');
      } catch (err) {
        failures++;
        say(`!! ${p.incidentId}: ${errorMessage(err)}`);
      }
    }),
  );
  return failures;
}

function sayKeepRunning(): void {
  say('');
  say('The cluster keeps running. In another terminal:');
  say('  npx bosun publish incident.json     # publish your own incident');
  say('  npx bosun watch                     # follow events');
  say('  npx bosun dlq                       # the dead-letter queue');
  say('  or the operator console in a browser (its URL and token are above)');
  say('Press Ctrl-C to stop.');
}

/** Options of {@link runDemo}. */
export interface DemoOptions {
  /** Exit after the sample incidents instead of running until Ctrl-C. */
  once: boolean;
}

/**
 * `npm start`: starts a demo cluster (coordinator, two specialists, gateway) as separate
 * processes, waits until each has printed its ready line, publishes the sample incidents, shows
 * their events live and prints each result.
 */
export async function runDemo(options: DemoOptions): Promise<number> {
  const env = readEnv();
  const servers = await ensureServers(env);
  const logDir = join(root, '.bosun', 'logs');
  mkdirSync(logDir, { recursive: true });
  const cluster = new DemoCluster(servers, logDir);
  process.once('SIGINT', () => void cluster.shutdown(0));
  process.once('SIGTERM', () => void cluster.shutdown(0));

  say(`Bosun demo — prefix "${env.prefix}", logs in ${logDir}`);
  // Alerts in, answers out: the intake, and a local stand-in for Slack that receives the answers.
  const alertHop: DemoAlertHop | undefined = await prepareDemoAlert(root, env.configFile, say);
  const operatorConsole = await prepareDemoConsole();
  cluster.launch([...(alertHop ? [['intake', 'services/intake/dist/bundle/main.js'] as const] : []), operatorConsole.service]);
  say('started: tool-gateway, coordinator, specialist-1, specialist-2 (separate processes), the A2A server and the console');
  if (alertHop) say('started: intake (Alertmanager webhooks in; answers and approvals delivered to a local Slack stand-in)');
  if (!(await cluster.ready())) {
    await alertHop?.close();
    return cluster.exited;
  }
  for (const line of a2aDemoLines(env.configFile)) say(line);
  say(`operator console: ${operatorConsole.url}  (log in with the token ${operatorConsole.token})`);

  const clients = await openClients(env);
  // Follow every run's events live.
  const ac = new AbortController();
  const onApproval = approvalPrompt(clients, options.once, operatorConsole.url);
  const follow = followLive({ nc: clients.nc, prefix: env.prefix, signal: ac.signal, onApproval });
  await sleep(500);
  const stamp = new Date().toISOString().replace(/[-:T]/g, '').slice(0, 14);
  const samples = Promise.all([publishSamples(clients, stamp), alertHop?.run(stamp, say) ?? 0]);
  // Ctrl-C while the samples still wait for their results (the rollback waits for an operator):
  // the cluster is stopped, so stop waiting too and exit.
  const first = await Promise.race([samples.then(([a, b]) => ({ failures: a + b })), cluster.exited.then((code) => ({ code }))]);
  if ('code' in first) {
    ac.abort();
    // The cluster has stopped: its exit code is the one to report, not a failure to close.
    await clients.close().catch(() => undefined);
    await alertHop?.close();
    // Its waits end with the closed connections (or their own timeout); nothing is left to report.
    void samples.catch(() => undefined);
    return first.code;
  }
  const { failures } = first;

  if (options.once) {
    ac.abort();
    // followLive retries its own failures and ends with the abort: nothing is left to report.
    await follow.catch(() => undefined);
    await clients.close();
    await alertHop?.close();
    await cluster.shutdown(failures > 0 ? 1 : 0);
    return cluster.exited;
  }
  sayKeepRunning();
  const code = await cluster.exited;
  ac.abort();
  // As above: the cluster's exit code is what the demo reports.
  await clients.close().catch(() => undefined);
  await alertHop?.close();
  return code;
}
