/**
 * The A2A task store in Redis, under the prefix and the caller's tenant (keys in
 * `libs/contract/src/a2a.ts`). Shared by every replica; a tenant reads only its own keys, so
 * another tenant's task id is simply not there.
 */
import { A2A_TTL_SECONDS, A2aTaskRecord, a2aKeys } from '@bosun/contract';
import type { RedisClient } from '@bosun/transport';

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

  /** Saves a new task once (a record already there wins) and indexes it; returns the stored record. */
  async create(record: A2aTaskRecord): Promise<A2aTaskRecord> {
    const { tenant, taskId } = record;
    const written = await this.redis.set(a2aKeys.task(this.prefix, tenant, taskId), JSON.stringify(record), 'EX', A2A_TTL_SECONDS, 'NX');
    const score = Date.parse(record.createdAt);
    await this.redis
      .multi()
      .set(a2aKeys.message(this.prefix, tenant, record.messageId), taskId, 'EX', A2A_TTL_SECONDS)
      .zadd(a2aKeys.tasks(this.prefix, tenant), score, taskId)
      .zadd(a2aKeys.context(this.prefix, tenant, record.contextId), score, taskId)
      .expire(a2aKeys.context(this.prefix, tenant, record.contextId), A2A_TTL_SECONDS)
      .exec();
    return written === null ? ((await this.get(tenant, taskId)) ?? record) : record;
  }

  /** Appends a message to a task's history. */
  async append(record: A2aTaskRecord, message: Record<string, unknown>): Promise<A2aTaskRecord> {
    const next = { ...record, history: [...record.history, message] };
    await this.redis.set(a2aKeys.task(this.prefix, record.tenant, record.taskId), JSON.stringify(next), 'EX', A2A_TTL_SECONDS);
    return next;
  }

  /** A tenant's task ids, newest first; only those of `contextId` when given. */
  async list(tenant: string, options: { contextId?: string; offset: number; count: number }): Promise<{ ids: string[]; total: number }> {
    const key = options.contextId ? a2aKeys.context(this.prefix, tenant, options.contextId) : a2aKeys.tasks(this.prefix, tenant);
    const [ids, total] = await Promise.all([
      this.redis.zrevrange(key, options.offset, options.offset + options.count - 1),
      this.redis.zcard(key),
    ]);
    return { ids, total };
  }
}
