/**
 * What the operator commands share: their dependencies, the error they report as is, and small
 * helpers for queues, stored values and text. The work of the commands is in `dead-letters.ts`,
 * `run-view.ts` and `tool-calls.ts` (data in, data out); `commands/*.ts` print it.
 */
import { Queue } from 'bullmq';
import { BadCheckpointError, BadStoredValueError, InvalidInputError, errorMessage } from '@bosun/contract';
import { keys, type RedisClient } from '@bosun/transport';
import { CliError } from './errors.js';

/** What every operator command needs. */
export interface OperatorDeps {
  redis: RedisClient;
  prefix: string;
}

/**
 * Why an operator's request was refused or failed, as data: `not_found` (no such run, entry,
 * approval or tool call), `bad_request` (the request cannot be done as asked), `conflict` (not in
 * the state the request needs), `corrupt` (a stored value it needs does not parse), `unavailable`
 * (a service it needs did not answer), `forbidden` (no or an unknown operator token, or a role
 * missing). The CLI's exit code and the console's HTTP status come from it
 * ({@link OPERATOR_HTTP_STATUS}, {@link OPERATOR_EXIT_CODE}), never from the message.
 */
export type OperatorReason = 'not_found' | 'bad_request' | 'conflict' | 'corrupt' | 'unavailable' | 'forbidden';

/** The console's HTTP status for each {@link OperatorReason}. */
export const OPERATOR_HTTP_STATUS: Readonly<Record<OperatorReason, number>> = {
  not_found: 404,
  bad_request: 400,
  conflict: 409,
  corrupt: 500,
  unavailable: 503,
  forbidden: 403,
};

/** The CLI's exit code for each {@link OperatorReason}: 2 bad usage, 4 not allowed (HTTP's 401/403), else 1. */
export const OPERATOR_EXIT_CODE: Readonly<Record<OperatorReason, 1 | 2 | 4>> = {
  not_found: 1,
  bad_request: 2,
  conflict: 1,
  corrupt: 1,
  unavailable: 1,
  forbidden: 4,
};

/** A refusal or a failure the CLI reports as is, with why (`reason`) and its exit code ({@link OPERATOR_EXIT_CODE}). */
export class OperatorError extends CliError {
  readonly reason: OperatorReason;
  readonly exitCode: 1 | 2 | 4;

  constructor(reason: OperatorReason, message: string, cause?: unknown) {
    super('operator', message, { cause, data: { reason } });
    this.name = 'OperatorError';
    this.reason = reason;
    this.exitCode = OPERATOR_EXIT_CODE[reason];
  }
}

/**
 * The message of a stored value that does not parse (a `BadStoredValueError`, a
 * `BadCheckpointError`, or a tool-call record's `InvalidInputError`): it names the bad fields.
 * Any other error is thrown on.
 */
export function storedProblem(err: unknown): string {
  if (err instanceof BadStoredValueError || err instanceof BadCheckpointError || err instanceof InvalidInputError) return err.message;
  throw err;
}

/** Runs `fn` with a queue opened on the shared connection, and closes it. */
export async function withQueue<T>(deps: OperatorDeps, name: string, fn: (q: Queue) => Promise<T>): Promise<T> {
  const queue = new Queue(name, { connection: deps.redis, prefix: deps.prefix });
  try {
    return await fn(queue);
  } finally {
    await queue.close();
  }
}

/**
 * Reads a checkpoint as JSON (its schema is the caller's): null when there is none; an
 * {@link OperatorError} (exit 1) naming the key when it is not JSON.
 */
export async function readCheckpoint(deps: OperatorDeps, id: string): Promise<unknown> {
  const key = keys.checkpoint(deps.prefix, id);
  const text = await deps.redis.get(key);
  if (text === null) return null;
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new OperatorError('corrupt', `checkpoint ${key} is not valid JSON (${errorMessage(err)}); it cannot be shown`, err);
  }
}

const REASON_MAX = 100;

/** A text on one line, cut at `max` characters (default 100). */
export function oneLine(text: string, max = REASON_MAX): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max)}…` : flat;
}

/** `1h02m`, `3m05s`, `12s`. */
export function formatAge(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(s % 60).padStart(2, '0')}s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h${String(m % 60).padStart(2, '0')}m`;
  return `${Math.floor(h / 24)}d${String(h % 24).padStart(2, '0')}h`;
}
