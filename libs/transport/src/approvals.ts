import { Queue } from 'bullmq';
import { z } from 'zod';
import { callDigest, callFingerprint, redactSecrets, toolCallKey } from '@bosun/contract';
import type { RedisClient } from './connections.js';
import { keys } from './keys.js';

/** One call proposed in a turn that needs an approval. */
export const ProposedCall = z.object({
  /** Position of the call in the model's turn. */
  index: z.number().int().nonnegative(),
  tool: z.string(),
  /**
   * The arguments as proposed, with the values of secret-looking keys shown as `[redacted]`
   * (`redactSecrets`); the real ones stay with the caller (the task's checkpoint).
   */
  args: z.record(z.string(), z.unknown()),
  /** True for calls to `ask` tools; the others run without an approval. */
  needsApproval: z.boolean(),
  /**
   * The idempotency key the call runs under: the approval authorises exactly this key, once.
   * Approvals stored before keys were recorded get it derived when read (see {@link ApprovalStore.get}).
   */
  key: z.string().optional(),
  /** `callDigest` of the real arguments; absent in approvals stored before it, whose `args` are the real ones. */
  digest: z.string().optional(),
});
export type ProposedCall = z.infer<typeof ProposedCall>;

/** A call as the proposer gives it to {@link ApprovalStore.request}: real arguments, and its key. */
export interface ProposedCallInput {
  index: number;
  tool: string;
  args: Record<string, unknown>;
  needsApproval: boolean;
  key: string;
}

/** An approval request and, once decided, its decision. */
export const Approval = z.object({
  id: z.string(),
  status: z.enum(['pending', 'approved', 'denied']),
  runId: z.string(),
  incidentId: z.string(),
  agent: z.string(),
  taskId: z.string(),
  /** The calls proposed, exactly as the model wrote them. */
  calls: z.array(ProposedCall),
  /** The agent's reason: the text of its turn. */
  reason: z.string(),
  createdAt: z.string(),
  /** When an undecided request resolves as denied with reason `timeout`. */
  timeoutAt: z.string(),
  /** Indexes of the approved calls (all calls needing approval when approved without `--only`). */
  approved: z.array(z.number().int()).optional(),
  decidedBy: z.string().optional(),
  decidedAt: z.string().optional(),
  /** Why it was denied (`timeout` when nobody decided in time). */
  denyReason: z.string().optional(),
  /** Where the parked task waits: its queue and job id. */
  queue: z.string().optional(),
  jobId: z.string().optional(),
});
export type Approval = z.infer<typeof Approval>;

/** An operator's decision. */
export type Decision = { approve: true; only?: number[]; by: string } | { approve: false; reason: string; by: string };

/** What {@link ApprovalStore.request} takes: an approval's request, with the calls as proposed. */
export type ApprovalRequest = Omit<Approval, 'status' | 'calls'> & { calls: ProposedCallInput[] };

/**
 * The key a proposed call runs under. Approvals stored before keys were recorded: for a
 * specialist's turn (`ap-<taskId>-s<step>`) it is `<taskId>-s<step>-c<index>`; for a call through
 * the gateway's MCP face, the key it was proposed under, kept as the approval's `taskId`.
 */
export function proposedCallKey(approval: Pick<Approval, 'id' | 'taskId'>, call: Pick<ProposedCall, 'index' | 'key'>): string {
  if (call.key) return call.key;
  const prefix = `ap-${approval.taskId}-s`;
  const step = approval.id.startsWith(prefix) ? approval.id.slice(prefix.length) : '';
  return /^\d+$/.test(step) ? toolCallKey(approval.taskId, Number(step), call.index) : approval.taskId;
}

/**
 * Whether a call of `tool` with `args` (the real arguments) is the proposed call `call` of the
 * approval: by the digest of the real arguments when stored, else (older approvals) by the
 * arguments as stored. Key order does not matter.
 */
export function matchesProposedCall(approval: Pick<Approval, 'id' | 'taskId'>, call: ProposedCall, tool: string, args: unknown): boolean {
  if (call.tool !== tool) return false;
  if (call.digest) return call.digest === callDigest(approval.id, proposedCallKey(approval, call), tool, args);
  return callFingerprint(call.tool, call.args) === callFingerprint(tool, args);
}

/** Why a decision was refused. */
export class ApprovalError extends Error {
  readonly code: 'not_found' | 'already_decided' | 'bad_request';
  constructor(code: ApprovalError['code'], message: string) {
    super(message);
    this.name = 'ApprovalError';
    this.code = code;
  }
}

const TTL_SECONDS = 30 * 24 * 3600;

/**
 * Approvals in Redis: `<prefix>:approval:<id>` (JSON) and the sorted set of pending ids
 * `<prefix>:approvals:pending`. They outlive every process: a task waiting for one holds no
 * worker, and the decision wakes it wherever it is parked.
 */
export class ApprovalStore {
  private readonly redis: RedisClient;
  private readonly prefix: string;
  private readonly queues = new Map<string, Queue>();

  constructor(options: { redis: RedisClient; prefix: string }) {
    this.redis = options.redis;
    this.prefix = options.prefix;
  }

  /**
   * Creates a pending request (idempotent: an existing one with this id is returned as it is).
   * Each call is stored with its key, its arguments with secrets redacted, and the digest of
   * the real arguments; the real arguments are not stored.
   */
  async request(approval: ApprovalRequest): Promise<Approval> {
    const calls = approval.calls.map((c) => ({
      index: c.index,
      tool: c.tool,
      args: redactSecrets(c.args) as Record<string, unknown>,
      needsApproval: c.needsApproval,
      key: c.key,
      digest: callDigest(approval.id, c.key, c.tool, c.args),
    }));
    const value: Approval = { ...approval, calls, status: 'pending' };
    const created = await this.redis.set(keys.approval(this.prefix, value.id), JSON.stringify(value), 'EX', TTL_SECONDS, 'NX');
    const current = created === null ? ((await this.get(value.id)) ?? value) : value;
    // Idempotent: a retried request (after a crash between the two writes) is listed too.
    if (current.status === 'pending') await this.redis.zadd(keys.approvalsPending(this.prefix), Date.parse(current.createdAt), current.id);
    return current;
  }

  /** Records where the task waits, so a decision can wake it. */
  async parkedAt(id: string, queue: string, jobId: string): Promise<void> {
    const a = await this.get(id);
    if (!a) return;
    await this.redis.set(keys.approval(this.prefix, id), JSON.stringify({ ...a, queue, jobId }), 'KEEPTTL');
  }

  async get(id: string): Promise<Approval | null> {
    const [raw, decision] = await Promise.all([
      this.redis.get(keys.approval(this.prefix, id)),
      this.redis.get(keys.approvalDecision(this.prefix, id)),
    ]);
    if (raw === null) return null;
    // The request and its decision live in two keys: the decision is written once (SET NX),
    // and the request — the calls exactly as proposed — is never rewritten by a decision.
    const a = Approval.parse({ ...(JSON.parse(raw) as object), ...(decision ? (JSON.parse(decision) as object) : {}) });
    // Stored before keys were recorded: each call's key, derived as it was then.
    return { ...a, calls: a.calls.map((c) => (c.key ? c : { ...c, key: proposedCallKey(a, c) })) };
  }

  /** Pending requests, oldest first. */
  async pending(limit = 1000): Promise<Approval[]> {
    const ids = await this.redis.zrange(keys.approvalsPending(this.prefix), 0, limit - 1);
    const out: Approval[] = [];
    for (const id of ids) {
      const a = await this.get(id);
      if (a && a.status === 'pending') out.push(a);
      // An expired or decided request leaves the pending list.
      else await this.redis.zrem(keys.approvalsPending(this.prefix), id);
    }
    return out;
  }

  /**
   * Decides a pending request, once, and wakes the parked task. `only` names the indexes of the
   * calls approved; without it every call needing approval is approved.
   */
  async decide(id: string, decision: Decision): Promise<Approval> {
    const current = await this.get(id);
    if (!current) throw new ApprovalError('not_found', `no approval ${id}`);
    if (current.status !== 'pending') {
      throw new ApprovalError(
        'already_decided',
        `approval ${id} was already decided: ${current.status}${current.decidedBy ? ` by ${current.decidedBy}` : ''}`,
      );
    }
    if (decision.by.trim() === '') throw new ApprovalError('bad_request', `approval ${id}: the decider must be named`);
    const asking = current.calls.filter((c) => c.needsApproval).map((c) => c.index);
    let approved: number[] | undefined;
    if (decision.approve) {
      approved = [...new Set(decision.only ?? asking)].sort((a, b) => a - b);
      const unknown = approved.filter((i) => !asking.includes(i));
      if (unknown.length > 0) {
        throw new ApprovalError(
          'bad_request',
          `approval ${id}: "only" names calls that do not need approval: ${unknown.join(', ')} (calls needing approval: ${asking.join(', ')})`,
        );
      }
      if (approved.length === 0) throw new ApprovalError('bad_request', `approval ${id}: approve at least one call, or deny it`);
    } else if (decision.reason.trim() === '') {
      throw new ApprovalError('bad_request', `approval ${id}: a denial needs a reason`);
    }
    const patch = {
      status: decision.approve ? 'approved' : 'denied',
      decidedBy: decision.by,
      decidedAt: new Date().toISOString(),
      ...(approved ? { approved } : {}),
      ...(decision.approve ? {} : { denyReason: decision.reason }),
    };
    const written = await this.redis.set(keys.approvalDecision(this.prefix, id), JSON.stringify(patch), 'EX', TTL_SECONDS, 'NX');
    if (written === null) {
      const already = await this.get(id);
      throw new ApprovalError(
        'already_decided',
        `approval ${id} was already decided: ${already?.status ?? 'unknown'}${already?.decidedBy ? ` by ${already.decidedBy}` : ''}`,
      );
    }
    await this.redis.zrem(keys.approvalsPending(this.prefix), id);
    const decided = (await this.get(id))!;
    // The decision is stored; waking the task is best effort: a parked task also wakes by itself
    // at the approval's timeout and then finds the decision.
    await this.wake(decided).catch(() => false);
    return decided;
  }

  /** Moves the parked task back to its queue (it was delayed until the approval's timeout). */
  async wake(a: Approval): Promise<boolean> {
    if (!a.queue || !a.jobId) return false;
    let q = this.queues.get(a.queue);
    if (!q) {
      q = new Queue(a.queue, { connection: this.redis, prefix: this.prefix });
      this.queues.set(a.queue, q);
    }
    const job = await q.getJob(a.jobId);
    if (!job || (await job.getState()) !== 'delayed') return false;
    await job.promote();
    return true;
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.close()));
  }
}

/**
 * The `approval.requested` event of a new request (its proposer publishes it): the calls as
 * stored — keys, arguments with secrets redacted — without the digests.
 */
export function approvalRequestedEvent(a: Approval) {
  return {
    type: 'approval.requested' as const,
    runId: a.runId,
    incidentId: a.incidentId,
    agent: a.agent,
    data: {
      approvalId: a.id,
      taskId: a.taskId,
      calls: a.calls.map(({ digest: _digest, ...c }) => c),
      reason: a.reason,
      timeoutAt: a.timeoutAt,
    },
  };
}

/** The `approval.resolved` event for a decided approval (whoever decided publishes it). */
export function approvalResolvedEvent(a: Approval) {
  return {
    type: 'approval.resolved' as const,
    runId: a.runId,
    incidentId: a.incidentId,
    agent: a.agent,
    data: {
      approvalId: a.id,
      status: a.status,
      approved: a.approved ?? [],
      decidedBy: a.decidedBy,
      decidedAt: a.decidedAt,
      ...(a.denyReason ? { denyReason: a.denyReason } : {}),
    },
  };
}

/** Re-exported for the gateway and tests: a call's identity, see `@bosun/contract`. */
export { callFingerprint };
