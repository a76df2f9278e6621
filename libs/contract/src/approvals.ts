import { z } from 'zod';
import { BosunError } from './errors.js';
import { callDigest, callFingerprint, toolCallKey } from './ids.js';
import { sameSecret } from './secrets.js';
import { Actor } from './identity.js';

/*
 * Approvals of tool calls, as stored in Redis (the store is `ApprovalStore` in libs/transport).
 * Every key is under `<prefix>:`:
 *
 * - `approval:<id>`: the request, JSON ({@link Approval} without the decision fields, `status`
 *   `pending`), kept 30 days. A decision never rewrites it; only the parked task's `queue` and
 *   `jobId` are added to it once it parks.
 * - `approval:<id>:decision`: the decision, JSON ({@link ApprovalDecisionRecord}), written once
 *   (`SET NX`), kept 30 days. An approval as read is the request with its decision merged in.
 * - `approvals:pending`: a sorted set of the pending ids, scored by creation time (ms).
 * - `approvals:run:<runId>`: a set of the run's approval ids, kept 30 days (from its latest request).
 * - `approval:<id>:votes`: under a rule of more than one person ({@link ApprovalRule}), a hash
 *   of the approvals given so far: the person's name (lower-cased) → {@link ApprovalVote} JSON,
 *   written with HSETNX (the same person twice counts once), kept 30 days. The vote that
 *   completes the rule writes the decision in the same Lua script (only when there is none).
 *
 * Ids: `ap-<taskId>-s<step>` for a specialist's turn ({@link taskApprovalId}), `ap-mcp-<uuid>`
 * for a call through the gateway's MCP face.
 */

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
   * Approvals stored before keys were recorded get it derived when read ({@link proposedCallKey}).
   */
  key: z.string().optional(),
  /** `callDigest` of the real arguments; absent in approvals stored before it, whose `args` are the real ones. */
  digest: z.string().optional(),
});
export type ProposedCall = z.infer<typeof ProposedCall>;

/** A call as the proposer gives it to the store: real arguments, and its key. */
export interface ProposedCallInput {
  index: number;
  tool: string;
  args: Record<string, unknown>;
  needsApproval: boolean;
  key: string;
}

/**
 * How many people an approval needs (`required`, default 1) and whom they must differ from:
 * `distinctFrom: requester` refuses the person who started the run (`Incident.requestedBy`).
 * From the policy of the calls' tools (`approvals` per tool or per server); the strictest wins.
 */
export const ApprovalRule = z
  .object({
    required: z.number().int().min(1).max(5).default(1),
    distinctFrom: z.enum(['requester', 'none']).default('none'),
  })
  .strict();
export type ApprovalRule = z.output<typeof ApprovalRule>;

/** One person's approval toward an approval's rule: who, and when. */
export const ApprovalVote = z.object({ actor: Actor, at: z.string() });
export type ApprovalVote = z.infer<typeof ApprovalVote>;

/** Limits of the run so far an approval keeps ({@link ApprovalStep}): how many steps, and each result's length. */
export const APPROVAL_STEP_LIMITS = { steps: 20, result: 300 } as const;

/**
 * One step of the run so far, as a person deciding needs it: a call the agent made before the
 * turn that asks, its arguments (secret-looking values `[redacted]`), and the first characters of
 * what came back.
 */
export const ApprovalStep = z.object({
  tool: z.string(),
  args: z.record(z.string(), z.unknown()),
  /** The result's text, cut to {@link APPROVAL_STEP_LIMITS}`.result` characters. */
  result: z.string(),
  /** True when the tool reported an error. */
  isError: z.boolean().optional(),
});
export type ApprovalStep = z.infer<typeof ApprovalStep>;

/** An approval request and, once decided, its decision (the two stored keys merged). */
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
  /** Indexes of the approved calls (all calls needing approval when approved without `only`). */
  approved: z.array(z.number().int()).optional(),
  decidedBy: z.string().optional(),
  /** Who decided, as the decision's path resolved them (absent in decisions stored before it, and for timeouts). */
  actor: Actor.optional(),
  decidedAt: z.string().optional(),
  /** Why it was denied ({@link APPROVAL_TIMEOUT_REASON} when nobody decided in time). */
  denyReason: z.string().optional(),
  /** Where the parked task waits: its queue and job id. */
  queue: z.string().optional(),
  jobId: z.string().optional(),
  /** The rule of the calls' tools; absent: one person decides (as before rules existed). */
  rule: ApprovalRule.optional(),
  /** Who started the run (`Incident.requestedBy`), when the path that published it could tell. */
  requester: z.string().optional(),
  /**
   * The incident the calls belong to, as a person needs it to decide: its id, title (the
   * summary's first line), severity, service (the `service` label) and source. Absent in
   * approvals stored before it.
   */
  incident: z
    .object({ id: z.string(), title: z.string(), severity: z.string(), service: z.string().optional(), source: z.string() })
    .optional(),
  /** The approvals given so far toward `rule.required` (read from `approval:<id>:votes`), oldest first. */
  votes: z.array(ApprovalVote).optional(),
  /**
   * The run so far: the calls the agent made before the turn that asks, oldest first, at most
   * {@link APPROVAL_STEP_LIMITS}`.steps` (the latest). Absent in approvals stored before it and
   * where the proposer has none to give (the gateway's MCP face).
   */
  steps: z.array(ApprovalStep).optional(),
});
export type Approval = z.infer<typeof Approval>;

/** What the store's `request` takes: an approval's request, with the calls as proposed. */
export type ApprovalRequest = Omit<Approval, 'status' | 'calls' | 'votes'> & { calls: ProposedCallInput[] };

/** The decision as stored at `approval:<id>:decision`, merged into the request when read. */
export const ApprovalDecisionRecord = z.object({
  status: z.enum(['approved', 'denied']),
  /** The decider's name: `actor.name` when the actor is known. */
  decidedBy: z.string(),
  /** Who decided and by which path; absent in records stored before it and for Bosun's own (timeout) decisions. */
  actor: Actor.optional(),
  decidedAt: z.string(),
  /** Present when approved: the indexes of the approved calls. */
  approved: z.array(z.number().int()).optional(),
  /** Present when denied. */
  denyReason: z.string().optional(),
  /** Under a rule of more than one person: every approval that counted, oldest first. */
  votes: z.array(ApprovalVote).optional(),
});
export type ApprovalDecisionRecord = z.infer<typeof ApprovalDecisionRecord>;

/** The deny reason of an approval nobody decided before its `timeoutAt`. */
export const APPROVAL_TIMEOUT_REASON = 'timeout';

/** The id of the approval a specialist's turn asks for: `ap-<taskId>-s<step>`. */
export function taskApprovalId(taskId: string, step: number): string {
  return `ap-${taskId}-s${step}`;
}

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
  if (call.digest) return sameSecret(call.digest, callDigest(approval.id, proposedCallKey(approval, call), tool, args));
  return callFingerprint(call.tool, call.args) === callFingerprint(tool, args);
}

// ---- decisions ---------------------------------------------------------------------------

/**
 * An operator's decision: approve (every call needing approval, or `only` those), or deny with a
 * reason; `by` names the decider. `actor`, when the path knows who it is, is the decider as
 * resolved ({@link Actor}); then `by` is `actor.name`.
 */
export type Decision =
  { approve: true; only?: number[]; by: string; actor?: Actor } | { approve: false; reason: string; by: string; actor?: Actor };

/** The fields of a decision as an operator enters it (HTTP body, CLI flags). */
export const DECISION_FIELDS = ['decision', 'only', 'reason', 'by'] as const;

/** Limits of a decision as an operator enters it: `by` and a denial's `reason`, in characters. */
export const DECISION_LIMITS = { by: 200, reason: 10_000 } as const;

/** What is wrong with a decision: the field at fault (`body` for the whole) and how. */
export type DecisionProblem = 'unknown_field' | 'invalid' | 'missing' | 'not_allowed' | 'too_long';

/** A decision that cannot be taken. The message starts with the field at fault (`reason: …`). */
export class DecisionError extends BosunError {
  /** `decision`, `only`, `reason`, `by`, an unknown field's name, or `body`. */
  readonly field: string;
  readonly problem: DecisionProblem;
  constructor(field: string, problem: DecisionProblem, message: string) {
    super('bad_decision', `${field}: ${message}`, { data: { field, problem } });
    this.name = 'DecisionError';
    this.field = field;
    this.problem = problem;
  }
}

/** Options of {@link parseDecision}. */
export interface ParseDecisionOptions {
  /** The decider when `by` is absent. Without it, `by` is required. */
  defaultBy?: string;
  /** Length limits; default {@link DECISION_LIMITS}. `false`: none (a decision made by Bosun itself). */
  limits?: { by: number; reason: number } | false;
  /**
   * The decider as the path resolved them. Verified: `by` is the actor's name, and a `by` in the
   * input that names someone else is kept only as the actor's unverified `note`. Unverified (the
   * shared operator token): the actor's name is the `by` given, else the actor's own.
   */
  actor?: Actor;
}

/** A decision's `by`: trimmed, non-empty, within the limit. */
function parseBy(value: unknown, options: ParseDecisionOptions): string {
  const max = options.limits === false ? undefined : (options.limits ?? DECISION_LIMITS).by;
  if (value === undefined && options.defaultBy !== undefined) return options.defaultBy;
  if (typeof value !== 'string' || value.trim() === '' || (max !== undefined && value.length > max))
    throw new DecisionError('by', 'invalid', `must be a non-empty string${max === undefined ? '' : ` of at most ${max} characters`}`);
  return value.trim();
}

/** An approval's `only`: a non-empty array of call indexes, duplicates dropped. */
function parseOnly(value: unknown): number[] {
  if (!Array.isArray(value) || value.length === 0 || !value.every((i) => Number.isSafeInteger(i) && (i as number) >= 0))
    throw new DecisionError('only', 'invalid', 'must be a non-empty array of call indexes (integers ≥ 0)');
  return [...new Set(value as number[])];
}

/** A denial's `reason`: trimmed, non-empty, within the limit. */
function parseReason(value: unknown, options: ParseDecisionOptions): string {
  if (typeof value !== 'string' || value.trim() === '')
    throw new DecisionError('reason', 'missing', 'required to deny (a non-empty string; the agent is told it)');
  const max = options.limits === false ? undefined : (options.limits ?? DECISION_LIMITS).reason;
  if (max !== undefined && value.length > max) throw new DecisionError('reason', 'too_long', `at most ${max} characters`);
  return value.trim();
}

/**
 * Checks an operator's decision — `{ decision: "approve" | "deny", only?, reason?, by? }`, from an
 * HTTP body or CLI flags — and returns it as a {@link Decision}. This is the one check of a
 * decision's form: the HTTP API, the CLI and the approval store all use it. Whether `only` names
 * calls of the approval is the store's to check (it knows the approval).
 *
 * @throws DecisionError naming the first field at fault.
 */
export function parseDecision(input: unknown, options: ParseDecisionOptions = {}): Decision {
  if (typeof input !== 'object' || input === null || Array.isArray(input))
    throw new DecisionError('body', 'invalid', 'must be a JSON object');
  const b = input as Record<string, unknown>;
  const unknown = Object.keys(b).filter((k) => !(DECISION_FIELDS as readonly string[]).includes(k));
  if (unknown.length > 0) throw new DecisionError(unknown[0]!, 'unknown_field', `unknown field (known: ${DECISION_FIELDS.join(', ')})`);
  if (b.decision !== 'approve' && b.decision !== 'deny') throw new DecisionError('decision', 'invalid', 'must be "approve" or "deny"');
  const who = decider(b.by, options);
  if (b.decision === 'approve') {
    if (b.reason !== undefined) throw new DecisionError('reason', 'not_allowed', 'only a denial takes a reason');
    return b.only === undefined ? { approve: true, ...who } : { approve: true, only: parseOnly(b.only), ...who };
  }
  if (b.only !== undefined)
    throw new DecisionError('only', 'not_allowed', 'only an approval takes call indexes (a denial covers every call)');
  return { approve: false, reason: parseReason(b.reason, options), ...who };
}

/** A decision's `by` and, when the path gave one, its actor (see {@link ParseDecisionOptions.actor}). */
function decider(by: unknown, options: ParseDecisionOptions): { by: string; actor?: Actor } {
  if (options.actor === undefined) return { by: parseBy(by, options) };
  const parsed = Actor.safeParse(options.actor);
  if (!parsed.success)
    throw new DecisionError(
      'actor',
      'invalid',
      parsed.error.issues.map((i) => `${i.path.join('.') || '(actor)'}: ${i.message}`).join('; '),
    );
  const actor = parsed.data;
  if (!actor.verified) {
    const name = parseBy(by ?? actor.name, options);
    return { by: name, actor: { ...actor, name } };
  }
  if (by === undefined) return { by: actor.name, actor };
  const typed = parseBy(by, options);
  return { by: actor.name, actor: typed === actor.name || actor.note !== undefined ? actor : { ...actor, note: typed } };
}

/** The input form of a {@link Decision}, for {@link parseDecision} (with its `actor` given as an option). */
export function decisionInput(d: Decision): Record<string, unknown> {
  return d.approve
    ? { decision: 'approve', by: d.by, ...(d.only === undefined ? {} : { only: d.only }) }
    : { decision: 'deny', reason: d.reason, by: d.by };
}

// ---- the approval's lifecycle, shared by its store, its waiters and the loops -------------

/** Why a decision was refused (`forbidden`: this person may not approve it, under its rule). */
export class ApprovalError extends BosunError {
  declare readonly code: 'not_found' | 'already_decided' | 'bad_request' | 'forbidden';
  constructor(code: ApprovalError['code'], message: string, cause?: unknown) {
    super(code, message, { cause });
    this.name = 'ApprovalError';
  }
}

/** Whether `a` is undecided and its time is up (at `timeoutAt`, not after). */
export function approvalDue(a: Pick<Approval, 'status' | 'timeoutAt'>, now = Date.now()): boolean {
  return a.status === 'pending' && now >= Date.parse(a.timeoutAt);
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
      ...(a.actor ? { actor: a.actor } : {}),
      decidedAt: a.decidedAt,
      ...(a.denyReason ? { denyReason: a.denyReason } : {}),
    },
  };
}
