import {
  APPROVAL_STEP_LIMITS,
  approvalDue,
  approvalRequestedEvent,
  redactSecrets,
  taskApprovalId,
  type Approval,
  type ApprovalStep,
  type CatalogTool,
  type CodeActCall,
} from '@bosun/contract';
import type { TaskRun } from './task-run.js';
import { incidentContext, parkForApproval, ruleOf } from './task-approval.js';

/** The approval a script's call to an `ask` tool needs: one per call, `ap-<taskId>-s<step>-c<i>`. */
export function scriptApprovalId(taskId: string, step: number, index: number): string {
  return `${taskApprovalId(taskId, step)}-c${index}`;
}

/**
 * The run so far of a script's call, as its approval shows it: the script's earlier calls that
 * have their answer (before the one at `index`), arguments redacted, the first characters of
 * each answer; the latest {@link APPROVAL_STEP_LIMITS}`.steps`. Earlier model turns are not
 * included: their scripts' journals are gone, and only their outcome's text is in the history.
 */
export function scriptStepsSoFar(calls: readonly CodeActCall[], index: number): ApprovalStep[] {
  const max = APPROVAL_STEP_LIMITS.result;
  return calls
    .slice(0, index)
    .flatMap((c): ApprovalStep[] => {
      if (!c.answer) return [];
      const error = 'error' in c.answer ? c.answer.error : undefined;
      const text = error ?? (JSON.stringify(redactSecrets('ok' in c.answer ? c.answer.ok : null)) || '');
      return [
        {
          tool: c.tool,
          args: redactSecrets(c.args) as Record<string, unknown>,
          result: text.length > max ? `${text.slice(0, max - 1)}…` : text,
          ...(error !== undefined ? { isError: true } : {}),
        },
      ];
    })
    .slice(-APPROVAL_STEP_LIMITS.steps);
}

/**
 * The approval of the script's `index`-th call, requested when there is none. While it is
 * undecided the task parks: the checkpoint (with the journal up to this call) records the wait
 * and {@link ParkError} is thrown; the script is run again from the journal once it is decided.
 * Undecided past its timeout, it resolves as denied (`timeout`). The time spent waiting moves
 * the task's deadline, as in the task loop.
 */
export async function scriptApproval(run: TaskRun, call: CodeActCall, index: number, tool: CatalogTool): Promise<Approval> {
  const { store, waiter } = run.approvals();
  const { job, spec, state } = run;
  const id = scriptApprovalId(job.taskId, state.step, index);
  let approval = await store.get(id);
  if (!approval) {
    const timeoutMs = run.tools.policy.approvalTimeoutMs(tool);
    approval = await store.request({
      id,
      runId: job.runId,
      incidentId: job.incidentId,
      agent: spec.name,
      taskId: job.taskId,
      calls: [{ index, tool: call.tool, args: call.args, needsApproval: true, key: call.key }],
      reason: `call ${index} of the script of step ${state.step}:\n${state.codeact?.script ?? ''}`,
      createdAt: new Date(run.now()).toISOString(),
      timeoutAt: new Date(run.now() + timeoutMs).toISOString(),
      // As in the task loop: the tool's rule of several people, who started the run, the incident.
      ...ruleOf(run, [tool]),
      incident: incidentContext(job.incident),
      steps: scriptStepsSoFar(state.codeact?.calls ?? [], index),
    });
    run.deps.events.emit(approvalRequestedEvent(approval));
    run.deps.log.info({ approvalId: id, taskId: job.taskId }, 'script waiting for approval');
  }
  if (approval.status === 'pending') {
    if (!approvalDue(approval)) return parkForApproval(run, approval);
    approval = await waiter.expire(approval);
  }
  if (state.pending?.kind === 'approval' && state.pending.approvalId === id) {
    const decided = approval.decidedAt ? Date.parse(approval.decidedAt) : run.now();
    state.approvalWaitMs = (state.approvalWaitMs ?? 0) + Math.max(0, decided - Date.parse(state.pending.at));
    delete state.pending;
    run.dirty = true;
  }
  return approval;
}
