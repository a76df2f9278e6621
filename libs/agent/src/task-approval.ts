import {
  APPROVAL_STEP_LIMITS,
  APPROVAL_TIMEOUT_REASON,
  approvalDue,
  approvalRequestedEvent,
  redactSecrets,
  taskApprovalId,
  toolCallKey,
  type Approval,
  type ApprovalStep,
  type CatalogTool,
  type Incident,
} from '@bosun/contract';
import type { Message, ToolCall } from '@bosun/models';
import { ruleToStore } from '@bosun/policy';
import { NO_TELEMETRY, type Approvals } from './ports.js';
import type { TaskRun } from './task-run.js';
import { ParkError } from './task-types.js';

/** Opens the message that tells the model which proposed calls an operator approved. */
export const APPROVED_CALLS_MARKER = 'An operator has APPROVED the following calls';

/**
 * The approval step: a turn with calls to `ask` tools waits for an operator. Returns the decided
 * approval of this turn, requesting it first when there is none. While it is undecided the task
 * parks: the checkpoint records the wait and {@link ParkError} is thrown (the job is delayed
 * until the approval's timeout; a decision wakes it). Undecided past its timeout, it resolves as
 * denied with reason `timeout` (the deps' `approvalWaiter`). The time spent waiting moves the task's
 * deadline, in the same write as the tool round that follows.
 */
export async function approvalStep(run: TaskRun, calls: readonly ToolCall[], asking: readonly CatalogTool[]): Promise<Approval> {
  const { store, waiter } = run.approvals();
  const id = taskApprovalId(run.job.taskId, run.state.step);
  let approval = (await store.get(id)) ?? (await requestApproval(run, store, calls, asking));
  if (approval.status === 'pending') {
    if (!approvalDue(approval)) return parkForApproval(run, approval);
    approval = await waiter.expire(approval);
  }
  const { state } = run;
  if (state.pending?.kind === 'approval') {
    const decided = approval.decidedAt ? Date.parse(approval.decidedAt) : run.now();
    const waitMs = Math.max(0, decided - Date.parse(state.pending.at));
    state.approvalWaitMs = (state.approvalWaitMs ?? 0) + waitMs;
    const telemetry = run.deps.telemetry ?? NO_TELEMETRY;
    telemetry.approvalDecided(approval.status, waitMs / 1000);
    telemetry.spanEvent('approval.decided', {
      'bosun.approval.id': approval.id,
      'bosun.approval.status': approval.status,
      'bosun.approval.wait_ms': waitMs,
    });
  }
  return approval;
}

/** Requests the approval of this turn: every call as proposed, with the key it will run under. */
async function requestApproval(
  run: TaskRun,
  store: Approvals,
  calls: readonly ToolCall[],
  asking: readonly CatalogTool[],
): Promise<Approval> {
  const { job, spec, state } = run;
  const id = taskApprovalId(job.taskId, state.step);
  const timeoutMs = Math.max(...asking.map((t) => run.tools.policy.approvalTimeoutMs(t)));
  const names = new Set(asking.map((t) => t.name));
  const last = state.messages[state.messages.length - 1];
  const approval = await store.request({
    id,
    runId: job.runId,
    incidentId: job.incidentId,
    agent: spec.name,
    taskId: job.taskId,
    calls: calls.map((c, index) => ({
      index,
      tool: c.name,
      args: c.args,
      needsApproval: names.has(c.name),
      key: toolCallKey(job.taskId, state.step, index),
    })),
    reason: last?.role === 'model' ? (last.text ?? '') : '',
    createdAt: new Date(run.now()).toISOString(),
    timeoutAt: new Date(run.now() + timeoutMs).toISOString(),
    ...ruleOf(run, asking),
    incident: incidentContext(job.incident),
    steps: stepsSoFar(state.messages),
  });
  run.deps.events.emit(approvalRequestedEvent(approval));
  (run.deps.telemetry ?? NO_TELEMETRY).spanEvent('approval.requested', {
    'bosun.approval.id': id,
    'bosun.approval.calls': approval.calls.length,
  });
  run.deps.log.info({ approvalId: id, taskId: job.taskId }, 'waiting for approval');
  return approval;
}

/**
 * The run so far, as the approval shows it: each call of the conversation that has its answer
 * (the asking turn's calls have none yet), with its arguments redacted and the first characters
 * of its result; the latest {@link APPROVAL_STEP_LIMITS}`.steps`.
 */
export function stepsSoFar(messages: readonly Message[]): ApprovalStep[] {
  const calls = new Map<string, ToolCall>();
  const steps: ApprovalStep[] = [];
  for (const m of messages) {
    if (m.role === 'model') for (const c of m.calls ?? []) calls.set(c.id, c);
    if (m.role !== 'tool') continue;
    for (const r of m.responses) {
      const text = typeof r.output === 'string' ? r.output : (JSON.stringify(r.output) ?? '');
      const max = APPROVAL_STEP_LIMITS.result;
      steps.push({
        tool: r.name,
        args: redactSecrets(calls.get(r.id)?.args ?? {}) as Record<string, unknown>,
        result: text.length > max ? `${text.slice(0, max - 1)}…` : text,
        ...(r.isError ? { isError: true } : {}),
      });
    }
  }
  return steps.slice(-APPROVAL_STEP_LIMITS.steps);
}

/**
 * Who must approve calls of the `asking` tools (the strictest of their rules) and who started the
 * run, as an approval request of either loop stores them; nothing for one person with nobody
 * excluded.
 */
export function ruleOf(run: TaskRun, asking: readonly CatalogTool[]): Pick<Approval, 'rule' | 'requester'> {
  const policy = run.tools.policy;
  const rule = ruleToStore(asking.map((t) => policy.approvalRule?.(t) ?? { required: 1, distinctFrom: 'none' as const }));
  const requester = run.job.incident.requestedBy;
  return { ...(rule ? { rule } : {}), ...(requester ? { requester } : {}) };
}

/** What an approval shows of its incident: id, title (the summary's first line), severity, service, source. */
export function incidentContext(incident: Incident): NonNullable<Approval['incident']> {
  const title = incident.summary.split('\n')[0]!.trim().slice(0, 200) || incident.reason;
  const service = incident.labels?.service;
  return { id: incident.id, title, severity: incident.severity, ...(service ? { service } : {}), source: incident.source };
}

/** Records the wait in the checkpoint and parks the task until the approval's timeout (both loops). */
export async function parkForApproval(run: TaskRun, approval: Approval): Promise<never> {
  const { state } = run;
  // Parked since the first time (a task woken early keeps its original start of the wait).
  const since =
    state.pending?.kind === 'approval' && state.pending.approvalId === approval.id ? state.pending.at : new Date(run.now()).toISOString();
  state.pending = { kind: 'approval', step: state.step, approvalId: approval.id, at: since };
  await run.save();
  (run.deps.telemetry ?? NO_TELEMETRY).spanEvent('approval.parked', {
    'bosun.approval.id': approval.id,
    'bosun.approval.timeout_at': approval.timeoutAt,
  });
  throw new ParkError(approval.id, Date.parse(approval.timeoutAt));
}

/** Whether the call at `index` of the turn needed the approval. */
export function neededApproval(approval: Approval | undefined, index: number): boolean {
  return approval?.calls.some((c) => c.index === index && c.needsApproval) ?? false;
}

/** Why a call that needed the approval may not run; undefined when it was approved. */
export function notApproved(approval: Approval | undefined, index: number): string | undefined {
  if (!neededApproval(approval, index) || (approval?.status === 'approved' && (approval.approved ?? []).includes(index))) return undefined;
  return approval?.status === 'denied'
    ? `the operator denied it${approval.denyReason ? `: ${approval.denyReason}` : ''}`
    : 'the operator did not approve this call';
}

/** The message that tells the model what the operator decided. */
export function describeDecision(a: Approval): string {
  const asking = a.calls.filter((c) => c.needsApproval);
  const approved = a.status === 'approved' ? asking.filter((c) => (a.approved ?? []).includes(c.index)) : [];
  const refused = asking.filter((c) => !approved.includes(c));
  const line = (c: Approval['calls'][number]) => `- [${c.index}] ${c.tool} ${JSON.stringify(c.args)}`;
  const parts: string[] = [];
  if (approved.length > 0)
    parts.push(
      `${APPROVED_CALLS_MARKER} (approval ${a.id}, by ${a.decidedBy ?? 'an operator'}); they were executed as written:`,
      ...approved.map(line),
    );
  if (refused.length > 0) {
    const why =
      a.status === 'denied'
        ? a.denyReason === APPROVAL_TIMEOUT_REASON
          ? 'nobody decided in time (timeout)'
          : `denied: ${a.denyReason ?? 'no reason given'}`
        : 'not included in the approval';
    parts.push(
      `An operator did NOT approve the following calls (${why}); they were not executed. Continue without them:`,
      ...refused.map(line),
    );
  }
  return parts.join('\n');
}
