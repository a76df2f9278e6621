export {
  createRedis,
  waitForRedis,
  connectNats,
  checkRedisTopology,
  isHashTagged,
  redisClientOptions,
  natsConnectOptions,
  redisSettingsFailure,
  natsSettingsFailure,
  ConnectionSettingsError,
  DEAD_LINK,
} from './service/connections.js';
export type { RedisClient, CreateRedisOptions, RedisClientOptions } from './service/connections.js';
export { ensureRunsStream, deleteRunsStream } from './events/stream.js';
export type { RunsStreamLimits } from './events/stream.js';
export { keys } from './keys.js';
export { EventPublisher, MemoryEventSink, DEFAULT_MAX_PAYLOAD, EVENT_HEADER_ROOM, EVENT_DATA_DEPTH, encodeEvent } from './events/events.js';
export type { EventSink, EmitInput, EventStats, EventPublisherOptions } from './events/events.js';
export { RedisCheckpointStore, MemoryCheckpointStore, CorruptCheckpointError } from './stores/checkpoints.js';
export type {
  CheckpointStore,
  CheckpointRead,
  CheckpointFence,
  SaveOptions,
  RevisedCheckpointStore,
  RedisCheckpointStoreOptions,
} from './stores/checkpoints.js';
export { DeadLetters, DEAD_LETTER_LIMITS, deadLetterEntry } from './stores/dead-letters.js';
export type { DeadLetterInput } from './stores/dead-letters.js';
export { QueueToolClient, ToolCatalog, toolOutcome } from './tools/tools.js';
export {
  NatsToolClient,
  NotAToolCallError,
  serveToolCalls,
  toolCallSubject,
  TOOL_CALL_QUEUE_GROUP,
  TOOL_CALL_HEARTBEAT_MS,
  TOOL_CALL_LAPSE_MS,
} from './tools/tools-nats.js';
export type { NatsToolClientOptions, ToolCallResponder, ToolCallResponderOptions } from './tools/tools-nats.js';
export { ToolCallRecords } from './stores/tool-records.js';
export type { ToolCallClaim, ClaimOutcome, OperatorChange, ToolCallRecordsOptions } from './stores/tool-records.js';
export type { ToolClient, ToolCallOptions, QueueToolClientOptions, ToolCatalogOptions } from './tools/tools.js';
export { runService, readyLine, READY_LINE } from './service/service.js';
export { ServiceProcess, ProcessGroup, launchProcess } from './service/launcher.js';
export type { LaunchOptions, ExitStatus } from './service/launcher.js';
export type { ServiceHandle, RunServiceOptions, ServiceArgs, ServiceArgOptions } from './service/service.js';
export { openRuntime, checkRuntime } from './service/runtime.js';
export type { Runtime } from './service/runtime.js';
export {
  ApprovalStore,
  ApprovalError,
  Approval,
  ProposedCall,
  callFingerprint,
  approvalRequestedEvent,
  approvalResolvedEvent,
  proposedCallKey,
  matchesProposedCall,
} from './stores/approvals.js';
export type { Decision, ApprovalRequest, ProposedCallInput, ApprovalStoreOptions } from './stores/approvals.js';
export { ApprovalReader } from './stores/approval-context.js';
export type { ApprovalReaderOptions, ApprovalReaderActor } from './stores/approval-context.js';
export { ApprovalWaiter, TIMEOUT_DENIAL } from './stores/approval-waiter.js';
export type { ApprovalWaiterOptions, ApprovalWaitOptions } from './stores/approval-waiter.js';
export { RunControl, RunControlError, RUN_STATES, CANCEL_BY_MAX, CANCEL_REASON_MAX, readRunCancellation } from './stores/runs.js';
export type { RunState, RunSummary, CancelOutcome } from './stores/runs.js';
export { HttpServer } from './http/server.js';
export type { HttpServerOptions, RequestHandler, ErrorAnswer } from './http/server.js';
export { HttpError, ListenError } from './http/errors.js';
export type { HttpErrorCode } from './http/errors.js';
export { BearerAuth, bearerToken, bearerChallenge } from './http/bearer.js';
export type { BearerAuthOptions, BearerCheck } from './http/bearer.js';
export { readBody } from './http/body.js';
export { sendJson, sendError } from './http/json.js';
export { Router } from './http/router.js';
export type { RouteContext, RouteHandler, RouteMethod, NotFoundHandler } from './http/router.js';
export { DeliveryQueue, deliveryIncident, deliveryJobOptions } from './stores/deliveries.js';
export { BosunMetrics, metrics } from './service/metrics.js';
export { watchWorkerLocks, isLockError } from './service/worker-locks.js';
export type { WorkerLocks, WorkerLocksOptions, LockErrorKind } from './service/worker-locks.js';
export type { ClusterProbe, ClusterSnapshot, ToolOutcome } from './service/metrics.js';
export { redisClusterProbe } from './service/metrics-probe.js';
export type { RedisClusterProbe } from './service/metrics-probe.js';
export {
  tracer,
  traceCarrier,
  carriedContext,
  inSpan,
  spanEvent,
  spanAttributes,
  TraceNotes,
  recording,
  SpanKind,
} from './service/tracing.js';
export type { TraceCarrier, SpanOptions } from './service/tracing.js';
export { loopTelemetry } from './service/loop-telemetry.js';
export { RunUsageLedger } from './stores/usage-ledger.js';
export { RedisRateLimiter, redisRateLimiters } from './stores/rate-limiter.js';
export type { RateLimits } from './stores/rate-limiter.js';
export { SeqOrder } from './events/seq-order.js';
export { OperatorDirectory, ForbiddenError, requireRole, identityOf, sharedIdentity } from './identity.js';
export type { Identity, OperatorDirectoryOptions } from './identity.js';
