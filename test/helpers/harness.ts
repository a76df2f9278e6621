import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';
import { Queue, type Job, type QueueEvents } from 'bullmq';
import type { NatsConnection } from '@nats-io/transport-node';
import { DeliverPolicy, jetstream } from '@nats-io/jetstream';
import { DEAD_LETTER_QUEUE, INCIDENTS_QUEUE, RunResult, runIdFor, type DeadLetter, type IncidentInput } from '@bosun/contract';
import { openQueueEvents } from '@bosun/transport';
import type { TestContext } from './context.js';
import { EventCollector } from './events.js';
import { assertFreshBundles } from './bundles.js';
import { ENTRY } from './paths.js';
import { reap } from './reaper.js';
import { waitUntil } from './wait.js';

/** Where a {@link Client} connects: by default the context's Redis and prefix. */
export interface ClientOptions {
  /** Connection for the queues (a Redis or a Redis Cluster client); `QueueEvents` gets a duplicate of it. */
  connection?: Redis | Cluster;
  /** Queue and subject prefix (default `ctx.prefix`), e.g. a hash-tagged one on Redis Cluster. */
  prefix?: string;
}

/** A test's side of a running cluster: it publishes incidents and reads results, events and dead letters. */
export interface Client {
  /** The incidents queue (any number of listeners: many jobs may wait at once). */
  readonly incidents: Queue;
  /** The dead-letter queue, for tests that need its jobs (ids, `getJob`). */
  readonly deadLetterQueue: Queue;
  /** Events of the incidents queue, ready; what `job.waitUntilFinished` listens to. */
  readonly queueEvents: QueueEvents;
  /** Every run event under the prefix, from core NATS. */
  readonly events: EventCollector;
  /** Adds the incident with `jobId` = its id, and computes the run id it gets. */
  publish(incident: IncidentInput): Promise<{ job: Job; runId: string }>;
  /** Waits for the job to finish (default 60 s) and parses its return value as a run result. */
  result(job: Job, timeoutMs?: number): Promise<RunResult>;
  /** The waiting dead letters (the first 1,000), only the run's when `runId` is given. */
  deadLetters(runId?: string): Promise<DeadLetter[]>;
  /** Closes the event subscription and the queues (not the connection, which the caller owns). */
  close(): Promise<void>;
}

/**
 * Opens a {@link Client} on a test context: the incidents and dead-letter queues, ready queue
 * events on a duplicated connection, and an event collector, all under the context's prefix
 * (or `options.prefix`).
 */
export async function openClient(ctx: TestContext, options: ClientOptions = {}): Promise<Client> {
  const connection = options.connection ?? ctx.redis;
  const prefix = options.prefix ?? ctx.prefix;
  const incidents = new Queue(INCIDENTS_QUEUE, { connection, prefix });
  incidents.setMaxListeners(0);
  const deadLetterQueue = new Queue(DEAD_LETTER_QUEUE, { connection, prefix });
  const queueEvents = await openQueueEvents(incidents, connection);
  const events = new EventCollector(ctx.nats, prefix);
  return {
    incidents,
    deadLetterQueue,
    queueEvents,
    events,
    async publish(incident) {
      const job = await incidents.add('incident', incident, { jobId: incident.id });
      return { job, runId: runIdFor(incident.id, job.timestamp) };
    },
    async result(job, timeoutMs = 60_000) {
      return RunResult.parse(await job.waitUntilFinished(queueEvents, timeoutMs));
    },
    async deadLetters(runId) {
      const all = (await deadLetterQueue.getWaiting(0, 1000)).map((j) => j.data as DeadLetter);
      return runId === undefined ? all : all.filter((d) => d.runId === runId);
    },
    async close() {
      events.close();
      await queueEvents.close();
      await incidents.close();
      await deadLetterQueue.close();
    },
  };
}

/** What one run of the CLI printed, and its exit code. */
export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the bosun CLI as a user would, with `env` over the test process's environment, and
 * collects its output. `input` is written to its stdin (empty by default). Rejects, after
 * killing it, when it has not exited within `timeoutMs`.
 */
export function runCli(env: Record<string, string>, args: string[], input?: string, timeoutMs = 60_000): Promise<CliRun> {
  return runEntry(ENTRY.cli, env, args, input, timeoutMs);
}

/**
 * Runs a compiled entry point (`ENTRY.cli`, `ENTRY.gateway`, …) to its end, as {@link runCli}
 * does: for commands that exit by themselves, such as a service's `--check`.
 */
export function runEntry(entry: string, env: Record<string, string>, args: string[], input?: string, timeoutMs = 60_000): Promise<CliRun> {
  assertFreshBundles();
  const name = entry === ENTRY.cli ? 'bosun' : entry;
  return new Promise((resolve, reject) => {
    const child = reap(spawn(process.execPath, [entry, ...args], { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] }));
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const t = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${name} ${args.join(' ')} did not finish in ${timeoutMs} ms; stdout: ${stdout}; stderr: ${stderr}`));
    }, timeoutMs);
    // 'close', not 'exit': by then stdout and stderr are read to the end.
    child.on('close', (code) => {
      clearTimeout(t);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(input ?? '');
  });
}

/** One line of the demo MCP server's call log (`DEMO_MCP_CALL_LOG`). */
export interface LoggedCall {
  tool: string;
  args: Record<string, unknown>;
}

/** Reads the demo MCP server's call log; a log not written yet holds no calls. */
export interface CallLog {
  readonly path: string;
  /** Every call logged so far, in order; only those of `tool` (its name on the server, e.g. `restart_pod`) when given. */
  calls(tool?: string): LoggedCall[];
  /** How many calls of `tool` were logged so far. */
  count(tool: string): number;
}

/** A {@link CallLog} over the file at `path`, read afresh at each call. */
export function callLog(path: string): CallLog {
  const calls = (tool?: string): LoggedCall[] => {
    if (!existsSync(path)) return [];
    const all = readFileSync(path, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as LoggedCall);
    return tool === undefined ? all : all.filter((c) => c.tool === tool);
  };
  return { path, calls, count: (tool) => calls(tool).length };
}

/**
 * Reads a run's events back from the JetStream stream `<prefix>-runs`, polling (the stream or
 * its leader may not be there yet) until the stream holds `run.completed` and a sequence with
 * no gap; throws, with what it last read, when that takes longer than `timeoutMs` (default 30 s).
 * Returns the types and seqs, ordered by seq.
 */
export async function replayRun(
  nc: NatsConnection,
  prefix: string,
  runId: string,
  options: { maxMessages?: number; timeoutMs?: number } = {},
): Promise<{ types: string[]; seqs: number[] }> {
  const js = jetstream(nc);
  let types: string[] = [];
  let seqs: number[] = [];
  let failure = '';
  await waitUntil(
    async () => {
      try {
        const consumer = await js.consumers.get(`${prefix}-runs`, {
          filter_subjects: `${prefix}.runs.${runId}.>`,
          deliver_policy: DeliverPolicy.All,
        });
        const got: { type: string; seq: number }[] = [];
        for await (const m of await consumer.fetch({ max_messages: options.maxMessages ?? 500, expires: 1_000 }))
          got.push(m.json<{ type: string; seq: number }>());
        // Each service flushes its own buffer when it reconnects: order by seq, as documented.
        got.sort((a, b) => a.seq - b.seq);
        types = got.map((e) => e.type);
        seqs = got.map((e) => e.seq);
        failure = '';
        return types.includes('run.completed') && seqs.length === seqs[seqs.length - 1];
      } catch (err) {
        // The stream may not be there yet, or a new stream leader may still be taking over.
        failure = `; last read failed: ${(err as Error).message}`;
        return false;
      }
    },
    options.timeoutMs ?? 30_000,
    () => `run ${runId}: the stream holds run.completed and every seq before it (read: ${types.join(', ') || 'nothing'}${failure})`,
    300,
  );
  return { types, seqs };
}
