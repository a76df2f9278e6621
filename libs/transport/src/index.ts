// What other packages import (services, the CLI, the bench, test/); everything else stays in its module.
export { createRedis, waitForRedis, connectNats, ConnectionSettingsError } from './base/connections.js';
export { COALESCE_MAX_BYTES } from './base/redis-writes.js';
export { openQueueEvents } from './base/queue-events.js';
export type { RedisClient } from './base/connections.js';
export { ensureRunsStream } from './events/stream.js';
export { keys } from './keys.js';
export { EventPublisher, MemoryEventSink } from './events/events.js';
export type { EventSink, EmitInput } from './events/events.js';
export { RedisCheckpointStore, MemoryCheckpointStore } from './stores/checkpoints.js';
export type { CheckpointStore, CheckpointFence, RevisedCheckpointStore } from './stores/checkpoints.js';
export { DeadLetters } from './stores/dead-letters.js';
export type { DeadLetterInput } from './stores/dead-letters.js';
export { QueueToolClient, ToolCatalog, toolOutcome } from './tools/tools.js';
export { DirectToolClient } from './tools/tools-direct.js';
export type { InProcessGateway } from './tools/tools-direct.js';
export { NatsToolClient, NotAToolCallError, serveToolCalls, toolCallSubject, TOOL_CALL_QUEUE_GROUP } from './tools/tools-nats.js';
export type { ToolCallResponder } from './tools/tools-nats.js';
export { ToolCallRecords } from './stores/tool-records.js';
export type { ToolCallClaim } from './stores/tool-records.js';
export type { ToolClient } from './tools/tools.js';
export { runService, READY_LINE } from './service/service.js';
export { ServiceProcess, ProcessGroup, launchProcess } from './service/launcher.js';
export type { LaunchOptions } from './service/launcher.js';
export type { ServiceArgs, ServiceHandle, RunServiceOptions } from './service/service.js';
export { openRuntime, checkRuntime, lentRuntime } from './service/runtime.js';
export type { Runtime, HostedOptions } from './service/runtime.js';
export {
  ApprovalStore,
  ApprovalError,
  Approval,
  approvalRequestedEvent,
  approvalResolvedEvent,
  matchesProposedCall,
} from './stores/approvals.js';
export type { Decision, ApprovalRequest } from './stores/approvals.js';
export { ApprovalReader } from './stores/approval-context.js';
export { ApprovalWaiter } from './stores/approval-waiter.js';
export { RunControl, RunControlError, RUN_STATES, CANCEL_BY_MAX, CANCEL_REASON_MAX, readRunCancellation } from './stores/runs.js';
export type { RunState, RunSummary, CancelOutcome } from './stores/runs.js';
export { HttpServer } from './http/server.js';
export { HttpError, ListenError } from './http/errors.js';
export { BearerAuth, bearerToken, bearerChallenge } from './http/bearer.js';
export { readBody } from './http/body.js';
export { sendJson, sendError } from './http/json.js';
export { Router } from './http/router.js';
export type { RouteContext } from './http/router.js';
export { DeliveryQueue, deliveryIncident, deliveryJobOptions } from './stores/deliveries.js';
export { BosunMetrics, metrics } from './base/metrics.js';
export { watchWorkerLocks, isLockError } from './service/worker-locks.js';
export type { WorkerLocks } from './service/worker-locks.js';
export type { ToolOutcome } from './base/metrics.js';
export { redisClusterProbe } from './service/metrics-probe.js';
export { traceCarrier, carriedContext, inSpan, spanEvent, TraceNotes, SpanKind } from './base/tracing.js';
export { loopTelemetry } from './service/loop-telemetry.js';
export { RunUsageLedger } from './stores/usage-ledger.js';
export { redisRateLimiters } from './stores/rate-limiter.js';
export { SeqOrder } from './events/seq-order.js';
export { OperatorDirectory, ForbiddenError, requireRole, identityOf, sharedIdentity } from './identity.js';
export type { Identity } from './identity.js';
