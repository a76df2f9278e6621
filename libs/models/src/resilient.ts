/**
 * Model calls that survive rate limits and outages: retries with exponential backoff and jitter
 * (honouring the provider's `Retry-After`, within a cap), a cluster-wide limiter taken before
 * each call, and an optional fallback model used when the primary keeps failing.
 */
import { BosunError, sleep } from '@bosun/contract';
import { ModelError } from './types.js';
import type { GenerateOptions, Model, ModelRequest, ModelResponse } from './types.js';

/**
 * A limiter shared by every process (see `RedisRateLimiter` in libs/transport): `acquire`
 * answers 0 when the call may go now (and holds a slot until `release`), else how long to wait.
 */
export interface CallLimiter {
  acquire(id: string, tokens: number): Promise<number>;
  /** Frees the call's slot; `usedTokens` (what the provider reported) replaces the estimate in the window. */
  release(id: string, tokens: number, usedTokens?: number): Promise<void>;
}

/** Retry settings. */
export interface RetryPolicy {
  /** Tries of one call, the first included (default 4). */
  attempts?: number;
  /** The first backoff (default 500 ms); it doubles at each retry. */
  baseDelayMs?: number;
  /** The longest wait between tries, a `Retry-After` included (default 30000 ms). */
  maxDelayMs?: number;
}

/** Options of {@link ResilientModel}. */
export interface ResilientModelOptions {
  primary: Model;
  fallback?: Model | undefined;
  retry?: RetryPolicy | undefined;
  /** The primary's cluster-wide limiter (the fallback's is its own, when it has one). */
  limiter?: CallLimiter | undefined;
  fallbackLimiter?: CallLimiter | undefined;
  /** Waits longer than this for the limiter are not waited here: {@link ThrottledError} hands the task back (default 2000 ms). */
  maxInlineWaitMs?: number;
  /** Tests: the clock's sleep and the jitter's random source. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<unknown>;
  random?: () => number;
}

/**
 * The limiter asks for a wait longer than a worker should hold its slot: the caller hands the
 * task back to its queue until `until` (epoch ms), holding no worker meanwhile.
 */
export class ThrottledError extends BosunError {
  readonly until: number;
  constructor(model: string, waitMs: number) {
    super('throttled', `${model}: the cluster-wide rate limit asks to wait ${waitMs} ms`, { data: { waitMs } });
    this.name = 'ThrottledError';
    this.until = Date.now() + waitMs;
  }
}

let callCounter = 0;

/**
 * The JSON length of each message and tool declaration already measured. A run's history and its
 * catalog are the same objects from turn to turn (they are never changed in place), so each is
 * serialised once, not at every turn of every estimate.
 */
const jsonLengths = new WeakMap<object, number>();

/** The length of `JSON.stringify(items)`, from the lengths of its items. */
function listJsonLength(items: readonly object[] | undefined): number {
  if (items === undefined) return 0;
  let chars = 2 + Math.max(0, items.length - 1);
  for (const item of items) {
    let n = jsonLengths.get(item);
    if (n === undefined) {
      n = JSON.stringify(item).length;
      jsonLengths.set(item, n);
    }
    chars += n;
  }
  return chars;
}

/** A rough token estimate of a request (4 characters a token), for the tokens-per-window limit. */
export function estimateTokens(request: ModelRequest): number {
  const chars = (request.system ?? '').length + listJsonLength(request.messages) + listJsonLength(request.tools);
  return Math.ceil(chars / 4);
}

/**
 * A {@link Model} over a primary (and optional fallback) that retries retryable failures with
 * backoff and jitter, waits its turn at the limiter, and switches to the fallback when the
 * primary has failed every try (or failed for good). Its response says so in `fallback`. When
 * every model has failed, the error is a non-retryable {@link ModelError} carrying the
 * provider's message: the task ends INCOMPLETE `failure` instead of retrying for ever.
 */
export class ResilientModel implements Model {
  readonly name: string;
  /** The primary's context window (the loops fit their requests into it). */
  readonly contextTokens: number | undefined;
  /** The fallback model's name, when there is one. */
  readonly fallbackName: string | undefined;
  readonly #o: ResilientModelOptions;
  readonly #sleep: (ms: number, signal?: AbortSignal) => Promise<unknown>;
  readonly #random: () => number;

  constructor(options: ResilientModelOptions) {
    this.#o = options;
    this.name = options.primary.name;
    this.contextTokens = options.primary.contextTokens;
    this.fallbackName = options.fallback?.name;
    this.#sleep = options.sleep ?? sleep;
    this.#random = options.random ?? Math.random;
  }

  async generate(request: ModelRequest, options?: GenerateOptions): Promise<ModelResponse> {
    const { primary, fallback } = this.#o;
    let primaryError: ModelError;
    try {
      return await this.#withRetries(primary, this.#o.limiter, request, options);
    } catch (err) {
      // A request too long for the window goes back to the loop, which trims it and asks again.
      if (!(err instanceof ModelError) || fallback === undefined || err.reason === 'context_length') throw err;
      primaryError = err;
    }
    const response = await this.#withRetries(fallback, this.#o.fallbackLimiter, request, options);
    return { ...response, fallback: { from: primary.name, to: fallback.name, reason: primaryError.message } };
  }

  /** One model's tries; its last failure, made final (not retryable), when none succeeded. */
  async #withRetries(
    model: Model,
    limiter: CallLimiter | undefined,
    request: ModelRequest,
    options?: GenerateOptions,
  ): Promise<ModelResponse> {
    const attempts = Math.max(1, this.#o.retry?.attempts ?? 4);
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#once(model, limiter, request, options);
      } catch (err) {
        if (!(err instanceof ModelError) || !err.retryable || options?.signal?.aborted) throw err;
        if (attempt >= attempts) {
          throw new ModelError(`${model.name} failed ${attempts} times, the last: ${err.message}`, {
            retryable: false,
            ...(err.status === undefined ? {} : { status: err.status }),
            cause: err,
          });
        }
        // A caller that gives up (a drain, a cancel) ends the backoff at once, with this error.
        await this.#sleep(this.backoffMs(attempt, err.retryAfterMs), options?.signal);
        if (options?.signal?.aborted) throw err;
      }
    }
  }

  /** The wait before retry `attempt` + 1: the provider's Retry-After, or exponential with full jitter; both capped. */
  backoffMs(attempt: number, retryAfterMs?: number): number {
    const cap = this.#o.retry?.maxDelayMs ?? 30_000;
    if (retryAfterMs !== undefined) return Math.min(cap, retryAfterMs);
    const exp = Math.min(cap, (this.#o.retry?.baseDelayMs ?? 500) * 2 ** (attempt - 1));
    // Half fixed, half random: spread the retries of many tasks, never retry at once.
    return Math.round(exp / 2 + (exp / 2) * this.#random());
  }

  async #once(model: Model, limiter: CallLimiter | undefined, request: ModelRequest, options?: GenerateOptions): Promise<ModelResponse> {
    if (!limiter) return model.generate(request, options);
    const id = `${process.pid}-${++callCounter}-${Date.now()}`;
    const tokens = estimateTokens(request);
    await this.#turn(model, limiter, { id, tokens, signal: options?.signal });
    let used: number | undefined;
    try {
      const response = await model.generate(request, options);
      const u = response.usage;
      used = u?.totalTokens ?? (u?.inputTokens === undefined ? undefined : u.inputTokens + (u.outputTokens ?? 0));
      return response;
    } finally {
      await limiter.release(id, tokens, used);
    }
  }

  /** Waits for the limiter while the wait is short; a long one is handed back as {@link ThrottledError}. */
  async #turn(model: Model, limiter: CallLimiter, ask: { id: string; tokens: number; signal: AbortSignal | undefined }): Promise<void> {
    const { id, tokens, signal } = ask;
    const inline = this.#o.maxInlineWaitMs ?? 2_000;
    let waited = 0;
    for (;;) {
      const wait = await limiter.acquire(id, tokens);
      if (wait <= 0) return;
      if (waited + wait > inline) throw new ThrottledError(model.name, wait);
      // A little jitter, so waiting processes do not all come back in the same millisecond.
      const pause = wait + Math.round(this.#random() * 20);
      waited += pause;
      await this.#sleep(pause, signal);
      if (signal?.aborted)
        throw new ModelError(`${model.name}: the call was aborted while it waited for the rate limiter`, { retryable: false });
    }
  }
}
