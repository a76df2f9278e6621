import { APPROVAL_TIMEOUT_REASON, type Approval } from './approvals.js';
import type { DecisionPath } from './identity.js';
import type { ApprovalSpecialist, ApprovalViewer } from './approval-context.js';

/*
 * An approval as a person deciding reads it (issue 23 item 3): how far it has got ("1 of 2") and
 * each decision so far with its person, path and time. Derived from the stored approval, never
 * stored: the operator HTTP API, the console and `bosun approvals` answer with it, so they say
 * the same thing.
 */

/** How far an approval has got: `approvals` given of `required`, as text (`1 of 2`). */
export interface ApprovalProgress {
  approvals: number;
  required: number;
  text: string;
}

/** One decision of an approval: an approval (one vote of a rule, or the whole), a denial, or the timeout. */
export interface ApprovalDecisionEntry {
  decision: 'approve' | 'deny' | 'timeout';
  /** Who: the person as their path resolved them, or Bosun for a timeout. */
  name: string;
  /** Whether the name came from a credential Bosun checked; absent for decisions stored before actors were. */
  verified?: boolean;
  /** By which path (`cli`, `http`, `console`, `slack`, `a2a`); absent for a timeout and older decisions. */
  path?: DecisionPath;
  at: string;
  /** Why it was denied. */
  reason?: string;
}

/**
 * What is read beside an approval when it is answered (`libs/transport/src/stores/approval-context.ts`):
 * the run's other specialists (absent when the run's checkpoint is gone: expired, or a call of
 * the gateway's MCP face, which has no run), why they could not be read, and who has looked at it.
 */
export interface ApprovalReadContext {
  specialists?: ApprovalSpecialist[];
  /** Why the run's specialists could not be read (its checkpoint does not parse), when they could not. */
  specialistsProblem?: string;
  viewers?: ApprovalViewer[];
}

/**
 * An approval with its {@link ApprovalProgress}, its {@link ApprovalDecisionEntry decisions}
 * and, when read with it, its {@link ApprovalReadContext context}.
 */
export type ApprovalView = Approval & { progress: ApprovalProgress; decisions: ApprovalDecisionEntry[] } & ApprovalReadContext;

/** How far `a` has got: under a rule of several people its votes, else 1 once approved. */
export function approvalProgress(a: Approval): ApprovalProgress {
  const required = a.rule?.required ?? 1;
  const approvals = a.votes !== undefined ? a.votes.length : a.status === 'approved' ? 1 : 0;
  return { approvals, required, text: `${approvals} of ${required}` };
}

/** Every decision of `a` so far, oldest first: each vote of a rule, then a denial or the timeout. */
export function approvalDecisions(a: Approval): ApprovalDecisionEntry[] {
  const out: ApprovalDecisionEntry[] = (a.votes ?? []).map((v) => ({
    decision: 'approve',
    name: v.actor.name,
    verified: v.actor.verified,
    path: v.actor.path,
    at: v.at,
  }));
  if (a.status === 'pending' || a.decidedAt === undefined || (a.status === 'approved' && a.votes !== undefined)) return out;
  const who = a.actor ? { name: a.actor.name, verified: a.actor.verified, path: a.actor.path } : { name: a.decidedBy ?? 'unknown' };
  if (a.status === 'approved') return [...out, { decision: 'approve', ...who, at: a.decidedAt }];
  const timeout = a.denyReason === APPROVAL_TIMEOUT_REASON && !a.actor;
  return [
    ...out,
    { decision: timeout ? 'timeout' : 'deny', ...who, at: a.decidedAt, ...(a.denyReason !== undefined ? { reason: a.denyReason } : {}) },
  ];
}

/** `a` with its progress and decisions, and the `context` read beside it, as the operator surfaces answer it. */
export function approvalView(a: Approval, context: ApprovalReadContext = {}): ApprovalView {
  return { ...a, progress: approvalProgress(a), decisions: approvalDecisions(a), ...context };
}
