import {
  BosunError,
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
import type { RedisClient } from './connections.js';
import { keys } from './keys.js';

/**
 * KEYS[1] the record; ARGV: readOnly ('1'|'0'), ttl, tool, args (secrets redacted), runId,
 * incidentId, agent, now, approvalId, argsRedacted ('true'|'false': the stored args are not the
 * real ones). Marks the record `inflight` and returns ['claimed'] when there is no record, it is
 * in state `retry`, or it is `inflight` and the tool read-only; otherwise returns ['done',
 * <recorded result>] or [<the state that prevents it>]. One round trip for a new call.
 */
const CLAIM_SCRIPT = `
local state = redis.call('HGET', KEYS[1], 'state')
if (not state) or state == 'retry' or (ARGV[1] == '1' and state == 'inflight') then
  redis.call('HSET', KEYS[1], 'state', 'inflight', 'tool', ARGV[3], 'args', ARGV[4], 'runId', ARGV[5],
    'incidentId', ARGV[6], 'agent', ARGV[7], 'startedAt', ARGV[8], 'readOnly', ARGV[1] == '1' and 'true' or 'false', 'approvalId', ARGV[9],
    'argsRedacted', ARGV[10])
  redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2]))
  return {'claimed'}
end
if state == 'done' then
  return {'done', redis.call('HGET', KEYS[1], 'result') or ''}
end
return {state}
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

type ScriptCommand = (key: string, ...argv: string[]) => Promise<unknown>;

/** Runs a script registered once per connection (then sent as EVALSHA, not as text). */
function runScript(redis: RedisClient, name: string, lua: string, argv: [string, ...string[]]): Promise<unknown> {
  const commands = redis as unknown as Record<string, ScriptCommand | undefined>;
  if (!commands[name]) redis.defineCommand(name, { numberOfKeys: 1, lua });
  return commands[name]!.apply(redis, argv);
}

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
}

/**
 * What a claim found: the call is ours to send (`claimed`), or it is not, because of the state the
 * record is in (with the recorded result when `done`; none when a `done` record lacks one).
 */
export type ClaimOutcome = { claimed: true } | { claimed: false; state: string; result?: ToolCallResult };

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
  /** How long a record is kept after its last change (`retention.toolRecords`); default 7 days. */
  ttlSeconds?: number;
}

/**
 * The tool-call records (format and states: `ToolCallRecord` and `TOOL_CALL_TRANSITIONS` in
 * `libs/contract`): every change the gateway and `bosun ack` make to them, and nothing else does.
 * The claim and the operator's changes are atomic scripts that check the state they start from.
 */
export class ToolCallRecords {
  private readonly redis: RedisClient;
  private readonly prefix: string;
  private readonly ttl: string;

  constructor(options: ToolCallRecordsOptions) {
    this.redis = options.redis;
    this.prefix = options.prefix;
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

  /** The recorded result of a call that is `done`, else undefined. */
  async recorded(callKey: string): Promise<ToolCallResult | undefined> {
    const [state, result] = await this.redis.hmget(this.key(callKey), 'state', 'result');
    return state === 'done' && result ? parseResult(callKey, result) : undefined;
  }

  /**
   * Claims a call before it is sent (none → `inflight`, `retry` → `inflight`, and `inflight` →
   * `inflight` for a read-only tool), writing its fields and its expiry (`ttlSeconds`), in one atomic script.
   */
  async claim(call: ToolCallClaim, now = new Date()): Promise<ClaimOutcome> {
    const shown = JSON.stringify(call.shownArgs);
    const [state, recorded] = (await runScript(this.redis, 'bosunClaimCall', CLAIM_SCRIPT, [
      this.key(call.key),
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
    ])) as [string, string?];
    if (state === 'claimed') return { claimed: true };
    if (state === 'done' && recorded) return { claimed: false, state, result: parseResult(call.key, recorded) };
    return { claimed: false, state };
  }

  /**
   * Records the outcome of a call the gateway claimed (`inflight` → `done`) and renews the
   * expiry. Written as is: the gateway that claimed and sent the call is the one that knows.
   */
  async recordDone(result: ToolCallResult): Promise<void> {
    const recordKey = this.key(result.key);
    await this.redis
      .multi()
      .hset(recordKey, { state: 'done', result: JSON.stringify(result) })
      .expire(recordKey, this.ttl)
      .exec();
  }

  /** Marks a mutating call the gateway sent, whose outcome is unknown, in doubt (`inflight` → `in-doubt`). */
  async markInDoubt(callKey: string): Promise<void> {
    await this.redis.hset(this.key(callKey), { state: 'in-doubt' });
    await this.indexInDoubt(callKey, true);
  }

  /**
   * Keeps the index of calls in doubt (`<prefix>:toolcalls:in-doubt`, scored by when they became
   * so) that the in-doubt gauge counts. Written after the record: the record is the truth, the
   * index only counts it.
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
    const was = (await runScript(this.redis, 'bosunToolCallTransition', TRANSITION_SCRIPT, [
      this.key(callKey),
      from,
      String(del.length),
      ...del,
      ...fields.set,
    ])) as string | null;
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
