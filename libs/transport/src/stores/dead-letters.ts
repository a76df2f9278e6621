import { Queue } from 'bullmq';
import type { RedisClient } from '../base/connections.js';
import { DEAD_LETTER_QUEUE, STALL_MARKER, boundJson, type DeadLetter, type DeadLetterKind } from '@bosun/contract';
import { metrics } from '../base/metrics.js';
import { keys } from '../keys.js';

/** What a caller gives to record a dead letter; `v`, `at` and `marker` are filled in. */
export type DeadLetterInput = Omit<DeadLetter, 'v' | 'at' | 'marker'> & { marker?: string };

/**
 * What a dead letter stores at most: `input` 1 MiB as UTF-8 JSON and 64 levels of objects and
 * arrays; `reason` and `lastWords` 64 Ki characters each. A valid incident always fits.
 */
export const DEAD_LETTER_LIMITS = { inputBytes: 1024 * 1024, inputDepth: 64, textChars: 64 * 1024 } as const;

/**
 * The entry {@link DeadLetters.add} stores for `input`: `v`, `at` and `marker` filled in, and a
 * bounded copy of anything too large or too deep to store safely (see {@link DEAD_LETTER_LIMITS}),
 * with `truncated` saying what was cut. Never throws, whatever `input.input` holds — the entry
 * is never lost to its own data.
 */
export function deadLetterEntry(input: DeadLetterInput, at: Date = new Date()): DeadLetter {
  const { input: data, reason, lastWords, ...rest } = input;
  const cut: string[] = [];
  const text = (value: string, path: string): string => {
    if (value.length <= DEAD_LETTER_LIMITS.textChars) return value;
    const bounded = boundJson(value, {
      maxDepth: 1,
      maxBytes: Number.POSITIVE_INFINITY,
      maxStringChars: DEAD_LETTER_LIMITS.textChars,
      path,
    });
    cut.push(...bounded.cut);
    return bounded.value as string;
  };
  const entry: DeadLetter = { v: 1, marker: STALL_MARKER, at: at.toISOString(), ...rest, reason: text(reason, 'reason') };
  if (lastWords !== undefined) entry.lastWords = text(lastWords, 'lastWords');
  if (data !== undefined) {
    const bounded = boundJson(data, { maxDepth: DEAD_LETTER_LIMITS.inputDepth, maxBytes: DEAD_LETTER_LIMITS.inputBytes, path: 'input' });
    entry.input = bounded.value;
    cut.push(...bounded.cut);
  }
  if (cut.length > 0) entry.truncated = cut;
  return entry;
}

/**
 * Writes INCOMPLETE results and rejected input to the `dead-letter` queue, the operators'
 * inbox, and counts degraded results per agent and kind.
 */
export class DeadLetters {
  private readonly queue: Queue;
  private readonly redis: RedisClient;
  private readonly prefix: string;

  constructor(options: { redis: RedisClient; prefix: string }) {
    this.redis = options.redis;
    this.prefix = options.prefix;
    this.queue = new Queue(DEAD_LETTER_QUEUE, { connection: options.redis, prefix: options.prefix });
  }

  /**
   * Adds an entry. `dedupeId`, when given, is the job id: writing the same entry twice (a retried
   * step after a crash) keeps one.
   */
  async add(input: DeadLetterInput, dedupeId?: string): Promise<DeadLetter> {
    const entry = deadLetterEntry(input);
    const seenKey = dedupeId ? keys.deadLetterSeen(this.prefix, dedupeId) : undefined;
    // A retried step (after a crash) writes the same entry again: once written, never again,
    // even after an operator dropped it.
    if (seenKey && (await this.redis.exists(seenKey)) === 1) return entry;
    // The job id dedupes a write that crashed before the marker below was set.
    await this.queue.add(entry.kind, entry, {
      ...(dedupeId ? { jobId: dedupeId } : {}),
      removeOnComplete: false,
      removeOnFail: false,
    });
    if (seenKey && (await this.redis.set(seenKey, '1', 'EX', 30 * 24 * 3600, 'NX')) === null) return entry;
    metrics.deadLetters.inc({ kind: entry.kind });
    await this.redis.hincrby(keys.degraded(this.prefix), `${entry.agent ?? '-'}:${entry.kind}`, 1);
    return entry;
  }

  /**
   * Adds `resolution` to the in-doubt dead letter of call `key` (`in-doubt-<key>`) unless it has
   * one: the gateway's note that the call's outcome was recorded after all ("in doubt, later
   * seen done"). False when there is no such entry, or it already has a resolution.
   */
  async resolveInDoubt(key: string, resolution: { action: string; by: string; at: string }): Promise<boolean> {
    const job = await this.queue.getJob(`in-doubt-${key}`);
    const data = job?.data as Partial<DeadLetter> | undefined;
    if (!job || !data || data.resolution) return false;
    await job.updateData({ ...data, resolution });
    return true;
  }

  /** Degraded-result counters: `<agent>:<kind>` → count. */
  async counters(): Promise<Record<string, number>> {
    const raw = await this.redis.hgetall(keys.degraded(this.prefix));
    return Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, Number(v)]));
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}

export type { DeadLetterKind };
