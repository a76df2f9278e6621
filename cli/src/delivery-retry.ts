/** `bosun dlq retry` of a `delivery` entry: the same delivery queued again, under the same idempotency key. */
import { Job, type Queue } from 'bullmq';
import {
  APPROVAL_ANNOUNCE_JOB,
  ApprovalAnnouncement,
  DELIVERIES_QUEUE,
  DELIVERY_JOB,
  DeliveryJob,
  approvalAnnounceJobId,
  deliveryJobId,
  parseStored,
} from '@bosun/contract';
import { deliveryJobOptions } from '@bosun/transport';
import { annotateEntry, type DeadLetterEntry } from './dead-letter-entry.js';
import { OperatorError, withQueue, type OperatorDeps } from './operator.js';

/** What retrying a delivery did (the same shape as `bosun dlq retry` reports for a run). */
export interface DeliveryRetry {
  deadLetterId: string;
  originalIncidentId: string;
  incidentId: string;
  runId: string;
  at: string;
  /** The new delivery job: `<runId>-<sink>-retry<n>`. */
  deliveryJobId: string;
}

/** Attempts and backoff of the original job when it is still there, else the config's defaults. */
async function optionsOf(queue: Queue, jobId: string): Promise<{ attempts: number; backoffMs: number }> {
  const original = await Job.fromId(queue, jobId);
  const backoff = original?.opts.backoff;
  const delay = typeof backoff === 'object' && backoff !== null ? backoff.delay : typeof backoff === 'number' ? backoff : undefined;
  return { attempts: original?.opts.attempts ?? 5, backoffMs: delay ?? 1_000 };
}

/** The job a `delivery` entry holds: a run's answer, or an approval's announcement. */
function whatToRetry(entry: DeadLetterEntry) {
  const answer = DeliveryJob.safeParse(entry.input);
  if (answer.success) {
    const d = answer.data;
    return { data: d, base: deliveryJobId(d.result.runId, d.sink), name: DELIVERY_JOB, runId: d.result.runId, incidentId: d.incident.id };
  }
  const d = parseStored(ApprovalAnnouncement, entry.input, `the delivery of dead letter ${entry.id}`);
  const a = d.approval;
  return { data: d, base: approvalAnnounceJobId(a.id, d.sink), name: APPROVAL_ANNOUNCE_JOB, runId: a.runId, incidentId: a.incidentId };
}

/**
 * Queues the delivery held by a `delivery` dead letter again as `<runId>-<sink>-retry<n>`, with
 * the same data — the same `Idempotency-Key`, so a receiver that did get it after all sees it
 * once — and links the entry to it (`retriedAs`). A delivering process (the intake, with
 * `delivery` configured) sends it.
 */
export async function retryDelivery(deps: OperatorDeps, job: Job, entry: DeadLetterEntry): Promise<DeliveryRetry> {
  const { data, base, name, runId, incidentId } = whatToRetry(entry);
  return withQueue(deps, DELIVERIES_QUEUE, async (queue) => {
    const options = await optionsOf(queue, base);
    for (let n = 1; n < 10_000; n++) {
      const id = `${base}-retry${n}`;
      if (await Job.fromId(queue, id)) continue;
      await queue.add(name, data, deliveryJobOptions(options, id));
      const at = new Date().toISOString();
      await annotateEntry(job, entry, { retriedAs: { incidentId, runId, at } });
      return { deadLetterId: entry.id, originalIncidentId: incidentId, incidentId, runId, at, deliveryJobId: id };
    }
    throw new OperatorError('conflict', `the delivery ${base} has been retried too often: no free retry id`);
  });
}
