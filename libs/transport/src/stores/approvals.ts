import { Queue } from 'bullmq';
import {
  Approval,
  ApprovalDecisionRecord,
  ApprovalError,
  ApprovalVote,
  DecisionError,
  callDigest,
  callFingerprint,
  decisionInput,
  parseDecision,
  parseStoredJson,
  proposedCallKey,
  redactSecrets,
  type ApprovalRequest,
  type Decision,
} from '@bosun/contract';
import { createLogger, type Logger } from '@bosun/config';
import type { RedisClient } from '../base/connections.js';
import { keys } from '../keys.js';
import { runScript } from './scripts.js';

const TTL_SECONDS = 30 * 24 * 3600;

/**
 * One person's vote toward a rule of several people, and — when it completes the rule — the
 * decision, in one step: a crash can no longer fall between the vote that completes the rule and
 * the decision it makes (the approval would then stay pending until another vote or its timeout).
 *
 * KEYS: the votes hash, the decision key. ARGV: the voter's name (lower-cased), the vote (JSON),
 * the number of people required, the TTL (seconds), and the decision record as JSON without its
 * closing brace, `decidedBy` and `votes` (both added here, from every vote, oldest first).
 * Returns [state, votes]: 0 short of the rule, 1 decided by this vote, 2 decided before it (then
 * the vote is not recorded: it came too late to count).
 */
const VOTE_SCRIPT = `
if redis.call('EXISTS', KEYS[2]) == 1 then return {2, redis.call('HVALS', KEYS[1])} end
redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[4])
local raw = redis.call('HVALS', KEYS[1])
if #raw < tonumber(ARGV[3]) then return {0, raw} end
local votes = {}
for i, v in ipairs(raw) do
  local d = cjson.decode(v)
  votes[i] = { at = d.at, name = d.actor.name, raw = v }
end
table.sort(votes, function(a, b) return a.at < b.at end)
local names, parts = {}, {}
for i, v in ipairs(votes) do
  names[i] = v.name
  parts[i] = v.raw
end
local record = ARGV[5] .. ',"decidedBy":' .. cjson.encode(table.concat(names, ', ')) .. ',"votes":[' .. table.concat(parts, ',') .. ']}'
redis.call('SET', KEYS[2], record, 'EX', ARGV[4])
return {1, raw}
`;

/** Options of {@link ApprovalStore}. */
export interface ApprovalStoreOptions {
  redis: RedisClient;
  prefix: string;
  /** Where a failure to wake a parked task is logged; default a logger on stderr. */
  log?: Logger;
}

/**
 * Approvals in Redis, in the stored format of `@bosun/contract` (`libs/contract/src/approvals.ts`,
 * which documents the keys): `<prefix>:approval:<id>` (the request, JSON),
 * `<prefix>:approval:<id>:decision` (the decision, written once), the sorted set of pending
 * ids `<prefix>:approvals:pending` and each run's ids, `<prefix>:approvals:run:<runId>`. They outlive every process: a task waiting for one holds no
 * worker, and the decision wakes it wherever it is parked.
 */
export class ApprovalStore {
  private readonly redis: RedisClient;
  private readonly prefix: string;
  private readonly queues = new Map<string, Queue>();
  private log: Logger | undefined;

  constructor(options: ApprovalStoreOptions) {
    this.redis = options.redis;
    this.prefix = options.prefix;
    this.log = options.log;
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
    // Idempotent: a retried request (after a crash between the writes) is listed too.
    if (current.status === 'pending') await this.redis.zadd(keys.approvalsPending(this.prefix), Date.parse(current.createdAt), current.id);
    const ofRun = keys.approvalsOfRun(this.prefix, current.runId);
    await this.redis.sadd(ofRun, current.id);
    await this.redis.expire(ofRun, TTL_SECONDS);
    return current;
  }

  /**
   * The approvals of a run, oldest first, decided or not (those requested before the run's set
   * was kept are not found); an expired one is left out.
   */
  async ofRun(runId: string): Promise<Approval[]> {
    const ids = await this.redis.smembers(keys.approvalsOfRun(this.prefix, runId));
    const found = await Promise.all(ids.map((id) => this.get(id)));
    return found
      .filter((a): a is Approval => a !== null)
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
  }

  /** Records where the task waits, so a decision can wake it. */
  async parkedAt(id: string, queue: string, jobId: string): Promise<void> {
    const raw = await this.redis.get(keys.approval(this.prefix, id));
    if (raw === null) return;
    // The request as stored, plus where its task waits: never the decision, which has its own key.
    const request = parseStoredJson(Approval, raw, `approval ${id}`);
    await this.redis.set(keys.approval(this.prefix, id), JSON.stringify({ ...request, queue, jobId }), 'KEEPTTL');
  }

  /** The approval with its decision, if any; null when there is none (or it expired). */
  async get(id: string): Promise<Approval | null> {
    const [raw, decision] = await Promise.all([
      this.redis.get(keys.approval(this.prefix, id)),
      this.redis.get(keys.approvalDecision(this.prefix, id)),
    ]);
    if (raw === null) return null;
    // The request and its decision live in two keys: the decision is written once (SET NX),
    // and the request — the calls exactly as proposed — is never rewritten by a decision.
    // A request or decision that does not parse is a BadStoredValueError naming its fields.
    const decided = decision ? parseStoredJson(ApprovalDecisionRecord, decision, `the decision of approval ${id}`) : {};
    const request = parseStoredJson(Approval, raw, `approval ${id}`);
    // Under a rule of several people, the approvals given so far: a pending one's, and a denied
    // one's (the votes before the denial); an approved one's are in its decision record.
    const votes = (request.rule?.required ?? 1) > 1 && !('votes' in decided) ? { votes: await this.votes(id) } : {};
    const a: Approval = { ...request, ...votes, ...decided };
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
   * calls approved; without it every call needing approval is approved. The decision's form is
   * checked by `parseDecision` (`@bosun/contract`), here without length limits.
   */
  async decide(id: string, decision: Decision): Promise<Approval> {
    const current = await this.get(id);
    if (!current) throw new ApprovalError('not_found', `no approval ${id}`);
    if (current.status !== 'pending') throw alreadyDecided(id, current);
    const d = checked(id, decision);
    if (d.approve) refuseRequester(current, d);
    if (d.approve && (current.rule?.required ?? 1) > 1) return this.vote(current, d);
    const record = decisionRecord(id, current, d);
    const written = await this.redis.set(keys.approvalDecision(this.prefix, id), JSON.stringify(record), 'EX', TTL_SECONDS, 'NX');
    if (written === null) throw alreadyDecided(id, await this.get(id));
    return this.settle(id);
  }

  /** The approvals given so far toward an approval's rule, oldest first. */
  async votes(id: string): Promise<ApprovalVote[]> {
    const all = await this.redis.hgetall(keys.approvalVotes(this.prefix, id));
    return Object.values(all)
      .map((raw) => parseStoredJson(ApprovalVote, raw, `a vote on approval ${id}`))
      .sort((a, b) => a.at.localeCompare(b.at));
  }

  /**
   * Records one person's approval toward the rule (once per person: HSETNX on their name) and,
   * when it completes the rule, the decision with it ({@link VOTE_SCRIPT}, one atomic step).
   * Returns the approval: still pending with its votes when short of the rule, else decided.
   * Only a verified person counts: an unverified name (the shared token, `--by`) could be
   * anyone, and two of them could be the same person.
   */
  private async vote(current: Approval, d: Decision & { approve: true }): Promise<Approval> {
    const required = current.rule!.required;
    if (!d.actor?.verified)
      throw new ApprovalError(
        'forbidden',
        `approval ${current.id} needs ${required} different people: ${d.by} is not a verified person (the shared token or a typed name), so it cannot count toward them; decide with your own token`,
      );
    const asking = current.calls.filter((c) => c.needsApproval).map((c) => c.index);
    if (d.only !== undefined && !asking.every((i) => d.only!.includes(i)))
      throw new ApprovalError(
        'bad_request',
        `approval ${current.id} needs ${required} people: each approves every call needing approval (no "only"), or denies`,
      );
    const id = current.id;
    const vote: ApprovalVote = { actor: d.actor, at: new Date().toISOString() };
    const { decidedBy: _named, ...record } = decisionRecord(id, current, d);
    const [state] = (await runScript(
      this.redis,
      { name: 'bosunApprovalVote', lua: VOTE_SCRIPT },
      [keys.approvalVotes(this.prefix, id), keys.approvalDecision(this.prefix, id)],
      [d.actor.name.toLowerCase(), JSON.stringify(vote), String(required), String(TTL_SECONDS), JSON.stringify(record).slice(0, -1)],
    )) as [number, string[]];
    if (state === 0) return { ...current, votes: await this.votes(id) };
    if (state === 1) return this.settle(id);
    const now = await this.get(id);
    // Another vote completed the rule first: this one counted toward it all the same.
    if (now?.status === 'approved' && now.votes?.some((v) => sameName(v.actor.name, d.actor!.name))) return now;
    throw alreadyDecided(id, now);
  }

  /** After the decision is written: off the pending list, the parked task woken. */
  private async settle(id: string): Promise<Approval> {
    await this.redis.zrem(keys.approvalsPending(this.prefix), id);
    const decided = (await this.get(id))!;
    await this.wake(decided).catch((err: unknown) => {
      // The decision is stored; waking the task is best effort: a parked task also wakes by
      // itself at the approval's timeout, and then finds the decision.
      this.log ??= createLogger({ service: 'approvals', destination: process.stderr });
      this.log.warn(
        { err, approvalId: id, queue: decided.queue, jobId: decided.jobId },
        'approval decided, but its parked task could not be woken: it wakes by itself at the approval timeout and finds the decision',
      );
    });
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

const sameName = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();

/** Under `distinctFrom: requester`, the person who started the run may not approve its calls. */
function refuseRequester(current: Approval, d: Decision): void {
  if (current.rule?.distinctFrom !== 'requester' || current.requester === undefined || !sameName(current.requester, d.by)) return;
  throw new ApprovalError(
    'forbidden',
    `approval ${current.id}: ${d.by} started this run, and its rule needs approvers other than the requester (distinctFrom: requester)`,
  );
}

function alreadyDecided(id: string, a: Approval | null): ApprovalError {
  return new ApprovalError(
    'already_decided',
    `approval ${id} was already decided: ${a?.status ?? 'unknown'}${a?.decidedBy ? ` by ${a.decidedBy}` : ''}`,
  );
}

/** The decision in its checked form (`parseDecision`); a bad one is an {@link ApprovalError} `bad_request`. */
function checked(id: string, decision: Decision): Decision {
  try {
    return parseDecision(decisionInput(decision), { limits: false, ...(decision.actor ? { actor: decision.actor } : {}) });
  } catch (err) {
    if (err instanceof DecisionError) throw new ApprovalError('bad_request', `approval ${id}: ${err.message}`, err);
    throw err;
  }
}

/** The stored decision: which calls it approves must be calls of the approval that need it. */
function decisionRecord(id: string, current: Approval, decision: Decision): ApprovalDecisionRecord {
  const base = { decidedBy: decision.by, ...(decision.actor ? { actor: decision.actor } : {}), decidedAt: new Date().toISOString() };
  if (!decision.approve) return { status: 'denied', ...base, denyReason: decision.reason };
  const asking = current.calls.filter((c) => c.needsApproval).map((c) => c.index);
  const approved = [...new Set(decision.only ?? asking)].sort((a, b) => a - b);
  const unknown = approved.filter((i) => !asking.includes(i));
  if (unknown.length > 0) {
    throw new ApprovalError(
      'bad_request',
      `approval ${id}: "only" names calls that do not need approval: ${unknown.join(', ')} (calls needing approval: ${asking.join(', ')})`,
    );
  }
  if (approved.length === 0) throw new ApprovalError('bad_request', `approval ${id}: approve at least one call, or deny it`);
  return { status: 'approved', ...base, approved };
}

/** Re-exported for the gateway and tests: a call's identity, see `@bosun/contract`. */
export { callFingerprint };
/** The stored format and the approval's events, defined in `@bosun/contract`; re-exported for the store's users. */
export {
  Approval,
  ApprovalError,
  ProposedCall,
  approvalRequestedEvent,
  approvalResolvedEvent,
  proposedCallKey,
  matchesProposedCall,
} from '@bosun/contract';
export type { ApprovalRequest, Decision, ProposedCallInput } from '@bosun/contract';
