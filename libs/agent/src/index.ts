export {
  runTask,
  RetryableTaskError,
  YieldError,
  ParkError,
  DEFAULT_TASK_INSTRUCTION,
  APPROVED_CALLS_MARKER,
  taskDeadline,
} from './task.js';
export type { TaskAgentSpec, TaskAgentDeps, TaskPolicy, RunTaskOptions, TaskAttempt } from './task.js';
export { FINISH_TASK_DESCRIPTION, modelParameters, specialistPolicy } from './task-tools.js';
export { LOAD_TOOLS, routingGroups } from './routing.js';
export type { RoutingSpec, RoutingState } from './routing.js';
export { runIncident } from './run.js';
export type { RunOutcome } from './run.js';
export { handleTimer, TimerConflictError, CANCEL_LOOKS, TIMER_PASSES } from './run-timers.js';
export { DEADLINE_GRACE_MS, childResults } from './run-parts.js';
export {
  DEFAULT_ROUTE_INSTRUCTION,
  DEFAULT_DELEGATE_INSTRUCTION,
  parseRouting,
  inDoubtLine,
  describeOutput,
  mergeReports,
} from './run-text.js';
export type {
  RunDeps,
  IncidentJob,
  RunChildren,
  ChildrenRead,
  ChildState,
  ParkedRun,
  RunJobs,
  RunTimers,
  CancelKeys,
  LocalSpecialist,
  LocalSpecialists,
  LocalOutcome,
  RunLock,
} from './run-ports.js';
export type { Clock } from './ports.js';
export { observedModel, modelProvider } from './model-telemetry.js';
export { buildModel } from './model-setup.js';
export type { ModelSetup } from './model-setup.js';
export { runCodeActTask } from './codeact.js';
export { DEFAULT_CODEACT_INSTRUCTION, extractScript, usageLine } from './codeact-prompt.js';
export { NonDeterminismError } from './codeact-host.js';
export type { CodeActLimits } from './task-types.js';
