import { z } from 'zod';
import { Approval } from './approvals.js';
import { ApprovalSpecialist } from './approval-context.js';
import { RunResult, Severity } from './schemas.js';

/** Queue of answers to deliver to the configured sinks (docs/intake-and-delivery.md). Job name {@link DELIVERY_JOB}. */
export const DELIVERIES_QUEUE = 'deliveries';
/** The job name of a delivery on {@link DELIVERIES_QUEUE}. */
export const DELIVERY_JOB = 'delivery';

/** What a delivery says about its incident (the run result carries only its id). */
export const DeliveryIncident = z.object({
  id: z.string(),
  source: z.string(),
  reason: z.string(),
  severity: Severity,
  /** The incident summary's first line. */
  title: z.string(),
  /** The alert's `runbook_url`, passed along as a link. */
  runbookUrl: z.string().optional(),
});
export type DeliveryIncident = z.infer<typeof DeliveryIncident>;

/** What an approval's announcement says about its incident: as a delivery's, plus the service and the whole summary (the evidence). */
export const ApprovalIncident = DeliveryIncident.extend({
  /** The incident's `service` label, when it has one. */
  service: z.string().optional(),
  /** The incident's summary as the alert gave it (its description after the first line). */
  summary: z.string(),
});
export type ApprovalIncident = z.infer<typeof ApprovalIncident>;

/** Data of a `delivery` job: one run's answer for one sink. Also the `input` of a `delivery` dead letter. */
export const DeliveryJob = z.object({
  v: z.literal(1),
  /** `<runId>.<sink>`: the idempotency key the receiver sees (header `Idempotency-Key`), the same on every attempt and retry. */
  key: z.string(),
  sink: z.string(),
  incident: DeliveryIncident,
  result: RunResult,
});
export type DeliveryJob = z.infer<typeof DeliveryJob>;

/** The idempotency key of one run's delivery to one sink: `<runId>.<sink>`. */
export function deliveryKey(runId: string, sink: string): string {
  return `${runId}.${sink}`;
}

/** The job id of one run's delivery to one sink: `<runId>-<sink>` (adding it twice keeps one job). */
export function deliveryJobId(runId: string, sink: string): string {
  return `${runId}-${sink}`;
}

/** `<prefix>:delivery:done:<key>`: set once a sink answered 2xx for the key; a later job of the same key sends nothing. */
export function deliveredKey(prefix: string, key: string): string {
  return `${prefix}:delivery:done:${key}`;
}

/** How long the delivered marker is kept: 30 days, as dead letters' markers. */
export const DELIVERED_TTL_SECONDS = 30 * 24 * 3600;

/** The job name of an approval announcement on {@link DELIVERIES_QUEUE}. */
export const APPROVAL_ANNOUNCE_JOB = 'approval';

/**
 * Data of an `approval` job: a pending approval announced to one sink (`delivery.announceApprovals`),
 * with the commands that decide it. Also the `input` of a `delivery` dead letter about one.
 */
export const ApprovalAnnouncement = z.object({
  v: z.literal(1),
  /** `<approvalId>.<sink>`: the idempotency key the receiver sees. */
  key: z.string(),
  sink: z.string(),
  approval: Approval,
  /** The incident the approval belongs to, when its job could be read (absent in announcements made before it). */
  incident: ApprovalIncident.optional(),
  /**
   * The run's other specialists and their last findings when the announcement was queued, read
   * from the run's checkpoint (absent when it was gone, and in announcements made before it).
   */
  specialists: z.array(ApprovalSpecialist).optional(),
});
export type ApprovalAnnouncement = z.infer<typeof ApprovalAnnouncement>;

/** The job id of an approval's announcement to one sink: `approval-<approvalId>-<sink>` (added once per approval and sink). */
export function approvalAnnounceJobId(approvalId: string, sink: string): string {
  return `approval-${approvalId}-${sink}`;
}
