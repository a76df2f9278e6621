#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Job, Queue, QueueEvents } from 'bullmq';
import { DEAD_LETTER_QUEUE, INCIDENTS_QUEUE, InvalidInputError, runIdFor, type RunResult } from '@bosun/contract';
import { readEnv, ConfigError, type BosunEnv } from '@bosun/config';
import { connectNats, createRedis, waitForRedis } from '@bosun/transport';
import { followEvents, formatEvent } from './events.js';
import { publishIncident } from './publish.js';
import { runDemo } from './demo.js';

const USAGE = `bosun — operate a Bosun cluster

Usage:
  bosun publish <file|->            validate an incident (JSON) and publish it; prints the run id
  bosun watch [runId] [--new]       follow run events (one run, or all), replaying from the stream
  bosun result <incidentId> [--wait] [--timeout <s>]
                                    print an incident's run result (JSON)
  bosun dlq [--json]                list the dead-letter queue
  bosun demo [--once]               start a demo cluster and publish sample incidents

Environment: REDIS_URL, NATS_URL, BOSUN_PREFIX, BOSUN_CONFIG (see docs/configuration.md).
Exit codes: 0 ok, 1 failure, 2 bad input or usage, 3 not finished yet.`;

class UsageError extends Error {}

async function withRedis<T>(env: BosunEnv, fn: (redis: ReturnType<typeof createRedis>) => Promise<T>): Promise<T> {
  const redis = createRedis(env.redisUrl, { name: 'bosun-cli' });
  redis.on('error', () => undefined);
  try {
    await waitForRedis(redis, env.redisUrl, 5_000);
    return await fn(redis);
  } finally {
    redis.disconnect();
  }
}

function readInput(path: string): unknown {
  const text = path === '-' ? readFileSync(0, 'utf8') : readFileSync(path, 'utf8');
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new InvalidInputError('incident', [`not valid JSON: ${(err as Error).message}`], ['(root)']);
  }
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return command ? 0 : 2;
  }
  if (command === 'demo') {
    const { values } = parseArgs({ args: rest, options: { once: { type: 'boolean', default: false } } });
    return runDemo({ once: values.once ?? false });
  }
  const env = readEnv();
  switch (command) {
    case 'publish': {
      const { positionals } = parseArgs({ args: rest, allowPositionals: true });
      const file = positionals[0];
      if (!file) throw new UsageError('publish needs a file name, or - for standard input');
      const input = readInput(file);
      return withRedis(env, async (redis) => {
        const queue = new Queue(INCIDENTS_QUEUE, { connection: redis, prefix: env.prefix });
        try {
          const p = await publishIncident(queue, input);
          process.stdout.write(`${p.runId}\n`);
          if (p.duplicate) process.stderr.write(`incident ${p.incidentId} was already published; it runs once (run ${p.runId})\n`);
          return 0;
        } finally {
          await queue.close();
        }
      });
    }
    case 'watch': {
      const { positionals, values } = parseArgs({ args: rest, allowPositionals: true, options: { new: { type: 'boolean', default: false } } });
      const runId = positionals[0];
      const nc = await connectNats(env.natsUrl, { name: 'bosun-cli' });
      const ac = new AbortController();
      process.once('SIGINT', () => ac.abort());
      try {
        for await (const e of followEvents(nc, { prefix: env.prefix, ...(runId ? { runId } : {}), from: values.new ? 'new' : 'start', signal: ac.signal })) {
          process.stdout.write(`${formatEvent(e)}\n`);
          if (runId && (e.type === 'run.completed' || e.type === 'run.failed')) break;
        }
      } finally {
        await nc.close();
      }
      return 0;
    }
    case 'result': {
      const { positionals, values } = parseArgs({
        args: rest,
        allowPositionals: true,
        options: { wait: { type: 'boolean', default: false }, timeout: { type: 'string', default: '600' } },
      });
      const id = positionals[0];
      if (!id) throw new UsageError('result needs an incident id');
      return withRedis(env, async (redis) => {
        const queue = new Queue(INCIDENTS_QUEUE, { connection: redis, prefix: env.prefix });
        let events: QueueEvents | undefined;
        try {
          const job = await Job.fromId(queue, id);
          if (!job) {
            process.stderr.write(`no incident ${id} under BOSUN_PREFIX=${env.prefix}\n`);
            return 1;
          }
          const state = await job.getState();
          if (state === 'completed') {
            process.stdout.write(`${JSON.stringify(job.returnvalue as RunResult, null, 2)}\n`);
            return 0;
          }
          if (state === 'failed') {
            process.stderr.write(`incident ${id} failed: ${job.failedReason}\n`);
            return 1;
          }
          if (!values.wait) {
            process.stderr.write(`incident ${id} is ${state} (run ${runIdFor(id, job.timestamp)}); use --wait to wait for it\n`);
            return 3;
          }
          const eventsConnection = redis.duplicate();
          events = new QueueEvents(INCIDENTS_QUEUE, { connection: eventsConnection, prefix: env.prefix });
          await events.waitUntilReady();
          try {
            const value = (await job.waitUntilFinished(events, Number(values.timeout) * 1000)) as RunResult;
            process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
            return 0;
          } catch (err) {
            process.stderr.write(`incident ${id}: ${(err as Error).message}\n`);
            return 1;
          } finally {
            await events.close();
            eventsConnection.disconnect();
          }
        } finally {
          await queue.close();
        }
      });
    }
    case 'dlq': {
      const { values } = parseArgs({ args: rest, options: { json: { type: 'boolean', default: false } } });
      return withRedis(env, async (redis) => {
        const queue = new Queue(DEAD_LETTER_QUEUE, { connection: redis, prefix: env.prefix });
        try {
          const jobs = await queue.getJobs(['waiting', 'delayed', 'prioritized', 'failed', 'completed'], 0, 999, true);
          if (values.json) {
            process.stdout.write(`${JSON.stringify(jobs.map((j) => ({ id: j.id, ...j.data })), null, 2)}\n`);
            return 0;
          }
          if (jobs.length === 0) process.stdout.write('dead-letter queue is empty\n');
          for (const j of jobs) {
            const d = j.data as Record<string, unknown>;
            const reason = String(d.reason ?? '').replace(/\s+/g, ' ');
            process.stdout.write(
              `${String(d.at ?? '').padEnd(24)} ${String(d.kind).padEnd(9)} ${String(d.runId ?? '-').padEnd(21)} ${String(d.agent ?? '-').padEnd(12)} ${reason.length > 100 ? `${reason.slice(0, 100)}…` : reason}\n`,
            );
          }
          return 0;
        } finally {
          await queue.close();
        }
      });
    }
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof UsageError) {
      process.stderr.write(`bosun: ${err.message}\n\n${USAGE}\n`);
      process.exit(2);
    }
    if (err instanceof InvalidInputError || err instanceof ConfigError) {
      process.stderr.write(`bosun: ${err.message}\n`);
      process.exit(2);
    }
    process.stderr.write(`bosun: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
