import { z } from 'zod';
import { DecisionPath } from './identity.js';
import { redactSecrets } from './redact.js';
import type { Delegation, RunCheckpoint } from './run-state.js';
import { AgentStatus, TaskEndReason } from './schemas.js';
import type { TaskCheckpointData } from './task-checkpoint.js';

/*
 * The context of an approval that is not stored with it (issue 23 item 3): the run's other
 * specialists and their last findings, derived from the run's checkpoint when the approval is
 * read (so it is as fresh as the run), and who has looked at it, kept beside the approval.
 */

/** Limits of the context: how many specialists and viewers are shown, and each finding's length. */
export const APPROVAL_CONTEXT_LIMITS = { specialists: 20, finding: 300, viewers: 50 } as const;

/**
 * Where another specialist of the run is: its result's status once it has one, else `queued`
 * (no task checkpoint yet), `running`, `waiting for approval`, or `unknown` (its checkpoint could
 * not be read).
 */
export const ApprovalSpecialistStatus = z.union([AgentStatus, z.enum(['queued', 'running', 'waiting for approval', 'unknown'])]);
export type ApprovalSpecialistStatus = z.infer<typeof ApprovalSpecialistStatus>;

/** One delegation of the run, as a person deciding an approval needs it. */
export const ApprovalSpecialist = z.object({
  taskId: z.string(),
  agent: z.string(),
  status: ApprovalSpecialistStatus,
  /** Why it ended, when it has (`completed`, `timeout`, …). */
  reason: TaskEndReason.optional(),
  /**
   * Its last finding, cut to {@link APPROVAL_CONTEXT_LIMITS}`.finding` characters, secret-looking
   * values `[redacted]`: its output's summary once it has a result, else the latest tool result
   * it has seen (`<tool>: <text>`).
   */
  finding: z.string().optional(),
});
export type ApprovalSpecialist = z.infer<typeof ApprovalSpecialist>;

/** Someone who has read the approval: one entry per person, at the latest time they read it. */
export const ApprovalViewer = z.object({
  name: z.string(),
  /** Whether the name came from a credential Bosun checked. */
  verified: z.boolean(),
  /** Where they read it: `cli`, `http` or `console`. */
  path: DecisionPath,
  at: z.string(),
});
export type ApprovalViewer = z.infer<typeof ApprovalViewer>;

/** Cuts `text` to `max` characters, marking the cut. */
function cut(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** The fields of an output object read as its summary, in this order. */
const SUMMARY_FIELDS = ['summary', 'finding', 'findings', 'diagnosis', 'conclusion', 'rootCause'] as const;

/**
 * A short text of a specialist's output: a string as it is, an object's `summary` (or
 * `finding`, `diagnosis`, …) when it has one, else the object as JSON; secret-looking values are
 * redacted first. Undefined for no output.
 */
export function findingText(output: unknown): string | undefined {
  if (output === null || output === undefined) return undefined;
  const clean = redactSecrets(output);
  let text: string | undefined;
  if (typeof clean === 'string') text = clean;
  else if (typeof clean === 'object' && clean !== null && !Array.isArray(clean)) {
    const o = clean as Record<string, unknown>;
    const field = SUMMARY_FIELDS.find((f) => typeof o[f] === 'string' && o[f].trim() !== '');
    if (field) text = o[field] as string;
  }
  text ??= JSON.stringify(clean) ?? '';
  const trimmed = text.trim();
  return trimmed === '' ? undefined : cut(trimmed, APPROVAL_CONTEXT_LIMITS.finding);
}

/** The latest tool result a task has seen, as `<tool>: <text>`; undefined when it has none. */
function lastToolResult(ckpt: TaskCheckpointData): string | undefined {
  for (let i = ckpt.messages.length - 1; i >= 0; i--) {
    const m = ckpt.messages[i]!;
    const r = m.role === 'tool' ? m.responses.at(-1) : undefined;
    if (r) return findingText(`${r.name}: ${typeof r.output === 'string' ? r.output : JSON.stringify(redactSecrets(r.output))}`);
  }
  return undefined;
}

/** What {@link runSpecialists} knows of one task: its checkpoint, null for none, or the error reading it. */
export type TaskRead = TaskCheckpointData | null | { error: string };

/** One delegation as an {@link ApprovalSpecialist}, from its result or its task's checkpoint. */
function specialistOf(d: Delegation, task: TaskRead | undefined): ApprovalSpecialist {
  const base = { taskId: d.taskId, agent: d.agent };
  const ckpt = task && !('error' in task) ? task : null;
  if (d.result) {
    // An output stored once in the task's checkpoint (`outputIn`) is read from there.
    const output = d.result.outputIn === 'checkpoint' ? ckpt?.result?.output : d.result.output;
    const finding = findingText(output) ?? findingText(d.result.error ?? d.result.lastWords);
    return { ...base, status: d.result.status, ...(d.result.reason ? { reason: d.result.reason } : {}), ...(finding ? { finding } : {}) };
  }
  if (task && 'error' in task) return { ...base, status: 'unknown' };
  if (!ckpt) return { ...base, status: 'queued' };
  const finding = lastToolResult(ckpt);
  return { ...base, status: ckpt.pending?.kind === 'approval' ? 'waiting for approval' : 'running', ...(finding ? { finding } : {}) };
}

/**
 * The run's specialists other than the task that asks (`taskId`), in delegation order, the
 * latest {@link APPROVAL_CONTEXT_LIMITS}`.specialists`; `tasks` holds what was read of each
 * delegation's task checkpoint (needed for a running task, or an output stored there).
 */
export function runSpecialists(run: RunCheckpoint, taskId: string, tasks: ReadonlyMap<string, TaskRead>): ApprovalSpecialist[] {
  return run.delegations
    .filter((d) => d.taskId !== taskId)
    .map((d) => specialistOf(d, tasks.get(d.taskId)))
    .slice(-APPROVAL_CONTEXT_LIMITS.specialists);
}

/** The delegations of `run` whose task checkpoint {@link runSpecialists} reads. */
export function tasksToRead(run: RunCheckpoint, taskId: string): string[] {
  return run.delegations.filter((d) => d.taskId !== taskId && (!d.result || d.result.outputIn === 'checkpoint')).map((d) => d.taskId);
}
