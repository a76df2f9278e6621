/**
 * The A2A task store in Redis, under the prefix and the caller's tenant (keys in
 * `libs/contract/src/a2a.ts`). Shared by every replica; a tenant reads only its own keys, so
 * another tenant's task id is simply not there.
 */
import { A2A_TTL_SECONDS, A2aTaskRecord, a2aKeys } from '@bosun/contract';
import type { RedisClient } from '@bosun/transport';

/**
 * Claims a message id for a task, atomically with the task record and its indexes: the first
 * sender writes all four keys, every other one gets the winner's task id and writes nothing.
 * KEYS: msg, task, tasks, context. ARGV: task id, record JSON, score (ms), TTL (s).
 */
const CLAIM = `
local won = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[4])
if not won then return {0, redis.call('GET', KEYS[1])} end
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[4])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[1])
redis.call('EXPIRE', KEYS[4], ARGV[4])
return {1, ARGV[1]}
`;

/** What {@link A2aTaskStore.claim} decided: this record won the message id, or another task holds it. */
export type Claim = { won: true; record: A2aTaskRecord } | { won: false; taskId: string };

export class A2aTaskStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {}

  /** A tenant's task, or undefined (none, another tenant's, or unreadable). */
  async get(tenant: string, taskId: string): Promise<A2aTaskRecord | undefined> {
    const raw = await this.redis.get(a2aKeys.task(this.prefix, tenant, taskId));
    if (raw === null) return undefined;
    const parsed = A2aTaskRecord.safeParse(JSON.parse(raw));
    return parsed.success && parsed.data.tenant === tenant ? parsed.data : undefined;
  }

  /** The task a message id started, if any. */
  async byMessage(tenant: string, messageId: string): Promise<A2aTaskRecord | undefined> {
    const taskId = await this.redis.get(a2aKeys.message(this.prefix, tenant, messageId));
    return taskId === null ? undefined : this.get(tenant, taskId);
  }

  /** Claims the record's message id for it (see {@link CLAIM}); a message id already claimed keeps its task. */
  async claim(record: A2aTaskRecord): Promise<Claim> {
    const { tenant, taskId } = record;
    const [won, holder] = (await this.redis.eval(
      CLAIM,
      4,
      a2aKeys.message(this.prefix, tenant, record.messageId),
      a2aKeys.task(this.prefix, tenant, taskId),
      a2aKeys.tasks(this.prefix, tenant),
      a2aKeys.context(this.prefix, tenant, record.contextId),
      taskId,
      JSON.stringify(record),
      Date.parse(record.createdAt),
      A2A_TTL_SECONDS,
    )) as [number, string];
    return won === 1 ? { won: true, record } : { won: false, taskId: holder };
  }

  /** Gives up a claim whose run could not be published, so that the client's retry can claim it again. */
  async release(record: A2aTaskRecord): Promise<void> {
    const { tenant, taskId } = record;
    await this.redis
      .multi()
      .del(a2aKeys.message(this.prefix, tenant, record.messageId), a2aKeys.task(this.prefix, tenant, taskId))
      .zrem(a2aKeys.tasks(this.prefix, tenant), taskId)
      .zrem(a2aKeys.context(this.prefix, tenant, record.contextId), taskId)
      .exec();
  }

  /** Rewrites a task record (its run id, after the run was found under another id; its history). */
  async put(record: A2aTaskRecord): Promise<void> {
    await this.redis.set(a2aKeys.task(this.prefix, record.tenant, record.taskId), JSON.stringify(record), 'EX', A2A_TTL_SECONDS);
  }

  /** Appends a message to a task's history. */
  async append(record: A2aTaskRecord, message: Record<string, unknown>): Promise<A2aTaskRecord> {
    const next = { ...record, history: [...record.history, message] };
    await this.put(next);
    return next;
  }

  /** A tenant's task ids, newest first; only those of `contextId` when given. `count` -1: all from `offset`. */
  async list(tenant: string, options: { contextId?: string; offset: number; count: number }): Promise<{ ids: string[]; total: number }> {
    const key = options.contextId ? a2aKeys.context(this.prefix, tenant, options.contextId) : a2aKeys.tasks(this.prefix, tenant);
    const stop = options.count < 0 ? -1 : options.offset + options.count - 1;
    const [ids, total] = await Promise.all([this.redis.zrevrange(key, options.offset, stop), this.redis.zcard(key)]);
    return { ids, total };
  }
}
