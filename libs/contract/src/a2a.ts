import { z } from 'zod';

/**
 * The A2A server's records in Redis (`services/a2a`, docs/a2a.md). Every key is partitioned by
 * the tenant resolved from the caller's token, never by an id the client sends:
 *
 * | key | type | what |
 * |---|---|---|
 * | `<prefix>:a2a:<tenant>:task:<taskId>` | string (JSON, {@link A2aTaskRecord}) | one A2A task: its run, incident, context and message history |
 * | `<prefix>:a2a:<tenant>:msg:<messageId>` | string | the task a message id started: claimed once, atomically with the task record and its indexes, so racing sends of one message id give one task |
 * | `<prefix>:a2a:<tenant>:tasks` | sorted set | the tenant's task ids, scored by creation time in ms |
 * | `<prefix>:a2a:<tenant>:context:<contextId>` | sorted set | the session: task ids of one context, scored by creation time |
 * | `<prefix>:a2a:run-approval:<runId>` | string | the last approval of the run a task showed as `input-required` (its decision time stamps the `working` that follows) |
 */
export const A2A_TTL_SECONDS = 30 * 24 * 3600;

/** One message of a task's history, as the A2A SDK shapes it (v1.0 protocol objects), stored as JSON. */
const StoredMessage = z.record(z.string(), z.unknown());

/** An A2A task as stored: what maps it to a run. The task's state and artifacts are read from the run itself. */
export const A2aTaskRecord = z.object({
  v: z.literal(1),
  tenant: z.string(),
  /** The A2A task id: the run id. */
  taskId: z.string(),
  runId: z.string(),
  incidentId: z.string(),
  /** The A2A context id: the session of related incidents. */
  contextId: z.string(),
  /** The message id that started it. */
  messageId: z.string(),
  createdAt: z.string(),
  /** The messages exchanged, oldest first (the user's message, then the agent's status messages as they are read). */
  history: z.array(StoredMessage),
});
export type A2aTaskRecord = z.infer<typeof A2aTaskRecord>;

/** The key builders of the A2A server's records, under `<prefix>:a2a:<tenant>`. */
export const a2aKeys = {
  task: (prefix: string, tenant: string, taskId: string) => `${prefix}:a2a:${tenant}:task:${taskId}`,
  message: (prefix: string, tenant: string, messageId: string) => `${prefix}:a2a:${tenant}:msg:${messageId}`,
  tasks: (prefix: string, tenant: string) => `${prefix}:a2a:${tenant}:tasks`,
  context: (prefix: string, tenant: string, contextId: string) => `${prefix}:a2a:${tenant}:context:${contextId}`,
  runApproval: (prefix: string, runId: string) => `${prefix}:a2a:run-approval:${runId}`,
};
