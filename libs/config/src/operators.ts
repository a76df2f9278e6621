import { z } from 'zod';
import { ACTOR_LIMITS, Role } from '@bosun/contract';

/** What an operator's name may be: it is what decisions, the audit and `bosun audit --by` show. */
export const OPERATOR_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.@+-]*$/;

/**
 * One person who may use the operator surfaces (the CLI, the operator HTTP API, the console's
 * token login, an A2A token that names them). The config holds the SHA-256 of the person's token
 * (hex), never the token: `printf %s "$TOKEN" | sha256sum`, as for the A2A tenants' tokens.
 */
export const OperatorEntry = z
  .object({
    name: z
      .string()
      .max(ACTOR_LIMITS.name)
      .regex(OPERATOR_NAME_PATTERN, 'must be letters, digits, "_", ".", "@", "+" or "-", starting with a letter or digit'),
    tokenSha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/i, 'must be the SHA-256 of the token, as 64 hex digits (printf %s "$TOKEN" | sha256sum)')
      .transform((h) => h.toLowerCase()),
    /** What the person may do: `approve` (decide approvals), `cancel` (runs), `retry` (in-doubt calls, dead letters), `read`. */
    roles: z.array(Role).min(1, 'give at least one role (approve, cancel, retry, read)'),
  })
  .strict();
export type OperatorEntry = z.output<typeof OperatorEntry>;

/** The config's `operators`: names and token hashes each used once. */
export const OperatorsConfig = z
  .array(OperatorEntry)
  .default([])
  .superRefine((operators, ctx) => {
    const seen = new Map<string, number>();
    const hashes = new Map<string, number>();
    for (const [i, o] of operators.entries()) {
      const name = o.name.toLowerCase();
      if (seen.has(name))
        ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `"${o.name}" is already the name of operators.${seen.get(name)}` });
      else seen.set(name, i);
      // Two people with one token could not be told apart: the second would never be recorded.
      if (hashes.has(o.tokenSha256))
        ctx.addIssue({ code: 'custom', path: [i, 'tokenSha256'], message: `the same token as operators.${hashes.get(o.tokenSha256)}` });
      else hashes.set(o.tokenSha256, i);
    }
  });
export type OperatorsConfig = z.output<typeof OperatorsConfig>;
