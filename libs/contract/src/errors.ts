import type { z } from 'zod';

/**
 * Base of Bosun's own errors. Branch on `code` (or `instanceof`), never on the message.
 */
export class BosunError extends Error {
  /** A stable, machine-readable code such as `invalid_input`. */
  readonly code: string;
  /** Extra structured data about the failure. */
  readonly data: Record<string, unknown> | undefined;

  constructor(code: string, message: string, options?: { cause?: unknown; data?: Record<string, unknown> }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'BosunError';
    this.code = code;
    this.data = options?.data;
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
