/**
 * How the `openai` package's failures become {@link ModelError}s: HTTP 429, 5xx, timeouts and
 * connection failures are retryable; the server's `Retry-After` (or `retry-after-ms`) is kept.
 */
import { errorMessage } from '@bosun/contract';
import type { APIError } from 'openai';

import { isContextLengthError } from './context-errors.js';
import { loadedSdk } from './sdks.js';
import { ModelError } from './types.js';

/** What the adapter knows about the call that failed. */
export interface FailedCall {
  apiKey: string;
  timeoutMs: number;
  /** The caller aborted the request. */
  aborted: boolean;
}

/** The {@link ModelError} for a failed `chat.completions.create`; never carries the API key. */
export function openAiError(error: unknown, call: FailedCall): ModelError {
  const scrub = (text: string): string => text.split(call.apiKey).join('[redacted]');
  const cause = error instanceof Error && error.message.includes(call.apiKey) ? undefined : error;
  // Without the SDK loaded, nothing it throws can be here (the SDK loads at a model's first call).
  const { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } = loadedSdk('openai') ?? {};
  if (call.aborted || isA(error, APIUserAbortError)) return new ModelError('OpenAI request aborted', { retryable: false, cause });
  if (isA(error, APIConnectionTimeoutError)) {
    return new ModelError(`OpenAI request timed out after ${call.timeoutMs} ms`, { retryable: true, cause });
  }
  if (isA(error, APIConnectionError)) {
    return new ModelError(scrub(`OpenAI request failed: ${error.message}${describeCause(error.cause)}`), { retryable: true, cause });
  }
  if (isA(error, APIError) && typeof error.status === 'number') {
    const api = error as APIError<number, Headers | undefined, object | undefined>;
    const status = api.status;
    const retryable = status === 408 || status === 409 || status === 429 || status >= 500;
    const wait = retryAfterMs(api.headers);
    const body = api.error as { code?: unknown } | undefined;
    const code = typeof body?.code === 'string' ? body.code : undefined;
    const tooLong = (status === 400 || status === 413) && isContextLengthError(code, `${describeBody(api)} ${api.message}`);
    return new ModelError(scrub(`OpenAI API error: HTTP ${status} ${describeBody(api)}`), {
      retryable,
      status,
      ...(wait === undefined ? {} : { retryAfterMs: wait }),
      ...(tooLong ? { reason: 'context_length' as const } : {}),
      cause,
    });
  }
  const message = errorMessage(error);
  return new ModelError(scrub(`OpenAI request failed: ${message}`), { retryable: false, cause });
}

/** `error instanceof type`, false when the SDK that defines `type` is not loaded. */
export function isA<T>(error: unknown, type: (abstract new (...args: never[]) => T) | undefined): error is T {
  return type !== undefined && error instanceof type;
}

/** The server's wait before a retry: `retry-after-ms`, or `Retry-After` in seconds or as an HTTP date. */
export function retryAfterMs(headers: Headers | undefined, now = Date.now()): number | undefined {
  if (!headers) return undefined;
  const ms = Number(headers.get('retry-after-ms') ?? Number.NaN);
  if (Number.isFinite(ms) && ms >= 0) return ms;
  const raw = headers.get('retry-after');
  if (raw === null || raw.trim() === '') return undefined;
  const seconds = Number(raw);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(raw);
  return Number.isFinite(date) ? Math.max(0, date - now) : undefined;
}

/** `<type or code>: <message>` from the error body, or the SDK's message. */
function describeBody(error: APIError<number, Headers | undefined, object | undefined>): string {
  const body = error.error as { message?: unknown; type?: unknown; code?: unknown } | undefined;
  const message = typeof body?.message === 'string' && body.message.trim() !== '' ? body.message.trim() : undefined;
  const kind = typeof body?.code === 'string' ? body.code : typeof body?.type === 'string' ? body.type : undefined;
  if (message === undefined) return error.message;
  return kind ? `${kind}: ${message}` : message;
}

function describeCause(cause: unknown): string {
  let current: unknown = cause;
  for (let depth = 0; depth < 4 && current instanceof Error; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') return ` (${code})`;
    current = current.cause;
  }
  return '';
}
