import { Queue } from 'bullmq';
import { sinksFor, type DeliveryConfig } from '@bosun/config';
import {
  DELIVERIES_QUEUE,
  DELIVERY_JOB,
  deliveryJobId,
  deliveryKey,
  type DeliveryIncident,
  type DeliveryJob,
  type Incident,
  type RunResult,
} from '@bosun/contract';
import type { RedisClient } from './connections.js';

/** What a delivery says about the incident: its first summary line and its runbook link, besides its names. */
export function deliveryIncident(incident: Incident): DeliveryIncident {
  const payload = incident.payload as Record<string, unknown> | undefined;
  const runbookUrl = payload && typeof payload.runbookUrl === 'string' ? payload.runbookUrl : undefined;
  return {
    id: incident.id,
    source: incident.source,
    reason: incident.reason,
    severity: incident.severity,
    title: (incident.summary.split('\n')[0] ?? '').slice(0, 300),
    ...(runbookUrl !== undefined ? { runbookUrl } : {}),
  };
}

/** The job options of a delivery: the configured attempts with exponential backoff; kept once done (7 days) and when failed. */
export function deliveryJobOptions(delivery: Pick<DeliveryConfig, 'attempts' | 'backoffMs'>, jobId: string) {
  return {
    jobId,
    attempts: delivery.attempts,
    backoff: { type: 'exponential', delay: delivery.backoffMs },
    removeOnComplete: { age: 7 * 24 * 3600 },
    removeOnFail: false,
  };
}

/**
 * Adds the deliveries of a finished run to the `deliveries` queue: one job per sink its routes
 * choose, with the job id `<runId>-<sink>`, so that adding them again (a coordinator that
 * crashed after this and before completing the run does) keeps one job per sink.
 */
export class DeliveryQueue {
  private readonly queue: Queue;

  constructor(private readonly options: { redis: RedisClient; prefix: string; delivery: DeliveryConfig }) {
    this.queue = new Queue(DELIVERIES_QUEUE, { connection: options.redis, prefix: options.prefix });
  }

  /** Queues the run's deliveries; returns the sinks chosen. */
  async enqueue(incident: Incident, result: RunResult): Promise<string[]> {
    const { delivery } = this.options;
    const sinks = sinksFor(delivery, {
      severity: incident.severity,
      source: incident.source,
      reason: incident.reason,
      status: result.status,
    });
    for (const sink of sinks) {
      const data: DeliveryJob = { v: 1, key: deliveryKey(result.runId, sink), sink, incident: deliveryIncident(incident), result };
      await this.queue.add(DELIVERY_JOB, data, deliveryJobOptions(delivery, deliveryJobId(result.runId, sink)));
    }
    return sinks;
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}
