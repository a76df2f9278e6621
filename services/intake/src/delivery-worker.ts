import { hostname } from 'node:os';
import { UnrecoverableError, Worker, type Job } from 'bullmq';
import { slackAppSinks, type DeliveryConfig, type Logger, type WorkersConfig } from '@bosun/config';
import {
  APPROVAL_ANNOUNCE_JOB,
  ApprovalAnnouncement,
  DELIVERED_TTL_SECONDS,
  DELIVERIES_QUEUE,
  DeliveryJob,
  deliveredKey,
  parseWith,
} from '@bosun/contract';
import type { DeadLetters, RedisClient } from '@bosun/transport';
import { DeliveryError, send, type Deliverable } from './deliver.js';
import { slackApiFor, type SlackApi } from './slack-api.js';

/** The run and incident a delivery is about, and what it delivers (for logs and dead letters). */
function about(data: Deliverable): { runId: string; incidentId: string; what: string } {
  if ('result' in data) return { runId: data.result.runId, incidentId: data.incident.id, what: `the answer of run ${data.result.runId}` };
  return { runId: data.approval.runId, incidentId: data.approval.incidentId, what: `the announcement of approval ${data.approval.id}` };
}

/** What the delivery worker needs. */
export interface DeliveryWorkerOptions {
  redis: RedisClient;
  prefix: string;
  /** Resolved: URLs and secrets substituted. */
  delivery: DeliveryConfig;
  workers: WorkersConfig;
  deadLetters: Pick<DeadLetters, 'add'>;
  log: Logger;
}

/**
 * Sends each `delivery` job to its sink. A sink's 2xx is recorded under the job's key before the
 * job completes, so a job run again (its process died after the answer) sends nothing more; a job
 * run again before the record (died during the request) sends once more, under the same
 * `Idempotency-Key`, which a receiver uses to see each answer once. A failure is retried with
 * backoff; the last one (or a permanent one: a 4xx other than 408/429) becomes a `delivery`
 * dead letter holding the job, which `bosun dlq retry` queues again.
 */
export class DeliveryProcessor {
  /** One Web API client per Slack app sink. */
  private readonly slack = new Map<string, SlackApi>();

  constructor(private readonly options: DeliveryWorkerOptions) {
    for (const [name, sink] of Object.entries(slackAppSinks(options.delivery))) this.slack.set(name, slackApiFor(sink, options.log));
  }

  async process(job: Job): Promise<string> {
    const { redis, prefix, log } = this.options;
    const data: Deliverable =
      job.name === APPROVAL_ANNOUNCE_JOB
        ? parseWith(ApprovalAnnouncement, job.data, `approval announcement ${job.id}`)
        : parseWith(DeliveryJob, job.data, `delivery ${job.id}`);
    const done = deliveredKey(prefix, data.key);
    if ((await redis.exists(done)) === 1) return 'already delivered';
    const sink = Object.hasOwn(this.options.delivery.sinks, data.sink) ? this.options.delivery.sinks[data.sink] : undefined;
    if (!sink) return this.fail(job, data, new DeliveryError(`sink ${data.sink} is not in the config`, true));
    let status: number;
    try {
      status = await send(data, sink, job.attemptsMade + 1, this.slack.get(data.sink));
    } catch (err) {
      if (!(err instanceof DeliveryError)) throw err;
      return this.fail(job, data, err);
    }
    await redis.set(done, JSON.stringify({ at: new Date().toISOString(), status, jobId: job.id }), 'EX', DELIVERED_TTL_SECONDS);
    log.info({ key: data.key, sink: data.sink, runId: about(data).runId, status, attempt: job.attemptsMade + 1 }, 'delivered');
    return `delivered: HTTP ${status}`;
  }

  /** A failed attempt: retried by BullMQ, or — the last, or a permanent failure — a dead letter, and the job fails for good. */
  private async fail(job: Job, data: Deliverable, err: DeliveryError): Promise<never> {
    const attempts = job.opts.attempts ?? 1;
    const attempt = job.attemptsMade + 1;
    const last = err.permanent || attempt >= attempts;
    this.options.log.warn({ key: data.key, sink: data.sink, attempt, attempts, last, err }, 'delivery failed');
    if (!last) throw err;
    await this.options.deadLetters.add(
      {
        kind: 'delivery',
        runId: about(data).runId,
        incidentId: about(data).incidentId,
        reason: `delivery of ${about(data).what} to sink ${data.sink} failed after ${attempt} attempt(s): ${err.message}`,
        marker: 'UNDELIVERED — the answer did not reach this sink.',
        attempts: attempt,
        input: data,
      },
      `delivery-${job.id}`,
    );
    throw new UnrecoverableError(err.message);
  }
}

/** Starts the worker of the `deliveries` queue. */
export function startDeliveryWorker(options: DeliveryWorkerOptions): Worker {
  const processor = new DeliveryProcessor(options);
  const { workers } = options;
  const worker = new Worker(DELIVERIES_QUEUE, (job) => processor.process(job), {
    connection: options.redis,
    prefix: options.prefix,
    name: `delivery-${hostname()}-${process.pid}`,
    concurrency: options.delivery.concurrency,
    lockDuration: workers.lockDurationMs,
    stalledInterval: workers.stalledIntervalMs,
    maxStalledCount: workers.maxStalledCount,
  });
  worker.on('error', (err) => options.log.error({ err }, 'deliveries worker error'));
  return worker;
}
