import type { z } from 'zod';

/**
 * Every code a {@link BosunError} may carry, by area: the codes that go on the wire or that one
 * package may see from another. A new failure of that kind gets a new code here; callers branch
 * on these, never on message text. A package's own failures that never leave it (the CLI's) have
 * their own codes there, on a {@link CodedError}.
 */
export type ErrorCode =
  // Input and stored formats.
  | 'invalid_input'
  | 'invalid_config'
  | 'invalid_output_schema'
  | 'bad_checkpoint'
  | 'corrupt_checkpoint'
  | 'corrupt_record'
  | 'invalid_transition'
  | 'bad_decision'
  | 'bad_stored_value'
  // The agent loops' job control.
  | 'park'
  | 'yield'
  | 'retryable'
  | 'timer_conflict'
  | 'no_approvals'
  | 'no_catalog'
  | 'non_deterministic'
  | 'script_host_failure'
  | 'over_budget'
  | 'cancelled'
  | 'lock_lost'
  // The CodeAct sandbox (libs/sandbox).
  | 'sandbox_aborted'
  | 'sandbox_failed'
  // Operators' requests (approvals, run control, HTTP).
  | 'not_found'
  | 'already_decided'
  | 'forbidden'
  | 'unauthenticated'
  | 'bad_request'
  | 'finished'
  | 'method_not_allowed'
  | 'body_too_large'
  | 'http_error'
  | 'address_in_use'
  | 'listen_failed'
  // Models.
  | 'model_error'
  | 'missing_api_key'
  | 'throttled'
  // MCP servers.
  | 'mcp_server_unavailable'
  | 'mcp_server_closed'
  | 'mcp_connect_failed'
  | 'call_not_sent'
  // Connections.
  | 'redis_unreachable'
  | 'redis_auth_failed'
  | 'redis_tls_failed'
  | 'nats_unreachable'
  | 'nats_auth_failed'
  | 'nats_tls_failed'
  | 'jetstream_unavailable'
  | 'cluster_not_configured'
  | 'unsafe_prefix'
  // Processes started by the launcher.
  | 'process_exited'
  | 'process_timeout'
  // Requests that are not what they claim to be.
  | 'not_a_tool_call'
  // Deliveries of answers to sinks (services/intake).
  | 'delivery_failed'
  // The Slack Web API (services/intake).
  | 'slack_api';

/** The options of a {@link CodedError}: what caused it, and structured data about it. */
export interface CodedErrorOptions {
  cause?: unknown;
  data?: Record<string, unknown>;
}

/**
 * An error with a stable, machine-readable `code` from the union `C`, a `cause` and data: the
 * shape of every Bosun error. {@link BosunError} carries the contract's codes; a package with
 * codes of its own that never leave it (the CLI's `CliError`) extends this with its own union.
 */
export class CodedError<C extends string> extends Error {
  /** A stable, machine-readable code, such as `invalid_input`. */
  readonly code: C;
  /** Extra structured data about the failure. */
  readonly data: Record<string, unknown> | undefined;

  constructor(code: C, message: string, options?: CodedErrorOptions) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'CodedError';
    this.code = code;
    this.data = options?.data;
  }
}

/**
 * Base of Bosun's own errors, with a code from {@link ErrorCode}. Branch on `code` (or
 * `instanceof`), never on the message.
 */
export class BosunError extends CodedError<ErrorCode> {
  constructor(code: ErrorCode, message: string, options?: CodedErrorOptions) {
    super(code, message, options);
    this.name = 'BosunError';
  }
}

/**
 * A worker no longer holds the job it works on: its BullMQ lock expired (the process was cut off
 * from Redis, or too busy to renew it) and the job went, or will go, to its next owner. The
 * worker must stop before its next effect and write nothing more for the job: a fenced write
 * refused, or BullMQ's renewal failure, tells it so.
 */
export class LockLostError extends BosunError {
  constructor(what: string, options?: { cause?: unknown; data?: Record<string, unknown> }) {
    super('lock_lost', `${what}: this worker no longer holds its lock (the job passes to its next owner)`, options);
    this.name = 'LockLostError';
  }
}

/** Input that does not match the contract. The message names every bad field. */
export class InvalidInputError extends BosunError {
  /** Paths of the fields that failed, e.g. `["id", "payload"]`. */
  readonly fields: string[];

  constructor(what: string, issues: string[], fields: string[]) {
    super('invalid_input', `invalid ${what}: ${issues.join('; ')}`, { data: { fields } });
    this.name = 'InvalidInputError';
    this.fields = fields;
  }
}

/** Formats a zod error as `field: message` items, naming the field of each issue. */
export function describeIssues(error: z.ZodError): { issues: string[]; fields: string[] } {
  const issues: string[] = [];
  const fields: string[] = [];
  for (const issue of error.issues) {
    const field = issue.path.length > 0 ? issue.path.map(String).join('.') : '(root)';
    fields.push(field);
    issues.push(`${field}: ${issue.message}`);
  }
  return { issues, fields };
}

/** Parses `value` with `schema`, throwing an {@link InvalidInputError} that names each bad field. */
export function parseWith<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const { issues, fields } = describeIssues(result.error);
  throw new InvalidInputError(what, issues, fields);
}

/**
 * A stored value — a checkpoint, a record, a queue or stream entry — that is not JSON or does not
 * match its schema. Unlike {@link InvalidInputError} (bad input from a caller), this is a fault of
 * the store or of the version that wrote it. The message names every bad field.
 */
export class BadStoredValueError extends BosunError {
  /** Paths of the fields that failed (`(root)` for text that is not JSON). */
  readonly fields: string[];

  constructor(what: string, issues: string[], fields: string[], cause?: unknown) {
    super('bad_stored_value', `${what} does not parse: ${issues.join('; ')}`, { cause, data: { fields } });
    this.name = 'BadStoredValueError';
    this.fields = fields;
  }
}

/** Parses a stored value with `schema`, throwing a {@link BadStoredValueError} that names each bad field. */
export function parseStored<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const { issues, fields } = describeIssues(result.error);
  throw new BadStoredValueError(what, issues, fields, result.error);
}

/** Parses stored JSON text with `schema`; text that is not JSON is a {@link BadStoredValueError} too. */
export function parseStoredJson<S extends z.ZodType>(schema: S, text: string, what: string): z.output<S> {
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch (err) {
    throw new BadStoredValueError(what, [`(root): not valid JSON (${errorMessage(err)})`], ['(root)'], err);
  }
  return parseStored(schema, value, what);
}

/**
 * The message of anything thrown: an `Error`'s message, or the value as text. For logs and for
 * the text people read; code branches on a {@link BosunError}'s `code` or on `instanceof`.
 */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
