import { z } from 'zod';
import { BosunError, InDoubtCall, MessageSchema, TaskResult, describeIssues } from '@bosun/contract';

/** A conversation turn as stored in a checkpoint (defined in the contract; kept here for its importers). */
export { MessageSchema };

/** A checkpoint that cannot be used: corrupt, or written by an incompatible version. */
export class BadCheckpointError extends BosunError {
  constructor(id: string, detail: string, cause?: unknown) {
    super('bad_checkpoint', `checkpoint ${id} cannot be used: ${detail}`, { cause, data: { id } });
    this.name = 'BadCheckpointError';
  }
}

const TaskCheckpointSchema = z.object({
  v: z.literal(1),
  taskId: z.string(),
  step: z.number().int().nonnegative(),
  toolRounds: z.number().int().nonnegative(),
  invalidOutputs: z.number().int().nonnegative(),
  askedToFinish: z.boolean(),
  messages: z.array(MessageSchema).min(1),
  /** The step under way (save-before): a model call, or tool calls with their idempotency keys. */
  pending: z
    .object({
      kind: z.enum(['model', 'tools', 'approval']),
      step: z.number().int(),
      keys: z.array(z.string()).optional(),
      approvalId: z.string().optional(),
      at: z.string(),
    })
    .optional(),
  /** Time spent parked for decided approvals, in ms: it does not count against the deadline. */
  approvalWaitMs: z.number().int().nonnegative().optional(),
  /** In-band tool routing: the tools loaded so far and the statistics. */
  routing: z
    .object({
      loaded: z.array(z.string()),
      groupsOffered: z.array(z.string()),
      groupsLoaded: z.array(z.string()),
      reloads: z.number().int().nonnegative(),
      nudged: z.boolean(),
    })
    .optional(),
  /** Tool calls that came back in doubt so far: they go into the task's result, whatever it is. */
  inDoubt: z.array(InDoubtCall).optional(),
  result: TaskResult.optional(),
});

/** The state of one task-mode delegation between steps. */
export type TaskCheckpointData = z.infer<typeof TaskCheckpointSchema>;

/**
 * The tool call a key names in a task's checkpoint, with its real arguments: the `i`-th call of
 * the model turn of step `s` (`<taskId>-s<s>-c<i>`; the step counts the task's model turns from
 * 1). Undefined when the key is not of this task or the checkpoint has no such call. The
 * checkpoint is where real arguments live: events, approvals and call records show them with
 * secrets redacted.
 */
export function toolCallAtKey(ckpt: TaskCheckpointData, key: string): { tool: string; args: Record<string, unknown> } | undefined {
  const prefix = `${ckpt.taskId}-s`;
  const m = key.startsWith(prefix) ? /^(\d+)-c(\d+)$/.exec(key.slice(prefix.length)) : null;
  if (!m) return undefined;
  const turn = ckpt.messages.filter((x) => x.role === 'model')[Number(m[1]) - 1];
  const call = turn?.role === 'model' ? turn.calls?.[Number(m[2])] : undefined;
  return call ? { tool: call.name, args: call.args } : undefined;
}

/** Parsing of task checkpoints. */
export const TaskCheckpoint = {
  /** Null when there is none; throws {@link BadCheckpointError} when it is unusable. */
  parse(raw: unknown, id: string): TaskCheckpointData | null {
    if (raw === null || raw === undefined) return null;
    const r = TaskCheckpointSchema.safeParse(raw);
    if (!r.success) throw new BadCheckpointError(id, describeIssues(r.error).issues.join('; '));
    return r.data;
  },
};
