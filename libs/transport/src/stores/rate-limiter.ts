import type { RedisClient } from '../base/connections.js';
import { keys } from '../keys.js';
import { runScript } from './scripts.js';

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
 * windows: KEYS[1] holds the window's requests — a call under way scored at the end of its lease
 * (in the future), a finished one at when it finished: a request counts from its start until a
 * window after its answer, so whenever the provider received it, no window of the provider's
 * holds more than the limit. KEYS[2] holds the token reservations
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
  local oldest = tonumber(redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2])
  -- Every request counted is still under way: ask again soon.
  if oldest > now then wait = math.max(wait, 100) else wait = math.max(wait, oldest + win - now + 1) end
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
redis.call('ZADD', KEYS[1], now + lease, id)
redis.call('PEXPIRE', KEYS[1], lease + win + 1000)
if maxTok > 0 then redis.call('ZADD', KEYS[2], now, id .. ':' .. tokens); redis.call('PEXPIRE', KEYS[2], win + 1000) end
if maxConc > 0 then redis.call('ZADD', KEYS[3], now + lease, id); redis.call('PEXPIRE', KEYS[3], lease + 1000) end
return 0
`;

/**
 * The end of call ARGV[1]: its request is scored at now (it counts a window more), its
 * concurrency slot freed, and its estimated tokens (ARGV[2]) replaced by what it used (ARGV[3],
 * when known) at the same time in the window.
 */
const RELEASE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], 'XX', now, ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if ARGV[3] ~= '' then
  local at = redis.call('ZSCORE', KEYS[2], ARGV[2])
  if at then
    redis.call('ZREM', KEYS[2], ARGV[2])
    redis.call('ZADD', KEYS[2], at, ARGV[3])
  end
end
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

  /** `name`: what is limited (the model's name); `leaseMs`: how long a call under way may hold its slots before it counts as dead (default 2 min). */
  constructor(options: { redis: RedisClient; prefix: string; name: string; limits: RateLimits; leaseMs?: number }) {
    this.#redis = options.redis;
    const base = keys.rateLimit(options.prefix, options.name);
    this.#keys = [`${base}:requests`, `${base}:tokens`, `${base}:running`];
    this.#limits = options.limits;
    this.#leaseMs = options.leaseMs ?? 120_000;
  }

  /** 0 when the call `id` may go now (its turn is taken), else how many ms to wait. */
  async acquire(id: string, tokens: number): Promise<number> {
    const l = this.#limits;
    const wait = await runScript(this.#redis, { name: 'bosunRateAcquire', lua: ACQUIRE }, this.#keys, [
      String(l.windowMs ?? 60_000),
      String(l.requests ?? 0),
      String(l.tokens ?? 0),
      String(l.concurrency ?? 0),
      id,
      String(Math.max(0, Math.round(tokens))),
      String(this.#leaseMs),
    ]);
    return Number(wait);
  }

  /**
   * Ends call `id`: its request counts a window more from now, its concurrency slot is freed and,
   * when the provider reported them, the tokens it used replace the estimate in the window.
   */
  async release(id: string, tokens: number, usedTokens?: number): Promise<void> {
    const used = usedTokens === undefined ? '' : `${id}:${Math.round(usedTokens)}`;
    await runScript(this.#redis, { name: 'bosunRateRelease', lua: RELEASE }, this.#keys, [
      id,
      `${id}:${Math.max(0, Math.round(tokens))}`,
      used,
    ]);
  }
}

/**
 * The limiters of `buildModel` (libs/agent, its `limiters`): a {@link RedisRateLimiter} per model
 * name, on `redis` under `prefix`. Built by a service and handed in, so the agent loops open nothing.
 */
export function redisRateLimiters(redis: RedisClient, prefix: string): (name: string, limits: RateLimits) => RedisRateLimiter {
  return (name, limits) => new RedisRateLimiter({ redis, prefix, name, limits });
}
