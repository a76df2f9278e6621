import { z } from 'zod';

const PROTO = '__proto__';

/** Defines (not assigns) `key` on `out`, so that `__proto__` is an own key like any other. */
function defineKey(out: Record<string, string>, key: string, value: string): void {
  Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
}

/**
 * A record of strings whose every own key is data: `z.record(key, value)`, except that a key
 * named `__proto__` (which zod's record leaves out, and assigning would turn into the object's
 * prototype) is checked like any other and kept as an own property of the result. Names of
 * `Object.prototype` (`constructor`, `toString`) are ordinary keys of a record either way.
 * Alert labels and annotations are the sender's data: none of them is dropped silently.
 */
export function dataRecord(key: z.ZodType<string>, value: z.ZodType<string>): z.ZodType<Record<string, string>, Record<string, string>> {
  const record = z.record(key, value);
  return z.custom<Record<string, string>>().transform((input, ctx) => {
    const parsed = record.safeParse(input);
    if (!parsed.success) {
      for (const issue of parsed.error.issues) ctx.addIssue({ ...issue, input } as never);
      return z.NEVER;
    }
    if (!Object.hasOwn(input, PROTO)) return parsed.data;
    const own = Object.getOwnPropertyDescriptor(input, PROTO)!.value as unknown;
    const keyCheck = key.safeParse(PROTO);
    const valueCheck = value.safeParse(own);
    // Reported as zod reports the record's other entries.
    if (!keyCheck.success) ctx.addIssue({ code: 'custom', message: 'Invalid key in record', path: [PROTO], input });
    for (const issue of valueCheck.error?.issues ?? []) ctx.addIssue({ ...issue, path: [PROTO, ...issue.path] });
    if (!keyCheck.success || !valueCheck.success) return z.NEVER;
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(parsed.data)) defineKey(out, k, v);
    defineKey(out, keyCheck.data, valueCheck.data);
    return out;
  });
}
