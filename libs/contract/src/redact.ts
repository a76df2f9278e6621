/**
 * Keys whose values are secrets wherever they appear: tool arguments (in events, stored
 * approvals, call records, the audit stream, dead letters) and logged objects. Matched anywhere
 * in the key, in any case: `password`, `db_password`, `apiKey`, `x-api-key`, `Authorization`,
 * `client_secret`, `accessToken`, `privateKey`, `credentials`, `cookie`.
 */
export const SECRET_KEY_PATTERN = /token|secret|passw|api[-_]?key|authori[sz]ation|credential|cookie|private[-_]?key/i;

/** What a redacted value is replaced by. */
export const REDACTED = '[redacted]';

/** Whether a key names a secret ({@link SECRET_KEY_PATTERN}). */
export function isSecretKey(key: string): boolean {
  return SECRET_KEY_PATTERN.test(key);
}

/** Options of {@link redactSecrets}. */
export interface RedactOptions {
  /** Secret values to cut out of every string (known secrets: configured tokens, keys). Values shorter than 6 characters are ignored. */
  values?: readonly string[];
  /** Deeper levels are replaced by `[too deep]`. Default 32. */
  maxDepth?: number;
}

/**
 * A copy of `value` with the value of every secret-looking key ({@link isSecretKey}) replaced by
 * `[redacted]`, at any depth, and with each of `options.values` cut out of every string. The one
 * redaction Bosun applies to tool arguments it shows or stores, and to logged objects. Objects
 * are copied as JSON would show them (own enumerable properties, after `toJSON`); cycles become
 * `[circular]`.
 * A value is never changed in place, so the caller can still use the real one (the tool call
 * itself needs it).
 */
export function redactSecrets(value: unknown, options: RedactOptions = {}): unknown {
  const values = (options.values ?? []).filter((v) => v.length >= 6);
  const maxDepth = options.maxDepth ?? 32;
  const seen = new WeakSet<object>();
  const walk = (value: unknown, depth: number): unknown => {
    // As JSON will show it: a Date as its string, a Buffer as its bytes.
    const v =
      value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function'
        ? (value as { toJSON(): unknown }).toJSON()
        : value;
    if (typeof v === 'string') return values.length > 0 ? scrubValues(v, values) : v;
    if (v === null || typeof v !== 'object') return v;
    if (seen.has(v)) return '[circular]';
    if (depth >= maxDepth) return '[too deep]';
    seen.add(v);
    try {
      if (Array.isArray(v)) return v.map((x) => walk(x, depth + 1));
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
        // defineProperty: a key named `__proto__` stays a key, it does not become the prototype.
        Object.defineProperty(out, k, {
          value: isSecretKey(k) ? REDACTED : walk(x, depth + 1),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return out;
    } finally {
      seen.delete(v);
    }
  };
  return walk(value, 0);
}

/** Replaces every occurrence of each of `values` in `text` by `[redacted]`. */
export function scrubValues(text: string, values: readonly string[]): string {
  let out = text;
  for (const s of values) if (s.length >= 6 && out.includes(s)) out = out.split(s).join(REDACTED);
  return out;
}
