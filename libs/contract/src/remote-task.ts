import { z } from 'zod';
import { TaskResult } from './schemas.js';

/**
 * The checkpoint of a task done by a remote A2A agent (`specialists.<name>.a2a`), at
 * `<prefix>:ckpt:remote:<taskId>` (checkpoint id {@link remoteTaskCheckpointId}). Written before
 * the send (the message id), right after it (the remote task id), and with the result. A worker
 * that resumes the task follows the same remote task and never sends the message again.
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
