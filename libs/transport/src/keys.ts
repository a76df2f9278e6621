import { auditStreamKey, runCancelKey, taskCancelKey, toolCallRecordKey } from '@bosun/contract';

/**
 * Bosun's own Redis keys, all under `<prefix>:`. BullMQ's keys are `<prefix>:<queue>:…`;
 * ours use the segments below, which are never queue names.
 */
export const keys = {
  /** Event sequence counter of a run. */
  seq: (prefix: string, runId: string) => `${prefix}:run:${runId}:seq`,
  /** A checkpoint. */
  checkpoint: (prefix: string, id: string) => `${prefix}:ckpt:${id}`,
  /** The gateway's tool catalog. */
  catalog: (prefix: string) => `${prefix}:gateway:catalog`,
  /** The record of one tool call, by idempotency key (its format: `ToolCallRecord` in libs/contract). */
  toolCall: toolCallRecordKey,
  /** Event counters: a hash with `dropped`. */
  events: (prefix: string) => `${prefix}:stats:events`,
  /** A cancellation flag the coordinator sets for a task past its deadline (defined in the contract: `taskCancelKey`). */
  cancel: taskCancelKey,
  /** An operator's cancellation of a whole run (defined in the contract: `runCancelKey`). */
  cancelRun: runCancelKey,
  /**
   * Set (60 s) by the one `bosun publish` that replaces a rejected incident job of that id: the
   * rejected job's timestamp while it replaces it, then `done:<timestamp of the new job>`.
   */
  republish: (prefix: string, incidentId: string) => `${prefix}:republish:${incidentId}`,
  /** An approval request (JSON). */
  approval: (prefix: string, id: string) => `${prefix}:approval:${id}`,
  /** The decision on an approval request (JSON), written once. */
  approvalDecision: (prefix: string, id: string) => `${prefix}:approval:${id}:decision`,
  approvalVotes: (prefix: string, id: string) => `${prefix}:approval:${id}:votes`,
  /** Who has read an approval: a hash of the person's name (lower-cased) → `ApprovalViewer` JSON, with the approval's TTL. */
  approvalViewers: (prefix: string, id: string) => `${prefix}:approval:${id}:viewers`,
  /** Set (SET NX, 30 days) by the one Slack click that updates an approval's message: it is updated once. */
  slackMessageUpdated: (prefix: string, approvalId: string) => `${prefix}:slack:updated:${approvalId}`,
  /** Pending approval ids, scored by creation time. */
  approvalsPending: (prefix: string) => `${prefix}:approvals:pending`,
  /** The ids of a run's approvals (a set), so its page can show each decision. */
  approvalsOfRun: (prefix: string, runId: string) => `${prefix}:approvals:run:${runId}`,
  /** The audit stream of mutating calls (its entries: `AuditEntry` in libs/contract). */
  audit: auditStreamKey,
  /** Set once a deduplicated dead letter has been counted. */
  deadLetterSeen: (prefix: string, id: string) => `${prefix}:dlq:seen:${id}`,
  /** Counters of degraded results: a hash `<agent>:<kind>` → count. */
  degraded: (prefix: string) => `${prefix}:stats:degraded`,
  /** Keys of the tool calls in doubt (sorted set, scored by when they became so), counted by the in-doubt gauge. */
  inDoubt: (prefix: string) => `${prefix}:toolcalls:in-doubt`,
  /** A run's spending: a hash, part (task id) → its `UsageTotals` as JSON (`RunUsageLedger`). */
  usage: (prefix: string, runId: string) => `${prefix}:usage:${runId}`,
  /** A model's cluster-wide rate limit: `<base>:requests`, `:tokens`, `:running` (sorted sets, `RedisRateLimiter`). */
  rateLimit: (prefix: string, name: string) => `${prefix}:ratelimit:${name}`,
};
