export { runTask, RetryableTaskError, YieldError, DEFAULT_TASK_INSTRUCTION } from './task.js';
export type { TaskAgentSpec, TaskAgentDeps } from './task.js';
export { TaskCheckpoint, BadCheckpointError, MessageSchema } from './checkpoint.js';
export type { TaskCheckpointData } from './checkpoint.js';
