/**
 * Fields of stored Redis hashes and stream entries, where every value is a string: JSON text
 * parsed and checked with a schema, and `true`/`false` flags. Internal to the contract (the
 * tool-call record and the audit entry use them).
 */
import { z } from 'zod';

/** A field that holds JSON text, parsed and checked with `schema`. */
export function jsonText<S extends z.ZodType>(schema: S) {
  return z
    .string()
    .transform((text, ctx): unknown => {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        ctx.addIssue({ code: 'custom', message: 'is not valid JSON' });
        return z.NEVER;
      }
    })
    .pipe(schema);
}

/** A field holding `true` or `false`. */
export const flag = z.enum(['true', 'false']).transform((v) => v === 'true');
