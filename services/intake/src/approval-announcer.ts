import { Job, Queue } from 'bullmq';
import type { DeliveryConfig, Logger } from '@bosun/config';
import {
  APPROVAL_ANNOUNCE_JOB,
  DELIVERIES_QUEUE,
  INCIDENTS_QUEUE,
  Incident,
  approvalAnnounceJobId,
  type ApprovalAnnouncement,
  type ApprovalIncident,
} from '@bosun/contract';
import { ApprovalReader, ApprovalStore, deliveryIncident, deliveryJobOptions, type RedisClient } from '@bosun/transport';

/** What an approval's announcement says about its incident: a delivery's names, its `service` label and its whole summary. */
export function approvalIncident(incident: Incident): ApprovalIncident {
  const service = incident.labels?.service;
  return { ...deliveryIncident(incident), summary: incident.summary, ...(service !== undefined ? { service } : {}) };
}

/**
 * Announces pending approvals to the sinks of `delivery.announceApprovals`: every
 * `approvalScanMs` it reads the pending approvals and adds one `approval` job per approval and
 * sink to `deliveries` (job id `approval-<id>-<sink>`: any number of scans and processes add it
 * once). Polling the durable pending list, rather than following events, means an approval
 * requested while no delivering process ran is announced when one starts.
 */
export class ApprovalAnnouncer {
  private readonly queue: Queue;
  private readonly incidents: Queue;
  private readonly store: ApprovalStore;
  private readonly reader: ApprovalReader;
  private readonly announced = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private scanning: Promise<void> | undefined;
  private stopped = false;

  constructor(private readonly options: { redis: RedisClient; prefix: string; delivery: DeliveryConfig; log: Logger }) {
    this.queue = new Queue(DELIVERIES_QUEUE, { connection: options.redis, prefix: options.prefix });
    this.incidents = new Queue(INCIDENTS_QUEUE, { connection: options.redis, prefix: options.prefix });
    this.store = new ApprovalStore({ redis: options.redis, prefix: options.prefix });
    this.reader = new ApprovalReader({ redis: options.redis, prefix: options.prefix });
  }

  /** Starts scanning (the first scan at once). */
  start(): this {
    const tick = () => {
      this.scanning = this.scan()
        .catch((err: unknown) => this.options.log.warn({ err }, 'could not announce pending approvals; trying again'))
        .finally(() => {
          if (!this.stopped) this.timer = setTimeout(tick, this.options.delivery.approvalScanMs);
        });
    };
    tick();
    return this;
  }

  /** One scan: announces every pending approval not announced yet. */
  async scan(): Promise<void> {
    const { delivery } = this.options;
    for (const approval of await this.store.pending()) {
      for (const sink of delivery.announceApprovals) {
        const jobId = approvalAnnounceJobId(approval.id, sink);
        if (this.announced.has(jobId)) continue;
        const incident = await this.incident(approval.incidentId);
        // The run so far as it is now: the message is a snapshot, posted once.
        const { specialists } = await this.reader.view(approval);
        const data: ApprovalAnnouncement = {
          v: 1,
          key: `${approval.id}.${sink}`,
          sink,
          approval,
          ...(incident ? { incident } : {}),
          ...(specialists && specialists.length > 0 ? { specialists } : {}),
        };
        await this.queue.add(APPROVAL_ANNOUNCE_JOB, data, deliveryJobOptions(delivery, jobId));
        this.announced.add(jobId);
      }
    }
  }

  /**
   * The incident of an approval, from its job on the incidents queue (the job id is the incident
   * id); undefined when the job is gone or its data is not an incident (the message then names
   * only the incident id).
   */
  private async incident(incidentId: string): Promise<ApprovalIncident | undefined> {
    const job = await Job.fromId(this.incidents, incidentId);
    const parsed = Incident.safeParse(job?.data);
    if (!job || !parsed.success) {
      this.options.log.warn(
        { incidentId, found: Boolean(job) },
        'the incident of a pending approval could not be read: announced without it',
      );
      return undefined;
    }
    return approvalIncident(parsed.data);
  }

  async close(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.scanning;
    await this.incidents.close();
    await this.queue.close();
    await this.store.close();
  }
}
