import { describe, expect, it } from 'vitest';

import { ResilientModel, ThrottledError, type CallLimiter } from './resilient.js';
import { ModelError } from './types.js';
import type { Model, ModelRequest, ModelResponse } from './types.js';

// Retries, backoff, Retry-After, the limiter's turn and the fallback, with the clock stubbed.

const REQUEST: ModelRequest = { agent: 'k', mode: 'task', messages: [{ role: 'user', text: 'hi' }], tools: [] };
const OK: ModelResponse = { text: 'ok', calls: [] };

/** A model answering from a list: a ModelError is thrown, a response returned; the last repeats. */
function scripted(name: string, script: (ModelResponse | ModelError)[]): Model & { calls: number } {
  const m = {
    name,
    calls: 0,
    async generate(): Promise<ModelResponse> {
      const next = script[Math.min(m.calls, script.length - 1)]!;
      m.calls++;
      if (next instanceof ModelError) throw next;
      return next;
    },
  };
  return m;
}

const e429 = (retryAfterMs?: number) =>
  new ModelError('HTTP 429 rate_limit_exceeded', { retryable: true, status: 429, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) });
const e503 = new ModelError('HTTP 503 overloaded', { retryable: true, status: 503 });
const e401 = new ModelError('HTTP 401 invalid_api_key', { retryable: false, status: 401 });

function resilient(primary: Model, extra: Partial<ConstructorParameters<typeof ResilientModel>[0]> = {}) {
  const sleeps: number[] = [];
  const model = new ResilientModel({
    primary,
    retry: { attempts: 4, baseDelayMs: 100, maxDelayMs: 1_000 },
    sleep: async (ms) => void sleeps.push(ms),
    random: () => 1,
    ...extra,
  });
  return { model, sleeps };
}

describe('ResilientModel', () => {
  it('retries 429 and 5xx with exponential backoff, honouring Retry-After within the cap', async () => {
    const primary = scripted('p', [e503, e429(300), e429(60_000), OK]);
    const { model, sleeps } = resilient(primary);
    expect(await model.generate(REQUEST)).toEqual(OK);
    expect(primary.calls).toBe(4);
    // 100 ms (first backoff, random 1 → the full value), then Retry-After 300 ms, then 60 s capped at 1 s.
    expect(sleeps).toEqual([100, 300, 1_000]);
  });

  it('spreads the backoff with jitter: half fixed, half random', () => {
    const low = resilient(scripted('p', [OK]), { random: () => 0 }).model;
    const high = resilient(scripted('p', [OK]), { random: () => 1 }).model;
    expect([low.backoffMs(1), high.backoffMs(1)]).toEqual([50, 100]);
    expect([low.backoffMs(3), high.backoffMs(3)]).toEqual([200, 400]);
    expect(high.backoffMs(10)).toBe(1_000);
  });

  it('ends a call that keeps failing with a final error carrying the provider’s, after the last try', async () => {
    const primary = scripted('openai:gpt', [e503]);
    const { model, sleeps } = resilient(primary);
    const err = await model.generate(REQUEST).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelError);
    expect(err).toMatchObject({ retryable: false, status: 503, message: 'openai:gpt failed 4 times, the last: HTTP 503 overloaded' });
    expect(primary.calls).toBe(4);
    expect(sleeps).toHaveLength(3);
  });

  it('does not retry a non-retryable error', async () => {
    const primary = scripted('p', [e401, OK]);
    const err = await resilient(primary)
      .model.generate(REQUEST)
      .catch((e: unknown) => e);
    expect(err).toBe(e401);
    expect(primary.calls).toBe(1);
  });

  it('switches to the fallback when the primary fails every try, and says so in the response', async () => {
    const primary = scripted('openai:primary', [e503]);
    const fallback = scripted('openai:fallback', [OK]);
    const { model } = resilient(primary, { fallback });
    const response = await model.generate(REQUEST);
    expect(response.text).toBe('ok');
    expect(response.fallback).toEqual({
      from: 'openai:primary',
      to: 'openai:fallback',
      reason: 'openai:primary failed 4 times, the last: HTTP 503 overloaded',
    });
    expect([primary.calls, fallback.calls]).toEqual([4, 1]);
  });

  it('waits its turn at the limiter when the wait is short, releases its slot, and hands a long wait back', async () => {
    const answers = [150, 0];
    const log: string[] = [];
    const limiter: CallLimiter = {
      acquire: async (id) => {
        log.push(`acquire ${id.split('-').length}`);
        return answers.shift() ?? 0;
      },
      release: async () => void log.push('release'),
    };
    const { model, sleeps } = resilient(scripted('p', [OK]), { limiter, random: () => 0 });
    expect(await model.generate(REQUEST)).toEqual(OK);
    expect(sleeps).toEqual([150]);
    expect(log).toEqual(['acquire 3', 'acquire 3', 'release']);

    const slow: CallLimiter = { acquire: async () => 5_000, release: async () => undefined };
    const throttled = await resilient(scripted('p', [OK]), { limiter: slow })
      .model.generate(REQUEST)
      .catch((e: unknown) => e);
    expect(throttled).toBeInstanceOf(ThrottledError);
    expect((throttled as ThrottledError).until).toBeGreaterThan(Date.now() + 4_000);
  });
});
