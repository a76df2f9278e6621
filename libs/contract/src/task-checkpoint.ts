import { z } from 'zod';
import { BosunError, describeIssues } from './errors.js';
import { InDoubtCall, TaskResult } from './schemas.js';
import { MessageSchema } from './messages.js';
import { UsageTotals } from './usage.js';
import { CodeActJournal } from './codeact.js';

/*
 * The task checkpoint: the state of one task-mode delegation between steps, written by the
 * specialist's task loop (libs/agent) before every effect. Stored as JSON at
 * `<prefix>:ckpt:task:<taskId>` (checkpoint id {@link taskCheckpointId}; `RedisCheckpointStore`
 * in libs/transport, kept 7 days after its last write). Internal: its format may change without
 * a contract version bump, but every reader parses it with {@link TaskCheckpoint}.
 */

/** A conversation turn as stored in a checkpoint (see `messages.ts`; shared with the run checkpoint). */
export { MessageSchema };

/**
 * The step under way (save-before), by kind:
 * - `tools`: the tool calls of model turn `step` are being sent, under these idempotency keys;
 * - `approval`: the task is parked for approval `approvalId` since `at` (it moves the deadline);
 * - `model`: a model call under way (written only by earlier versions; still read).
 */
export const TaskPending = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('tools'), step: z.number().int(), keys: z.array(z.string()), at: z.string() }),
  z.object({ kind: z.literal('approval'), step: z.number().int(), approvalId: z.string(), at: z.string() }),
  z.object({ kind: z.literal('model'), step: z.number().int(), at: z.string() }),
]);
export type TaskPending = z.infer<typeof TaskPending>;

/** In-band tool routing (`load_tools`): the tools loaded so far, and the statistics. */
export const TaskRoutingState = z.object({
  loaded: z.array(z.string()),
  groupsOffered: z.array(z.string()),
  groupsLoaded: z.array(z.string()),
  reloads: z.number().int().nonnegative(),
  nudged: z.boolean(),
});

/** The stored form of a task checkpoint. */
export const TaskCheckpointSchema = z.object({
  v: z.literal(1),
  taskId: z.string(),
  /** Model turns so far (the step of a turn counts from 1). */
  step: z.number().int().nonnegative(),
  toolRounds: z.number().int().nonnegative(),
  invalidOutputs: z.number().int().nonnegative(),
  /** Whether the model was asked to finish (its tool rounds are used up). */
  askedToFinish: z.boolean(),
  messages: z.array(MessageSchema).min(1),
  pending: TaskPending.optional(),
  /** Time spent parked for decided approvals, in ms: it does not count against the deadline. */
  approvalWaitMs: z.number().int().nonnegative().optional(),
  routing: TaskRoutingState.optional(),
  /** Tool calls that came back in doubt so far: they go into the task's result, whatever it is. */
  inDoubt: z.array(InDoubtCall).optional(),
  /** What the task has spent so far: a resumed task goes on from it (it gets no fresh budget). */
  usage: UsageTotals.optional(),
  /** The task's result, once it has one: a task run again returns it as it is. */
  result: TaskResult.optional(),
  /** CodeAct loop: the journal of the script of the model turn under way (`codeact.ts`). */
  codeact: CodeActJournal.optional(),
  /**
   * The step whose model call the provider refused as too long for its context window, once the
   * history was trimmed harder for it: a second refusal at this step ends the task (context budget).
   */
  contextRetryStep: z.number().int().nonnegative().optional(),
});

/** The state of one task-mode delegation between steps. */
export type TaskCheckpointData = z.infer<typeof TaskCheckpointSchema>;

/** The checkpoint id of a task (`task:<taskId>`); its Redis key is `<prefix>:ckpt:task:<taskId>`. */
export function taskCheckpointId(taskId: string): string {
  return `task:${taskId}`;
}

/** A checkpoint that cannot be used: corrupt, or written by an incompatible version. */
export class BadCheckpointError extends BosunError {
  constructor(id: string, detail: string, cause?: unknown) {
    super('bad_checkpoint', `checkpoint ${id} cannot be used: ${detail}`, { cause, data: { id } });
    this.name = 'BadCheckpointError';
  }
}

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
  const fromScript = ckpt.codeact?.calls.find((c) => c.key === key);
  if (fromScript) return { tool: fromScript.tool, args: fromScript.args };
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
  /**
   * Only the result of a task checkpoint (undefined when it has none yet; null when there is no
   * checkpoint), for a reader that wants nothing else: the run reading back the outputs its
   * tasks stored once. The rest of the checkpoint (the conversation, most of its size) is not
   * validated here; the task that resumes from it parses it whole. Throws
   * {@link BadCheckpointError} when the stored value is not a task checkpoint of this version
   * or its result does not match the contract.
   */
  resultOf(raw: unknown, id: string): TaskResult | undefined | null {
    if (raw === null || raw === undefined) return null;
    const head = TaskCheckpointHead.safeParse(raw);
    if (!head.success) throw new BadCheckpointError(id, describeIssues(head.error).issues.join('; '));
    return head.data.result;
  },
};

/** What {@link TaskCheckpoint.resultOf} checks of a task checkpoint: its version, its task and its result. */
const TaskCheckpointHead = TaskCheckpointSchema.pick({ v: true, taskId: true, result: true });
