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
export { LOAD_TOOLS, routingGroups } from './routing.js';
export type { RoutingSpec, RoutingState } from './routing.js';
export { TaskCheckpoint, BadCheckpointError, MessageSchema, toolCallAtKey, taskCheckpointId } from './checkpoint.js';
export type { TaskCheckpointData, TaskPending } from './checkpoint.js';
