/**
 * The task checkpoint's format lives in the contract (`libs/contract/src/task-checkpoint.ts`);
 * re-exported here for the agent loops and their users.
 */
export { TaskCheckpoint, BadCheckpointError, MessageSchema, toolCallAtKey, taskCheckpointId } from '@bosun/contract';
export type { TaskCheckpointData, TaskPending } from '@bosun/contract';
