export {
  CONTRACT_VERSION,
  INCIDENTS_QUEUE,
  INCIDENT_JOB,
  TOOLS_QUEUE,
  TOOL_CALL_JOB,
  DEAD_LETTER_QUEUE,
  TASK_JOB,
  STALL_MARKER,
  STALL_INSTRUCTION,
  FINISH_TASK_TOOL,
  TOOL_NAMESPACE_SEPARATOR,
  PREFIX_PATTERN,
  INCIDENT_ID_PATTERN,
  AGENT_NAME_PATTERN,
  specialistQueue,
  eventSubject,
  allRunsSubject,
  runSubject,
  runsStreamName,
} from './names.js';
export {
  INCIDENT_LIMITS,
  MAX_PAYLOAD_BYTES,
  Severity,
  Incident,
  AgentStatus,
  RunStatus,
  RunCancellation,
  SpecialistOutcome,
  InDoubtCall,
  RunResult,
  TaskJob,
  TaskResult,
  TaskEndReason,
  taskEndReason,
  outputByReference,
  ToolCallJob,
  ToolCallResult,
  ToolCallCode,
  DeadLetterKind,
  DeadLetter,
  InDoubtDeadLetterInput,
  EventType,
  RunEvent,
  ToolAnnotations,
  CatalogTool,
  Catalog,
} from './schemas.js';
export type { IncidentInput, TaskJobInput } from './schemas.js';
export { UsageTotals, emptyUsage, sumUsage, roundCost } from './usage.js';
export {
  toolCallRecordKey,
  TOOL_CALL_RECORD_TTL_SECONDS,
  TOOL_CALL_STATES,
  ToolCallState,
  TOOL_CALL_TRANSITIONS,
  toolCallTransition,
  ToolCallResolution,
  ToolCallRecord,
  resolvedResult,
  toolCallDigest,
  TOOL_CALL_LEASE_MS,
  TOOL_CALL_LEASE_RENEW_MS,
} from './tool-record.js';
export type { ToolCallStateOrNone, ToolCallActor, ToolCallTransition } from './tool-record.js';
export {
  BosunError,
  CodedError,
  LockLostError,
  InvalidInputError,
  BadStoredValueError,
  describeIssues,
  parseWith,
  parseStored,
  parseStoredJson,
  errorMessage,
} from './errors.js';
export { abortable, sleep } from './time.js';
export { sameSecret, sha256 } from './secrets.js';
export { auditStreamKey, AUDIT_STREAM_MAXLEN, AuditStatus, AUDIT_FIELDS, AuditStreamEntry, auditFields, parseAuditEntry } from './audit.js';
export type { AuditEntry } from './audit.js';
export type { ErrorCode, CodedErrorOptions } from './errors.js';
export { RUN_ID_PATTERN, runIdFor, taskIdFor, toolCallKey, callFingerprint, callDigest, canonicalJson } from './ids.js';
export { SECRET_KEY_PATTERN, REDACTED, isSecretKey, redactSecrets, scrubValues } from './redact.js';
export type { RedactOptions } from './redact.js';
export { stallText, isStalled } from './stall.js';
export { MessageSchema } from './messages.js';
export {
  COORDINATOR_TIMERS_QUEUE,
  Delegation,
  RunPhase,
  RunCheckpoint,
  TimerJob,
  CANCEL_TTL_SECONDS,
  runCheckpointId,
  runCheckpointKey,
  timerJobId,
  taskCancelKey,
  runCancelKey,
} from './run-state.js';
export type { TimerKind } from './run-state.js';
export { TRUNCATION_MARKER, TRUNCATED_KEYS_FIELD, jsonDepth, jsonBytes, boundJson } from './json-bounds.js';
export type { JsonBounds, BoundedJson } from './json-bounds.js';
export { dataRecord } from './data-record.js';
export {
  ProposedCall,
  Approval,
  ApprovalRule,
  ApprovalVote,
  ApprovalDecisionRecord,
  ApprovalStep,
  APPROVAL_STEP_LIMITS,
  APPROVAL_TIMEOUT_REASON,
  DECISION_FIELDS,
  DECISION_LIMITS,
  DecisionError,
  taskApprovalId,
  proposedCallKey,
  matchesProposedCall,
  parseDecision,
  decisionInput,
  ApprovalError,
  approvalDue,
  approvalRequestedEvent,
  approvalResolvedEvent,
} from './approvals.js';
export type { ProposedCallInput, ApprovalRequest, Decision, DecisionProblem, ParseDecisionOptions } from './approvals.js';
export { approvalView, approvalProgress, approvalDecisions } from './approval-view.js';
export type { ApprovalView, ApprovalProgress, ApprovalDecisionEntry, ApprovalReadContext } from './approval-view.js';
export {
  APPROVAL_CONTEXT_LIMITS,
  ApprovalSpecialist,
  ApprovalSpecialistStatus,
  ApprovalViewer,
  findingText,
  runSpecialists,
  tasksToRead,
} from './approval-context.js';
export type { TaskRead } from './approval-context.js';
export { DecisionPath, Role, ROLES, ACTOR_LIMITS, Actor, describeActor } from './identity.js';
export {
  TaskPending,
  TaskRoutingState,
  TaskCheckpointSchema,
  TaskCheckpoint,
  BadCheckpointError,
  taskCheckpointId,
  toolCallAtKey,
} from './task-checkpoint.js';
export type { TaskCheckpointData } from './task-checkpoint.js';
export {
  IntakeResolution,
  INTAKE_RESOLUTION_TTL_SECONDS,
  intakeResolvedKey,
  intakeGroupKey,
  intakeJoinedKey,
  intakeJoinedIdsKey,
  intakeRateKey,
  JoinedAlert,
  IncidentRunbook,
  runbookOf,
} from './intake.js';
export {
  DELIVERIES_QUEUE,
  DELIVERY_JOB,
  DELIVERED_TTL_SECONDS,
  DeliveryIncident,
  DeliveryJob,
  APPROVAL_ANNOUNCE_JOB,
  ApprovalAnnouncement,
  ApprovalIncident,
  approvalAnnounceJobId,
  deliveredKey,
  deliveryJobId,
  deliveryKey,
} from './delivery.js';
export { CodeActAnswer, CodeActCall, CodeActJournal } from './codeact.js';
export { A2aTaskRecord, A2A_TTL_SECONDS, a2aKeys } from './a2a.js';
export { RemoteTaskCheckpoint, remoteTaskCheckpointId } from './remote-task.js';
