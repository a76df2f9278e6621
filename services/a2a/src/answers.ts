/**
 * Answers to a task in `input-required`: an operator's decision on the run's pending approval,
 * sent as a DataPart `{ "decision": "approve", "only"?: [i] }` or `{ "decision": "deny",
 * "reason": "…" }`. It is the same durable approval as `bosun approve` and the operator API:
 * the decision is stored once, the parked task is woken, `approval.resolved` is published.
 */
import { RequestMalformedError, UnsupportedOperationError } from '@a2a-js/sdk/errors';
import type { Message } from '@a2a-js/sdk';
import type { Logger } from '@bosun/config';
import { DecisionError, parseDecision, sleep, type A2aTaskRecord } from '@bosun/contract';
import {
  ApprovalError,
  ForbiddenError,
  approvalResolvedEvent,
  identityOf,
  requireRole,
  sharedIdentity,
  type ApprovalStore,
  type EventSink,
  type Identity,
} from '@bosun/transport';
import type { Caller } from './auth.js';
import type { RunReader } from './runs.js';
import type { A2aTaskStore } from './store.js';

const FLUSH_WAIT_MS = 2_000;

/** The decision a message carries: the fields of its one DataPart. */
function decisionInput(message: Message): Record<string, unknown> {
  const data = (message.parts ?? []).filter((p) => p.content?.$case === 'data').map((p) => p.content!.value as unknown);
  if (data.length !== 1 || typeof data[0] !== 'object' || data[0] === null || Array.isArray(data[0]))
    throw new RequestMalformedError(
      'message.parts: an answer is one DataPart {"decision": "approve" | "deny", "only"?: number[], "reason"?: string}',
    );
  return data[0] as Record<string, unknown>;
}

export class ApprovalAnswers {
  constructor(private readonly deps: { approvals: ApprovalStore; runs: RunReader; store: A2aTaskStore; events: EventSink; log: Logger }) {}

  /** Decides the pending approval of the task's run with the message's decision; returns the task, its history updated. */
  async answer(record: A2aTaskRecord, message: Message, caller: Caller, address?: string): Promise<A2aTaskRecord> {
    const pending = await this.deps.runs.pendingApproval(record.runId);
    if (!pending) throw new UnsupportedOperationError(`task ${record.taskId} is not waiting for input: it takes no message`);
    if (!caller.operator) throw new UnsupportedOperationError(`answering approval ${pending.id} needs a token with the operator right`);
    const who = callerIdentity(caller, address);
    try {
      requireRole(who, 'approve', `answering approval ${pending.id}`);
    } catch (err) {
      if (err instanceof ForbiddenError) throw new UnsupportedOperationError(err.message);
      throw err;
    }
    const input = decisionInput(message);
    let decided;
    try {
      // The decider is the token's person (verified), else the tenant (unverified); a typed `by` is at most a note.
      const decision = parseDecision(who.actor.verified ? input : { ...input, by: who.actor.name }, { actor: who.actor });
      decided = await this.deps.approvals.decide(pending.id, decision);
    } catch (err) {
      if (err instanceof ApprovalError && err.code === 'forbidden') throw new UnsupportedOperationError(err.message);
      if (err instanceof DecisionError || err instanceof ApprovalError) throw new RequestMalformedError(`decision: ${err.message}`);
      throw err;
    }
    this.deps.log.info(
      {
        approvalId: pending.id,
        tenant: caller.tenant,
        by: decided.decidedBy,
        verified: who.actor.verified,
        status: decided.status,
        taskId: record.taskId,
      },
      'approval decided over A2A',
    );
    // A vote that leaves the rule short ("1 of 2") decides nothing yet: no event.
    if (decided.status !== 'pending') this.deps.events.emit(approvalResolvedEvent(decided));
    await Promise.race([this.deps.events.flush(), sleep(FLUSH_WAIT_MS, undefined, { unref: true })]);
    return this.deps.store.append(record, { ...message, taskId: record.taskId, contextId: record.contextId });
  }
}

/** Who answers: the person the token belongs to (verified, their roles), else the tenant's operator token (unverified). */
function callerIdentity(caller: Caller, address: string | undefined): Identity {
  return caller.person ? identityOf(caller.person, 'a2a', address) : sharedIdentity(`a2a:${caller.tenant}`, 'a2a', address);
}
