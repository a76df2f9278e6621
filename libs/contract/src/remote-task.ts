import { z } from 'zod';
import { TaskResult } from './schemas.js';

/**
 * The checkpoint of a task done by a remote A2A agent (`specialists.<name>.a2a`), at
 * `<prefix>:ckpt:remote:<taskId>` (checkpoint id {@link remoteTaskCheckpointId}). Written before
 * the send (the message id), right after it (the remote task id), and with the result. A worker
 * that resumes the task follows the same remote task and never sends the message again; one
 * that finds the send begun but no remote task id looks the task up on the agent (by its
 * context) before anything else, and declares the delegation in doubt when the agent cannot say.
 */
export const RemoteTaskCheckpoint = z.object({
  v: z.literal(1),
  taskId: z.string(),
  /** The remote agent's base URL. */
  url: z.string(),
  /** The A2A message id of the send: the task id, so a send repeated after a crash is the same message. */
  messageId: z.string(),
  /** When the send was first attempted (ISO). */
  sendingAt: z.string(),
  /**
   * The A2A context id of the send: the Bosun task id, so that the agent's tasks in this context
   * are this delegation's alone (ListTasks by context finds a send whose answer was lost).
   * Absent in checkpoints written before it was added (their context was the run id). Additive in v1.
   */
  contextId: z.string().optional(),
  /** The remote task id, once the send has answered. */
  remoteTaskId: z.string().optional(),
  /** The task's result, once it has one. */
  result: TaskResult.optional(),
});
export type RemoteTaskCheckpoint = z.infer<typeof RemoteTaskCheckpoint>;

/** The checkpoint id of a remote task (`remote:<taskId>`). */
export function remoteTaskCheckpointId(taskId: string): string {
  return `remote:${taskId}`;
}
