/**
 * What an A2A task looks like, read from its run: the incident job's state and return value
 * (`RunResult`), and a pending approval of the run. The task store keeps only the mapping
 * (task ↔ run, context, history); the state is never copied, so every replica reads the same.
 */
import { Role, TaskState, type Artifact, type Message, type Part, type Task, type TaskStatus } from '@a2a-js/sdk';
import type { A2aTaskRecord, ApprovalSpecialist, ApprovalStep, RunResult } from '@bosun/contract';

/** What the run is at, as far as the task needs it. */
export interface RunView {
  /** BullMQ state of the incident job (`waiting`, `active`, `waiting-children`, `completed`, `failed`, …), or `missing`. */
  jobState: string;
  result?: RunResult;
  /** Why the incident job failed, when it failed without a result. */
  failedReason?: string;
  /** A pending approval of the run, when there is one. */
  approval?: PendingApproval;
  /** When the run reached the state it is in (ISO), from the run itself: the task's `status.timestamp`. */
  since: string;
  /** Whether a coordinator has taken the run up: from then on the task is never `submitted` again. */
  processed?: boolean;
}

/** The parts of a pending approval the task shows. */
export interface PendingApproval {
  id: string;
  agent: string;
  reason: string;
  createdAt: string;
  timeoutAt: string;
  calls: { index: number; tool: string; args: unknown; needsApproval: boolean }[];
  /** The incident, as the approval carries it (absent in older approvals). */
  incident?: { id: string; title: string; severity: string; service?: string; source: string };
  /** Under a rule of several people: how many it needs, and who has approved so far. */
  required?: number;
  approvedBy?: string[];
  /** How far it has got: `0 of 1`, `1 of 2`. */
  progress?: string;
  /** The run's other specialists and their last findings, read from the run's checkpoint (absent once it is gone). */
  specialists?: ApprovalSpecialist[];
  /** The asking agent's earlier calls, the latest {@link A2A_STEPS} (the approval keeps more). */
  steps?: ApprovalStep[];
}

/** How many of an approval's earlier steps the input-required message shows, and how much of each result. */
export const A2A_STEPS = { steps: 5, result: 160 } as const;

export const textPart = (text: string): Part => ({
  content: { $case: 'text', value: text },
  metadata: undefined,
  filename: '',
  mediaType: 'text/plain',
});
export const dataPart = (value: unknown): Part => ({
  content: { $case: 'data', value },
  metadata: undefined,
  filename: '',
  mediaType: 'application/json',
});

/** An agent message of a task. Its id is derived from what it says, so every replica names it the same. */
export function agentMessage(record: A2aTaskRecord, id: string, parts: Part[], metadata?: Record<string, unknown>): Message {
  return {
    messageId: `${record.taskId}-${id}`,
    contextId: record.contextId,
    taskId: record.taskId,
    role: Role.ROLE_AGENT,
    parts,
    metadata,
    extensions: [],
    referenceTaskIds: [],
  };
}

/** The parts of a run that did not complete: INCOMPLETE specialists, and calls in doubt. */
export function incompleteParts(result: RunResult): string[] {
  const parts = result.specialists.filter((s) => s.status !== 'completed').map((s) => `${s.name} (${s.status})`);
  for (const c of result.inDoubt?.calls ?? []) parts.push(`${c.agent}: ${c.tool} call ${c.key} (in doubt)`);
  return parts;
}

/** The A2A state of a run. */
export function stateOf(view: RunView): TaskState {
  const r = view.result;
  if (r) {
    if (r.status === 'completed' || r.status === 'partial') return TaskState.TASK_STATE_COMPLETED;
    return r.status === 'cancelled' ? TaskState.TASK_STATE_CANCELED : TaskState.TASK_STATE_FAILED;
  }
  switch (view.jobState) {
    case 'completed':
    case 'failed':
    case 'missing':
      return TaskState.TASK_STATE_FAILED;
    case 'active':
    case 'waiting-children':
      return view.approval ? TaskState.TASK_STATE_INPUT_REQUIRED : TaskState.TASK_STATE_WORKING;
    default:
      // Waiting again (delayed, or moved back to wait) after the coordinator took it up is still
      // working: a task's state never goes back to submitted.
      return view.processed ? TaskState.TASK_STATE_WORKING : TaskState.TASK_STATE_SUBMITTED;
  }
}

/** Whether a state is final (the task takes no more updates). */
export function isTerminal(state: TaskState): boolean {
  return [
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
  ].includes(state);
}

/** `text` on one line, cut to `max` characters. */
function line(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** The run so far: the other specialists with their last findings, then the asking agent's earlier steps. */
function contextLines(a: PendingApproval): string[] {
  const out: string[] = [];
  if (a.specialists && a.specialists.length > 0)
    out.push(
      'Other specialists of the run:',
      ...a.specialists.map((s) => `  ${s.agent} (${s.status})${s.finding ? `: ${line(s.finding, 200)}` : ''}`),
    );
  if (a.steps && a.steps.length > 0)
    out.push(
      `Earlier steps of ${a.agent}:`,
      ...a.steps.map(
        (st) => `  ${st.tool} ${line(JSON.stringify(st.args), 80)} -> ${st.isError ? 'error: ' : ''}${line(st.result, A2A_STEPS.result)}`,
      ),
    );
  return out;
}

/** The text of an approval's input-required message: the proposed calls, the run so far and how to answer. */
export function approvalText(a: PendingApproval): string {
  const calls = a.calls.map((c) => `  [${c.index}] ${c.tool} ${JSON.stringify(c.args)}${c.needsApproval ? ' (needs approval)' : ''}`);
  return [
    ...(a.incident
      ? [
          `Incident ${a.incident.id} [${a.incident.severity}] ${a.incident.title}${a.incident.service ? ` (service ${a.incident.service})` : ''}, from ${a.incident.source}.`,
        ]
      : []),
    `Approval ${a.id}: ${a.agent} proposes these calls and waits for an operator until ${a.timeoutAt}:`,
    ...calls,
    `Reason: ${a.reason}`,
    ...contextLines(a),
    ...(a.required !== undefined && a.required > 1
      ? [
          `Needs ${a.required} different people: ${a.approvedBy?.length ?? 0} of ${a.required} approved${a.approvedBy?.length ? ` (${a.approvedBy.join(', ')})` : ''}.`,
        ]
      : a.progress
        ? [`Approvals: ${a.progress}.`]
        : []),
    'Answer on this task with a DataPart {"decision": "approve", "only"?: [indexes]} or {"decision": "deny", "reason": "..."} (operator tokens only).',
  ].join('\n');
}

/** The text of a finished run's status message. */
function resultText(r: RunResult): string {
  const incomplete = incompleteParts(r);
  switch (r.status) {
    case 'completed':
      return `Run ${r.runId} completed: every part was checked.`;
    case 'partial':
      return `Run ${r.runId} is PARTIAL. INCOMPLETE parts: ${incomplete.join('; ')}. The answer covers only what was checked.`;
    case 'cancelled':
      return `Run ${r.runId} was cancelled by ${r.cancelled?.by ?? 'unknown'}: ${r.cancelled?.reason ?? ''}`;
    default:
      return `Run ${r.runId} failed${incomplete.length > 0 ? `; INCOMPLETE parts: ${incomplete.join('; ')}` : ''}: ${r.answer}`;
  }
}

/** The status message of a task in its current state; undefined when there is nothing to say. */
export function statusMessage(record: A2aTaskRecord, view: RunView): Message | undefined {
  if (view.result) return agentMessage(record, `status-${view.result.status}`, [textPart(resultText(view.result))]);
  if (view.jobState === 'failed')
    return agentMessage(record, 'status-failed', [textPart(`Run ${record.runId} failed: ${view.failedReason ?? 'no reason given'}`)]);
  if (view.jobState === 'missing')
    return agentMessage(record, 'status-missing', [
      textPart(`Run ${record.runId}: its incident job is gone (removed or expired); its outcome is unknown.`),
    ]);
  if (view.approval)
    return agentMessage(record, `approval-${view.approval.id}`, [
      textPart(approvalText(view.approval)),
      dataPart({ approval: view.approval }),
    ]);
  return undefined;
}

/** A finished run's artifacts: the run result (DataPart) and the answer (TextPart). Partial runs name their INCOMPLETE parts. */
export function artifactsOf(result: RunResult | undefined): Artifact[] {
  if (!result) return [];
  const incomplete = incompleteParts(result);
  const metadata = { status: result.status, incomplete };
  const note = incomplete.length > 0 ? ` INCOMPLETE: ${incomplete.join('; ')}.` : '';
  return [
    {
      artifactId: 'run-result',
      name: 'run-result',
      description: `The run result (status ${result.status}).${note}`,
      parts: [dataPart(result)],
      metadata,
      extensions: [],
    },
    { artifactId: 'answer', name: 'answer', description: `The answer.${note}`, parts: [textPart(result.answer)], metadata, extensions: [] },
  ];
}

/** The task as A2A shows it. `historyLength`: undefined → all, 0 → none, n → the last n messages. */
export function taskOf(record: A2aTaskRecord, view: RunView, historyLength?: number): Task {
  const message = statusMessage(record, view);
  const status: TaskStatus = { state: stateOf(view), message, timestamp: view.since };
  const history = [...(record.history as unknown as Message[]), ...(message ? [message] : [])];
  const shown = historyLength === undefined ? history : historyLength <= 0 ? [] : history.slice(-historyLength);
  return {
    id: record.taskId,
    contextId: record.contextId,
    status,
    artifacts: artifactsOf(view.result),
    history: shown,
    metadata: { runId: record.runId, incidentId: record.incidentId },
  };
}
