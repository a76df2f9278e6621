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
import type { RedisClient } from '../base/connections.js';

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

  /** The run's deliveries: one per sink its routes choose, with its job id. */
  jobsFor(incident: Incident, result: RunResult): { jobId: string; data: DeliveryJob }[] {
    const { delivery } = this.options;
    const run = { severity: incident.severity, source: incident.source, reason: incident.reason, status: result.status };
    return sinksFor(delivery, run).map((sink) => ({
      jobId: deliveryJobId(result.runId, sink),
      data: { v: 1, key: deliveryKey(result.runId, sink), sink, incident: deliveryIncident(incident), result },
    }));
  }

  /** Queues the run's deliveries; returns the sinks chosen. */
  async enqueue(incident: Incident, result: RunResult): Promise<string[]> {
    const jobs = this.jobsFor(incident, result);
    for (const { jobId, data } of jobs) await this.queue.add(DELIVERY_JOB, data, deliveryJobOptions(this.options.delivery, jobId));
    return jobs.map((j) => j.data.sink);
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}
