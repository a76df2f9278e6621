import {
  BosunError,
  TOOL_CALL_LEASE_MS,
  TOOL_CALL_RECORD_TTL_SECONDS,
  ToolCallRecord,
  ToolCallResult,
  parseWith,
  resolvedResult,
  toolCallRecordKey,
  TOOL_CALL_TRANSITIONS,
  type ToolCallResolution,
  type ToolCallState,
} from '@bosun/contract';
import type { RedisClient } from '../base/connections.js';
import { keys } from '../keys.js';
import { runScript } from './scripts.js';

/** Redis's clock in ms, inside a script (leases are compared on one clock, whatever the gateways' say). */
const NOW_MS = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;

/**
 * KEYS[1] the record, KEYS[2] the caller's task lock (the record's key when it has none); ARGV:
 * readOnly ('1'|'0'), ttl, tool, args (secrets redacted), runId, incidentId, agent, now (ISO),
 * approvalId, argsRedacted ('true'|'false'), digest, owner (this attempt's token), leaseMs, the
 * caller's lock token ('' for none).
 *
 * Returns, in this order of checks: ['stale'] when the task lock is not the caller's;
 * ['mismatch', <recorded tool>] when the record is of another call (another digest); ['claimed']
 * when it is this attempt's own claim again (a command re-sent after a lost reply), or there is
 * no record, it is `retry`, or it is `inflight` and the tool read-only — marking it `inflight`
 * under this owner with a fresh lease; ['done', <recorded result>]; ['leased', <ms left>] for a
 * mutating call in flight under a live lease; otherwise [<the state that prevents it>].
 */
const CLAIM_SCRIPT = `
if ARGV[14] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[14] then return {'stale'} end
local f = redis.call('HMGET', KEYS[1], 'state', 'digest', 'owner', 'leaseUntil')
local state = f[1]
if state and f[2] and f[2] ~= ARGV[11] then return {'mismatch', redis.call('HGET', KEYS[1], 'tool') or ''} end
if state == 'inflight' and f[3] == ARGV[12] then return {'claimed'} end
${NOW_MS}
if (not state) or state == 'retry' or (ARGV[1] == '1' and state == 'inflight') then
  redis.call('HSET', KEYS[1], 'state', 'inflight', 'tool', ARGV[3], 'args', ARGV[4], 'runId', ARGV[5],
    'incidentId', ARGV[6], 'agent', ARGV[7], 'startedAt', ARGV[8], 'readOnly', ARGV[1] == '1' and 'true' or 'false', 'approvalId', ARGV[9],
    'argsRedacted', ARGV[10], 'digest', ARGV[11], 'owner', ARGV[12], 'leaseUntil', string.format('%.0f', now + tonumber(ARGV[13])))
  redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2]))
  return {'claimed'}
end
if state == 'done' then
  return {'done', redis.call('HGET', KEYS[1], 'result') or ''}
end
local lease = tonumber(f[4] or '0') or 0
if state == 'inflight' and lease > now then return {'leased', string.format('%.0f', lease - now)} end
return {state}
`;

/** KEYS[1] the record; ARGV owner, leaseMs. Renews the lease of a call in flight under this owner: 1, else 0. */
const RENEW_SCRIPT = `
local f = redis.call('HMGET', KEYS[1], 'state', 'owner')
if f[1] ~= 'inflight' or f[2] ~= ARGV[1] then return 0 end
${NOW_MS}
redis.call('HSET', KEYS[1], 'leaseUntil', string.format('%.0f', now + tonumber(ARGV[2])))
return 1
`;

/**
 * KEYS[1] the record, KEYS[2] the in-doubt index; ARGV the result (JSON), the writer's owner
 * token ('' for none), ttl, now (ISO), the call's key. Records the outcome of a call:
 * ['not-owner'] (nothing written) when another attempt has claimed it since; ['late'] when an
 * operator already resolved it (kept beside, as `lateResult`); ['seen-done'] when it had been
 * declared in doubt (state `done`, `seenDoneAt`, and out of the index, in this one script);
 * ['done'] otherwise.
 */
const RECORD_SCRIPT = `
local f = redis.call('HMGET', KEYS[1], 'state', 'owner', 'inDoubtAt')
local state = f[1]
if ARGV[2] ~= '' and f[2] and f[2] ~= ARGV[2] then return {'not-owner'} end
if state == 'done' then
  redis.call('HSET', KEYS[1], 'lateResult', ARGV[1])
  return {'late'}
end
redis.call('HSET', KEYS[1], 'state', 'done', 'result', ARGV[1])
redis.call('HDEL', KEYS[1], 'leaseUntil')
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
if state == 'in-doubt' or f[3] then
  redis.call('HSET', KEYS[1], 'seenDoneAt', ARGV[4])
  redis.call('ZREM', KEYS[2], ARGV[5])
  return {'seen-done'}
end
return {'done'}
`;

/**
 * KEYS[1] the record, KEYS[2] the in-doubt index; ARGV mode ('owner': the gateway that sent the
 * call; 'lapsed': another that found it in flight), owner, now (ISO), the call's key, ttl.
 * Declares a call in doubt — state, `inDoubtAt` and the index, in this one script — when it is
 * `inflight` (under this owner, or under a lease that has run out): ['marked']. Else
 * ['already'] (in doubt), ['done', <result>] (its outcome was recorded meanwhile), ['leased',
 * <ms left>] (its owner renewed the lease), or [<state>].
 */
const IN_DOUBT_SCRIPT = `
local f = redis.call('HMGET', KEYS[1], 'state', 'owner', 'leaseUntil')
local state = f[1]
if state == 'in-doubt' then return {'already'} end
if state == 'done' then return {'done', redis.call('HGET', KEYS[1], 'result') or ''} end
${NOW_MS}
if state and state ~= 'inflight' then return {state} end
if ARGV[1] == 'owner' and f[2] and f[2] ~= ARGV[2] then return {'not-owner'} end
local lease = tonumber(f[3] or '0') or 0
if ARGV[1] == 'lapsed' and lease > now then return {'leased', string.format('%.0f', lease - now)} end
redis.call('HSET', KEYS[1], 'state', 'in-doubt', 'inDoubtAt', ARGV[3])
redis.call('HDEL', KEYS[1], 'leaseUntil')
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[5]))
redis.call('ZADD', KEYS[2], now, ARGV[4])
return {'marked'}
`;

/** KEYS[1] the record; ARGV owner. Deletes a claim this owner made and never sent (the key is free again): 1, else 0. */
const ABANDON_SCRIPT = `
local f = redis.call('HMGET', KEYS[1], 'state', 'owner')
if f[1] ~= 'inflight' or f[2] ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
`;

/**
 * KEYS[1] the record; ARGV[1] the state it must be in; ARGV[2] the number n of fields to delete,
 * ARGV[3..2+n] those fields, then field/value pairs to set. Changes nothing unless the record is
 * in state ARGV[1]. Returns the state it was in (false for no record).
 */
const TRANSITION_SCRIPT = `
local state = redis.call('HGET', KEYS[1], 'state')
if state ~= ARGV[1] then return state or false end
local n = tonumber(ARGV[2])
for i = 3, 2 + n do redis.call('HDEL', KEYS[1], ARGV[i]) end
for i = 3 + n, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
return state
`;

/**
 * KEYS[1] the record; ARGV the resolution (JSON). An operator's acknowledgement of a call that
 * was in doubt and later seen done: adds the resolution when the record is `done` with
 * `seenDoneAt` and has none yet. Returns 1 when added, else the state (false for no record).
 */
const ACK_SEEN_SCRIPT = `
local f = redis.call('HMGET', KEYS[1], 'state', 'seenDoneAt', 'resolution')
if f[1] == 'done' and f[2] and not f[3] then
  redis.call('HSET', KEYS[1], 'resolution', ARGV[1])
  return 1
end
return f[1] or false
`;

/** A call to claim: what its record shows of it. */
export interface ToolCallClaim {
  key: string;
  tool: string;
  /** The arguments as shown and stored: secrets redacted. */
  shownArgs: unknown;
  /** Whether `shownArgs` differ from the real arguments (secrets were redacted). */
  argsRedacted: boolean;
  runId: string;
  incidentId: string;
  agent: string;
  readOnly: boolean;
  approvalId?: string | undefined;
  /** `toolCallDigest` of the call (its key, tool and real arguments): a record of another call under this key refuses the claim. */
  digest: string;
  /** This attempt's token: the claim is its own again when the same command is re-sent, and only it records the outcome. */
  owner: string;
  /** The caller's task lock (its Redis key and token): a claim from a stale owner is refused. */
  lock?: { key: string; token: string } | undefined;
}

/**
 * What a claim found: the call is ours to send (`claimed`), or it is not: `stale` (the caller no
 * longer holds its task), `mismatch` (the key is another call's: `recordedTool`), `leased` (a
 * mutating call in flight under another gateway's live lease: wait `leaseMs` and look again),
 * `done` (with the recorded result; none when a `done` record lacks one), or the state the record
 * is in (`inflight` with its lease run out, `in-doubt`).
 */
export type ClaimOutcome =
  | { claimed: true }
  | { claimed: false; state: 'stale' }
  | { claimed: false; state: 'mismatch'; recordedTool: string }
  | { claimed: false; state: 'leased'; leaseMs: number }
  | { claimed: false; state: string; result?: ToolCallResult };

/** What recording an outcome did: `seen-done` for a call that had been declared in doubt. */
export type RecordOutcome = 'done' | 'seen-done' | 'late' | 'not-owner';

/**
 * What declaring a call in doubt did: `marked` (this call declared it), `already` (it was),
 * `done` (its outcome was recorded meanwhile: `result`), `leased` (its owner is alive), or the
 * state that prevents it.
 */
export type InDoubtOutcome =
  | { kind: 'marked' }
  | { kind: 'already' }
  | { kind: 'done'; result?: ToolCallResult }
  | { kind: 'leased'; leaseMs: number }
  | { kind: 'other'; state: string };

/** What an operator's change did: `changed` when the record was in the state it starts from. */
export interface OperatorChange {
  changed: boolean;
  /** The state the record was in, or null when there is none. */
  was: string | null;
}

/** Options of {@link ToolCallRecords}. */
export interface ToolCallRecordsOptions {
  redis: RedisClient;
  prefix: string;
  /** How long a claim holds a running call, renewed while it runs. Default `TOOL_CALL_LEASE_MS`. */
  leaseMs?: number | undefined;
  /** How long a record is kept after its last change (`retention.toolRecords`); default 7 days. */
  ttlSeconds?: number | undefined;
}

/**
 * The tool-call records (format and states: `ToolCallRecord` and `TOOL_CALL_TRANSITIONS` in
 * `libs/contract`): every change the gateway and `bosun ack` make to them, and nothing else does.
 * Each change is an atomic script that checks the state (and owner, lease, digest) it starts from;
 * the in-doubt index changes in the same script as the record.
 */
export class ToolCallRecords {
  private readonly redis: RedisClient;
  private readonly prefix: string;
  private readonly leaseMs: number;
  private readonly ttl: string;

  constructor(options: ToolCallRecordsOptions) {
    this.redis = options.redis;
    this.prefix = options.prefix;
    this.leaseMs = options.leaseMs ?? TOOL_CALL_LEASE_MS;
    this.ttl = String(options.ttlSeconds ?? TOOL_CALL_RECORD_TTL_SECONDS);
  }

  /** The Redis key of a call's record. */
  key(callKey: string): string {
    return toolCallRecordKey(this.prefix, callKey);
  }

  /** The record of a call, or null when there is none. Throws an `InvalidInputError` naming the bad fields of a corrupt one. */
  async read(callKey: string): Promise<ToolCallRecord | null> {
    const hash = await this.redis.hgetall(this.key(callKey));
    if (Object.keys(hash).length === 0) return null;
    return parseWith(ToolCallRecord, hash, `tool call record ${callKey}`);
  }

  /**
   * The recorded result of a call that is `done`, else undefined; also undefined when `digest`
   * is given and the record is of another call (another `toolCallDigest`).
   */
  async recorded(callKey: string, digest?: string): Promise<ToolCallResult | undefined> {
    const [state, result, recordedDigest] = await this.redis.hmget(this.key(callKey), 'state', 'result', 'digest');
    if (digest !== undefined && recordedDigest !== null && recordedDigest !== digest) return undefined;
    return state === 'done' && result ? parseResult(callKey, result) : undefined;
  }

  /**
   * Claims a call before it is sent (none → `inflight`, `retry` → `inflight`, and `inflight` →
   * `inflight` for a read-only tool), writing its fields, its owner, a lease of
   * `TOOL_CALL_LEASE_MS` and its expiry (`ttlSeconds`, default 7 days), in one atomic script; see {@link ClaimOutcome}.
   */
  async claim(call: ToolCallClaim, now = new Date()): Promise<ClaimOutcome> {
    const shown = JSON.stringify(call.shownArgs);
    const recordKey = this.key(call.key);
    const [state, extra] = (await runScript(
      this.redis,
      { name: 'bosunClaimCall', lua: CLAIM_SCRIPT },
      [recordKey, call.lock?.key ?? recordKey],
      [
        call.readOnly ? '1' : '0',
        this.ttl,
        call.tool,
        shown,
        call.runId,
        call.incidentId,
        call.agent,
        now.toISOString(),
        call.approvalId ?? '',
        call.argsRedacted ? 'true' : 'false',
        call.digest,
        call.owner,
        String(this.leaseMs),
        call.lock?.token ?? '',
      ],
    )) as [string, string?];
    if (state === 'claimed') return { claimed: true };
    if (state === 'stale') return { claimed: false, state };
    if (state === 'mismatch') return { claimed: false, state, recordedTool: extra ?? '' };
    if (state === 'leased') return { claimed: false, state, leaseMs: Number(extra) };
    if (state === 'done' && extra) return { claimed: false, state, result: parseResult(call.key, extra) };
    return { claimed: false, state };
  }

  /** Renews the lease of a call this owner runs; false when it is no longer in flight under it. */
  async renewLease(callKey: string, owner: string): Promise<boolean> {
    return (
      (await runScript(
        this.redis,
        { name: 'bosunRenewCallLease', lua: RENEW_SCRIPT },
        [this.key(callKey)],
        [owner, String(this.leaseMs)],
      )) === 1
    );
  }

  /**
   * Records the outcome of a call (`inflight` → `done`; `in-doubt` → `done` with `seenDoneAt`,
   * out of the in-doubt index) and renews its expiry, unless another attempt has claimed it
   * since (`owner`); see {@link RecordOutcome}.
   */
  async recordDone(result: ToolCallResult, owner?: string): Promise<RecordOutcome> {
    const [outcome] = (await runScript(
      this.redis,
      { name: 'bosunRecordCall', lua: RECORD_SCRIPT },
      [this.key(result.key), keys.inDoubt(this.prefix)],
      [JSON.stringify(result), owner ?? '', this.ttl, new Date().toISOString(), result.key],
    )) as [RecordOutcome];
    return outcome;
  }

  /**
   * Declares a mutating call in doubt (`inflight` → `in-doubt`, and into the index): by the
   * gateway that sent it (`owner`), or by another that found it in flight once its lease ran out
   * (`lapsed`). See {@link InDoubtOutcome}.
   */
  async markInDoubt(callKey: string, by: { owner: string } | { lapsed: true }): Promise<InDoubtOutcome> {
    const [kind, extra] = (await runScript(
      this.redis,
      { name: 'bosunMarkInDoubt', lua: IN_DOUBT_SCRIPT },
      [this.key(callKey), keys.inDoubt(this.prefix)],
      ['owner' in by ? 'owner' : 'lapsed', 'owner' in by ? by.owner : '', new Date().toISOString(), callKey, this.ttl],
    )) as [string, string?];
    if (kind === 'marked' || kind === 'already') return { kind };
    if (kind === 'done') return extra ? { kind, result: parseResult(callKey, extra) } : { kind };
    if (kind === 'leased') return { kind, leaseMs: Number(extra) };
    return { kind: 'other', state: kind };
  }

  /** Frees a key this owner claimed and never sent (its record is deleted); false when it is not so. */
  async abandonClaim(callKey: string, owner: string): Promise<boolean> {
    return (await runScript(this.redis, { name: 'bosunAbandonClaim', lua: ABANDON_SCRIPT }, [this.key(callKey)], [owner])) === 1;
  }

  /**
   * Removes or adds a call in the index of calls in doubt (`<prefix>:toolcalls:in-doubt`,
   * scored by when they became so) that the in-doubt gauge counts, after an operator's change.
   */
  private async indexInDoubt(callKey: string, inDoubt: boolean): Promise<void> {
    const index = keys.inDoubt(this.prefix);
    if (inDoubt) await this.redis.zadd(index, Date.now(), callKey);
    else await this.redis.zrem(index, callKey);
  }

  /**
   * An operator's `done` or `skip` (`in-doubt` → `done`): records {@link resolvedResult} and the
   * resolution, only if the call is still in doubt.
   */
  async resolve(
    callKey: string,
    resolution: ToolCallResolution & { action: 'done' | 'skip' },
    tool: string,
  ): Promise<OperatorChange & { result: ToolCallResult }> {
    const result = resolvedResult(callKey, tool, resolution.action);
    const change = await this.operatorChange(callKey, 'done', {
      set: ['state', 'done', 'result', JSON.stringify(result), 'resolution', JSON.stringify(resolution)],
    });
    if (change.changed) await this.indexInDoubt(callKey, false);
    return { ...change, result };
  }

  /**
   * An operator's acknowledgement of a call that was declared in doubt and whose outcome was
   * recorded later (`seenDoneAt`): adds the resolution, the recorded result stays.
   */
  async acknowledgeSeenDone(callKey: string, resolution: ToolCallResolution): Promise<OperatorChange> {
    const was = (await runScript(
      this.redis,
      { name: 'bosunAckSeenDone', lua: ACK_SEEN_SCRIPT },
      [this.key(callKey)],
      [JSON.stringify(resolution)],
    )) as number | string | null;
    if (was === 1) {
      await this.indexInDoubt(callKey, false);
      return { changed: true, was: 'done' };
    }
    return { changed: false, was: typeof was === 'string' ? was : null };
  }

  /** An operator's `retry` (`in-doubt` → `retry`), with the resolution, only if the call is still in doubt. */
  async markRetry(callKey: string, resolution: ToolCallResolution & { action: 'retry' }): Promise<OperatorChange> {
    const change = await this.operatorChange(callKey, 'retry', { set: ['state', 'retry', 'resolution', JSON.stringify(resolution)] });
    if (change.changed) await this.indexInDoubt(callKey, false);
    return change;
  }

  /** Puts back in doubt a call whose retry job could not be added (`retry` → `in-doubt`), dropping the resolution. */
  async undoRetry(callKey: string): Promise<OperatorChange> {
    const change = await this.operatorChange(callKey, 'in-doubt', { set: ['state', 'in-doubt'], del: ['resolution'] });
    if (change.changed) await this.indexInDoubt(callKey, true);
    return change;
  }

  private async operatorChange(callKey: string, to: ToolCallState, fields: { set: string[]; del?: string[] }): Promise<OperatorChange> {
    const from = TOOL_CALL_TRANSITIONS.find((t) => t.by === 'operator' && t.to === to)?.from;
    if (from === undefined || from === 'none')
      throw new BosunError('invalid_transition', `no operator change of a tool call record to "${to}"`);
    const del = fields.del ?? [];
    const was = (await runScript(
      this.redis,
      { name: 'bosunToolCallTransition', lua: TRANSITION_SCRIPT },
      [this.key(callKey)],
      [from, String(del.length), ...del, ...fields.set],
    )) as string | null;
    return { changed: was === from, was };
  }
}

function parseResult(callKey: string, text: string): ToolCallResult {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new BosunError('corrupt_record', `the recorded result of tool call ${callKey} is not valid JSON`, { cause: err });
  }
  return parseWith(ToolCallResult, value, `recorded result of tool call ${callKey}`);
}
