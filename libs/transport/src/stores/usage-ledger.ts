import { UsageTotals, parseStoredJson, sumUsage } from '@bosun/contract';
import type { RedisClient } from '../base/connections.js';
import { keys } from '../keys.js';

/** How long a run's ledger is kept after its last write, by default: as long as the checkpoints (7 days). */
const LEDGER_TTL_SECONDS = 7 * 24 * 3600;

/**
 * A run's spending, shared by every process that works on it: a Redis hash
 * `<prefix>:usage:<runId>` with one field per part (the task id) holding that part's total so far
 * (`UsageTotals` as JSON). A part writes its whole total, never an increment, so a write repeated
 * after a crash counts once; the run's total is the sum of the fields.
 */
export class RunUsageLedger {
  readonly #redis: RedisClient;
  readonly #prefix: string;
  readonly #ttl: number;

  /** `ttlSeconds`: how long the ledger is kept after its last write (`retention.checkpoints`; default 7 days). */
  constructor(options: { redis: RedisClient; prefix: string; ttlSeconds?: number }) {
    this.#redis = options.redis;
    this.#prefix = options.prefix;
    this.#ttl = options.ttlSeconds ?? LEDGER_TTL_SECONDS;
  }

  /** Records what `part` of run `runId` has spent so far (its total, replacing what it wrote before). */
  async record(runId: string, part: string, usage: UsageTotals): Promise<void> {
    const key = keys.usage(this.#prefix, runId);
    await this.#redis.multi().hset(key, part, JSON.stringify(usage)).expire(key, this.#ttl).exec();
  }

  /** What the run has spent, every part's total summed. */
  async total(runId: string): Promise<UsageTotals> {
    const all = await this.#redis.hgetall(keys.usage(this.#prefix, runId));
    return sumUsage(...Object.entries(all).map(([part, raw]) => parseStoredJson(UsageTotals, raw, `usage of ${part} in run ${runId}`)));
  }
}
