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
} from './connections.js';
export type { RedisClient, CreateRedisOptions, RedisClientOptions } from './connections.js';
export { ensureRunsStream, deleteRunsStream } from './stream.js';
export type { RunsStreamLimits } from './stream.js';
export { keys } from './keys.js';
export { EventPublisher, MemoryEventSink, DEFAULT_MAX_PAYLOAD, EVENT_HEADER_ROOM, EVENT_DATA_DEPTH, encodeEvent } from './events.js';
export type { EventSink, EmitInput, EventStats, EventPublisherOptions } from './events.js';
export { RedisCheckpointStore, MemoryCheckpointStore, CorruptCheckpointError } from './checkpoints.js';
export type {
  CheckpointStore,
  CheckpointRead,
  CheckpointFence,
  SaveOptions,
  RevisedCheckpointStore,
  RedisCheckpointStoreOptions,
} from './checkpoints.js';
export { DeadLetters, DEAD_LETTER_LIMITS, deadLetterEntry } from './dead-letters.js';
export type { DeadLetterInput } from './dead-letters.js';
export { QueueToolClient, ToolCatalog, toolOutcome } from './tools.js';
export {
  NatsToolClient,
  NotAToolCallError,
  serveToolCalls,
  toolCallSubject,
  TOOL_CALL_QUEUE_GROUP,
  TOOL_CALL_HEARTBEAT_MS,
  TOOL_CALL_LAPSE_MS,
} from './tools-nats.js';
export type { NatsToolClientOptions, ToolCallResponder, ToolCallResponderOptions } from './tools-nats.js';
export { ToolCallRecords } from './tool-records.js';
export type { ToolCallClaim, ClaimOutcome, OperatorChange, ToolCallRecordsOptions } from './tool-records.js';
export type { ToolClient, ToolCallOptions, QueueToolClientOptions, ToolCatalogOptions } from './tools.js';
export { runService, readyLine, READY_LINE } from './service.js';
export { ServiceProcess, ProcessGroup, launchProcess } from './launcher.js';
export type { LaunchOptions, ExitStatus } from './launcher.js';
export type { ServiceHandle, RunServiceOptions, ServiceArgs, ServiceArgOptions } from './service.js';
export { openRuntime, checkRuntime } from './runtime.js';
export type { Runtime } from './runtime.js';
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
} from './approvals.js';
export type { Decision, ApprovalRequest, ProposedCallInput, ApprovalStoreOptions } from './approvals.js';
export { ApprovalReader } from './approval-context.js';
export type { ApprovalReaderOptions, ApprovalReaderActor } from './approval-context.js';
export { ApprovalWaiter, TIMEOUT_DENIAL } from './approval-waiter.js';
export type { ApprovalWaiterOptions, ApprovalWaitOptions } from './approval-waiter.js';
export { RunControl, RunControlError, RUN_STATES, CANCEL_BY_MAX, CANCEL_REASON_MAX, readRunCancellation } from './runs.js';
export type { RunState, RunSummary, CancelOutcome } from './runs.js';
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
export { DeliveryQueue, deliveryIncident, deliveryJobOptions } from './deliveries.js';
export { BosunMetrics, metrics } from './metrics.js';
export { watchWorkerLocks, isLockError } from './worker-locks.js';
export type { WorkerLocks, WorkerLocksOptions, LockErrorKind } from './worker-locks.js';
export type { ClusterProbe, ClusterSnapshot, ToolOutcome } from './metrics.js';
export { redisClusterProbe } from './metrics-probe.js';
export type { RedisClusterProbe } from './metrics-probe.js';
export { tracer, traceCarrier, carriedContext, inSpan, spanEvent, spanAttributes, TraceNotes, recording, SpanKind } from './tracing.js';
export type { TraceCarrier, SpanOptions } from './tracing.js';
export { loopTelemetry } from './loop-telemetry.js';
export { RunUsageLedger } from './usage-ledger.js';
export { RedisRateLimiter, redisRateLimiters } from './rate-limiter.js';
export type { RateLimits } from './rate-limiter.js';
export { SeqOrder } from './seq-order.js';
export { OperatorDirectory, ForbiddenError, requireRole, identityOf, sharedIdentity } from './identity.js';
export type { Identity, OperatorDirectoryOptions } from './identity.js';
