import type { RedisClient } from './connections.js';
import { keys } from './keys.js';

/** The limits of one model (or provider) across the whole cluster. Absent fields are no limit. */
export interface RateLimits {
  /** Requests per window. */
  requests?: number | undefined;
  /** Estimated tokens per window. */
  tokens?: number | undefined;
  /** The window, in ms (default 60000: requests and tokens per minute). */
  windowMs?: number | undefined;
  /** Calls under way at once. */
  concurrency?: number | undefined;
}

/**
 * One script, so that checking and taking a turn is atomic across every process. Sliding
 * windows: KEYS[1] holds the window's requests (score: when), KEYS[2] its token reservations
 * (member `<id>:<tokens>`), KEYS[3] the calls under way (score: when their lease ends, so a
 * process that died frees its slot). Time is Redis's. Returns 0 (the turn is taken) or how many
 * ms to wait before asking again.
 */
const ACQUIRE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local win = tonumber(ARGV[1]); local maxReq = tonumber(ARGV[2]); local maxTok = tonumber(ARGV[3])
local maxConc = tonumber(ARGV[4]); local id = ARGV[5]; local tokens = tonumber(ARGV[6]); local lease = tonumber(ARGV[7])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - win)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - win)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local wait = 0
if maxConc > 0 and redis.call('ZCARD', KEYS[3]) >= maxConc then wait = 100 end
if maxReq > 0 and redis.call('ZCARD', KEYS[1]) >= maxReq then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  wait = math.max(wait, tonumber(oldest[2]) + win - now + 1)
end
if maxTok > 0 then
  local entries = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
  local used = 0
  for i = 1, #entries, 2 do used = used + tonumber(string.match(entries[i], ':(%d+)$')) end
  if used > 0 and used + tokens > maxTok then
    local need = used + tokens - maxTok
    local freed = 0
    for i = 1, #entries, 2 do
      freed = freed + tonumber(string.match(entries[i], ':(%d+)$'))
      if freed >= need then wait = math.max(wait, tonumber(entries[i + 1]) + win - now + 1); break end
    end
  end
end
if wait > 0 then return wait end
redis.call('ZADD', KEYS[1], now, id)
redis.call('PEXPIRE', KEYS[1], win + 1000)
if maxTok > 0 then redis.call('ZADD', KEYS[2], now, id .. ':' .. tokens); redis.call('PEXPIRE', KEYS[2], win + 1000) end
if maxConc > 0 then redis.call('ZADD', KEYS[3], now + lease, id); redis.call('PEXPIRE', KEYS[3], lease + 1000) end
return 0
`;

/** Replaces a call's estimated tokens (ARGV[1]) by what it used (ARGV[2]), at the same time in the window. */
const SETTLE = `
local at = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not at then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[1], at, ARGV[2])
return 1
`;

/**
 * A cluster-wide limiter of one model's calls, kept in Redis and shared by every process (the
 * `CallLimiter` of `ResilientModel` in libs/models): requests and estimated tokens per window,
 * and calls under way at once. A slot of a process that died is freed when its lease ends.
 */
export class RedisRateLimiter {
  readonly #redis: RedisClient;
  readonly #keys: [string, string, string];
  readonly #limits: RateLimits;
  readonly #leaseMs: number;

  /** `name`: what is limited (the model's name); `leaseMs`: how long a call may hold a concurrency slot (default 5 min). */
  constructor(options: { redis: RedisClient; prefix: string; name: string; limits: RateLimits; leaseMs?: number }) {
    this.#redis = options.redis;
    const base = keys.rateLimit(options.prefix, options.name);
    this.#keys = [`${base}:requests`, `${base}:tokens`, `${base}:running`];
    this.#limits = options.limits;
    this.#leaseMs = options.leaseMs ?? 300_000;
  }

  /** 0 when the call `id` may go now (its turn is taken), else how many ms to wait. */
  async acquire(id: string, tokens: number): Promise<number> {
    const l = this.#limits;
    const wait = await this.#redis.eval(
      ACQUIRE,
      3,
      ...this.#keys,
      l.windowMs ?? 60_000,
      l.requests ?? 0,
      l.tokens ?? 0,
      l.concurrency ?? 0,
      id,
      Math.max(0, Math.round(tokens)),
      this.#leaseMs,
    );
    return Number(wait);
  }

  /**
   * Frees the concurrency slot of call `id` (its request stays in the window) and, when the
   * provider reported them, puts the tokens it used in the window in place of the estimate.
   */
  async release(id: string, tokens: number, usedTokens?: number): Promise<void> {
    if (this.#limits.concurrency) await this.#redis.zrem(this.#keys[2], id);
    if (this.#limits.tokens && usedTokens !== undefined) {
      await this.#redis.eval(SETTLE, 1, this.#keys[1], `${id}:${Math.round(tokens)}`, `${id}:${Math.round(usedTokens)}`);
    }
  }
}
