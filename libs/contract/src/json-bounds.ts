/**
 * Bounds on JSON values that come from outside: how deep they nest and how large they are once
 * serialised. Every walk here is iterative (an explicit stack), so a value nested 10,000 levels
 * deep is measured or cut without overflowing the call stack, where `JSON.stringify` would throw.
 */

/** Opens every cut Bosun makes in a value it stores or publishes (a string, or the tail of one). */
export const TRUNCATION_MARKER = '[TRUNCATED by bosun';

/** The key added to an object whose keys were cut, with the number of keys left out. */
export const TRUNCATED_KEYS_FIELD = '[TRUNCATED by bosun]';

/**
 * How deeply a JSON value nests objects and arrays: 0 for a scalar, 1 for `{}`, `[1]` or
 * `{"a":1}`, 2 for `{"a":{}}`. Stops (and returns a number above `limit`) as soon as the depth
 * exceeds `limit`; with a finite limit it also ends on a cyclic value.
 */
export function jsonDepth(value: unknown, limit = Number.POSITIVE_INFINITY): number {
  let max = 0;
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [v, outer] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    const depth = outer + 1;
    if (depth > max) {
      max = depth;
      if (max > limit) return max;
    }
    for (const child of Array.isArray(v) ? v : Object.values(v))
      if (child !== null && typeof child === 'object') stack.push([child, depth]);
  }
  return max;
}

/**
 * The UTF-8 byte length of `JSON.stringify(value)`, or `undefined` when the value nests deeper
 * than `maxDepth` (then it is not serialised at all) or cannot be serialised (a bigint). Never
 * throws.
 */
export function jsonBytes(value: unknown, maxDepth: number): number | undefined {
  if (jsonDepth(value, maxDepth) > maxDepth) return undefined;
  try {
    return Buffer.byteLength(JSON.stringify(value) ?? '', 'utf8');
  } catch {
    return undefined;
  }
}

/** Limits of {@link boundJson}. */
export interface JsonBounds {
  /** Levels of objects and arrays kept; deeper ones are replaced by a marker string. */
  maxDepth: number;
  /** Largest UTF-8 size of the serialised copy. */
  maxBytes: number;
  /** Longest string kept whole, in UTF-16 code units (JavaScript length). Default: no limit. */
  maxStringChars?: number;
  /** Root of the paths named in {@link BoundedJson.cut}, e.g. `data` or `input`. Default `$`. */
  path?: string;
}

/** What {@link boundJson} returns. */
export interface BoundedJson {
  /** The copy: the value itself when nothing had to be cut. */
  value: unknown;
  /** `JSON.stringify(value)` (`null` for a value that serialises to nothing). */
  json: string;
  /** UTF-8 length of `json`. */
  bytes: number;
  /** What was cut, one note per place (`<path>: <what>`), at most 20 and then a count; empty when nothing was. */
  cut: string[];
}

const MAX_NOTES = 20;
const MAX_PATH_CHARS = 160;

/** Notes of what a pass cut, capped. */
class Cuts {
  readonly notes: string[] = [];
  private more = 0;
  add(path: string, what: string): void {
    if (this.notes.length < MAX_NOTES) this.notes.push(`${shortPath(path)}: ${what}`);
    else this.more++;
  }
  list(): string[] {
    return this.more > 0 ? [...this.notes, `… and ${this.more} more cuts`] : [...this.notes];
  }
}

function shortPath(path: string): string {
  return path.length <= MAX_PATH_CHARS ? path : `${path.slice(0, MAX_PATH_CHARS / 2)}…${path.slice(-MAX_PATH_CHARS / 2)}`;
}

function childPath(path: string, key: string): string {
  if (/^[A-Za-z_$][\w$]*$/.test(key)) return `${path}.${key}`;
  return `${path}[${JSON.stringify(key.length > 40 ? `${key.slice(0, 40)}…` : key)}]`;
}

/** `s` cut to `max` code units (never inside a surrogate pair), with the marker saying how long it was. */
function cutString(s: string, max: number): string {
  let end = max;
  const last = s.charCodeAt(end - 1);
  if (end > 0 && last >= 0xd800 && last <= 0xdbff) end--;
  return `${s.slice(0, end)}… ${TRUNCATION_MARKER}: ${s.length} characters, kept ${end}]`;
}

interface PassLimits {
  depth: number;
  chars: number;
  items: number;
}

/** What {@link CopyPass.convert} returns for a value `JSON.stringify` leaves out. */
const NOTHING = Symbol('nothing');

/** A container copied, whose children are still to copy. */
interface PendingCopy {
  src: object;
  dst: Record<string, unknown> | unknown[];
  depth: number;
  path: string;
}

/** Defines (not assigns) `name` on `out`, so a key such as `__proto__` stays an ordinary key of the copy. */
function defineKey(out: Record<string, unknown>, name: string, value: unknown): void {
  Object.defineProperty(out, name, { value, enumerable: true, writable: true, configurable: true });
}

/**
 * One copy of a value under the given limits, made with an explicit stack. Mirrors
 * `JSON.stringify`: `toJSON` is honoured, functions, symbols and `undefined` are left out of
 * objects and become `null` in arrays, non-finite numbers become `null`; a bigint becomes its
 * decimal string and a repeated reference a marker (neither occurs in parsed JSON).
 */
class CopyPass {
  private readonly seen = new WeakSet<object>();
  private readonly pending: PendingCopy[] = [];

  constructor(
    private readonly limits: PassLimits,
    private readonly cuts: Cuts,
    /** The length of every string kept, for the next pass's budget. */
    private readonly lengths: number[],
  ) {}

  run(root: unknown, rootPath: string): unknown {
    const top = this.convert(root, 0, rootPath, '');
    for (let next = this.pending.pop(); next; next = this.pending.pop()) {
      if (Array.isArray(next.src)) this.fillArray(next.src, next);
      else this.fillObject(next.src, next);
    }
    return top === NOTHING ? undefined : top;
  }

  private convert(input: unknown, outer: number, path: string, key: string): unknown {
    let v = input;
    if (v !== null && typeof v === 'object' && typeof (v as { toJSON?: unknown }).toJSON === 'function')
      v = (v as { toJSON: (k: string) => unknown }).toJSON(key);
    if (v === null) return null;
    if (typeof v !== 'object') return this.scalar(v, path);
    if (outer >= this.limits.depth) {
      this.cuts.add(path, `nested deeper than ${this.limits.depth} levels`);
      return `${TRUNCATION_MARKER}: nested deeper than ${this.limits.depth} levels]`;
    }
    if (this.seen.has(v)) {
      this.cuts.add(path, 'a repeated reference');
      return `${TRUNCATION_MARKER}: repeated reference]`;
    }
    this.seen.add(v);
    const dst: Record<string, unknown> | unknown[] = Array.isArray(v) ? [] : {};
    this.pending.push({ src: v, dst, depth: outer + 1, path });
    return dst;
  }

  private scalar(v: unknown, path: string): unknown {
    switch (typeof v) {
      case 'string': {
        let out = v;
        if (v.length > this.limits.chars) {
          this.cuts.add(path, `${v.length} characters cut to ${this.limits.chars}`);
          out = cutString(v, this.limits.chars);
        }
        this.lengths.push(out.length);
        return out;
      }
      case 'number':
        return Number.isFinite(v) ? v : null;
      case 'boolean':
        return v;
      case 'bigint':
        this.cuts.add(path, 'a bigint written as a string');
        return v.toString();
      default:
        // undefined, a function or a symbol.
        return NOTHING;
    }
  }

  private fillArray(src: unknown[], { dst, depth, path }: PendingCopy): void {
    const out = dst as unknown[];
    const n = Math.min(src.length, this.limits.items);
    for (let i = 0; i < n; i++) {
      const c = this.convert(src[i], depth, `${path}[${i}]`, String(i));
      out.push(c === NOTHING ? null : c);
    }
    if (src.length > n) {
      this.cuts.add(path, `${src.length - n} of ${src.length} items cut`);
      out.push(`${TRUNCATION_MARKER}: ${src.length - n} more items]`);
    }
  }

  private fillObject(src: object, { dst, depth, path }: PendingCopy): void {
    const out = dst as Record<string, unknown>;
    const keys = Object.keys(src);
    const n = Math.min(keys.length, this.limits.items);
    for (const key of keys.slice(0, n)) {
      const c = this.convert((src as Record<string, unknown>)[key], depth, childPath(path, key), key);
      if (c === NOTHING) continue;
      let name = key;
      if (name.length > this.limits.chars) {
        this.cuts.add(childPath(path, key), `a key of ${key.length} characters cut to ${this.limits.chars}`);
        name = cutString(key, this.limits.chars);
      }
      defineKey(out, name, c);
    }
    if (keys.length > n) {
      this.cuts.add(path, `${keys.length - n} of ${keys.length} keys cut`);
      defineKey(out, TRUNCATED_KEYS_FIELD, `${keys.length - n} more keys`);
    }
  }
}

/** The lengths of the strings in a value (not its keys), walked iteratively. */
function stringLengths(value: unknown): number[] {
  const out: number[] = [];
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') out.push(v.length);
    else if (v !== null && typeof v === 'object') for (const c of Array.isArray(v) ? v : Object.values(v)) stack.push(c);
  }
  return out;
}

function measure(value: unknown): { json: string; bytes: number } {
  const json = JSON.stringify(value) ?? 'null';
  return { json, bytes: Buffer.byteLength(json, 'utf8') };
}

/**
 * The longest string length `cap` such that cutting every string to `cap` brings their total
 * down by `excess` code units (water-filling over the lengths), or 0 when no cap does.
 */
function capFor(lengths: number[], excess: number): number {
  const sorted = [...lengths].sort((a, b) => b - a);
  let removed = 0;
  for (let i = 0; i < sorted.length; i++) {
    const next = sorted[i + 1] ?? 0;
    // Lowering the i+1 longest strings from sorted[i] to `next` removes this much more.
    const step = (sorted[i]! - next) * (i + 1);
    if (removed + step >= excess) return Math.floor(sorted[i]! - (excess - removed) / (i + 1));
    removed += step;
  }
  return 0;
}

/**
 * A copy of `value` that serialises within `bounds`, made without recursion, so that it can be
 * stored or published whatever it is. Nothing is cut from a value that already fits. Otherwise,
 * in this order until it fits: objects and arrays nested deeper than `maxDepth` become a marker
 * string; the longest strings are shortened (each ending with a marker that gives its length);
 * arrays and objects keep their first items; and nesting is reduced to 8 levels, then 2, then 1.
 * As a last resort the value is replaced by a marker string. Every cut is listed in `cut`, and
 * every cut place carries a string that starts with {@link TRUNCATION_MARKER}. Never throws.
 */
export function boundJson(value: unknown, bounds: JsonBounds): BoundedJson {
  const rootPath = bounds.path ?? '$';
  const chars = bounds.maxStringChars ?? Number.POSITIVE_INFINITY;
  const attempt = (limits: PassLimits): (BoundedJson & { lengths: number[] }) | undefined => {
    try {
      const cuts = new Cuts();
      const lengths: number[] = [];
      const copy = new CopyPass(limits, cuts, lengths).run(value, rootPath);
      const { json, bytes } = measure(copy);
      return { value: copy, json, bytes, cut: cuts.list(), lengths };
    } catch {
      // A getter or toJSON that throws, or a proxy: not a value this pass can copy.
      return undefined;
    }
  };
  const strip = (r: BoundedJson & { lengths: number[] }): BoundedJson => ({ value: r.value, json: r.json, bytes: r.bytes, cut: r.cut });

  // What fits is kept as it is, measured natively (the common case, and the fastest).
  let measured: { bytes: number; lengths: number[] } | undefined;
  if (chars === Number.POSITIVE_INFINITY) {
    try {
      if (jsonDepth(value, bounds.maxDepth) <= bounds.maxDepth) {
        const json = JSON.stringify(value) ?? 'null';
        const bytes = Buffer.byteLength(json, 'utf8');
        if (bytes <= bounds.maxBytes) return { value, json, bytes, cut: [] };
        measured = { bytes, lengths: stringLengths(value) };
      }
    } catch {
      // A bigint, a cycle, a throwing getter or toJSON: the copy below deals with it.
    }
  }
  if (!measured) {
    const first = attempt({ depth: bounds.maxDepth, chars, items: Number.POSITIVE_INFINITY });
    if (first && first.bytes <= bounds.maxBytes) return strip(first);
    if (first) measured = { bytes: first.bytes, lengths: first.lengths };
  }

  // Shorten the longest strings just enough, then a little more while markers and escapes
  // keep it over the limit.
  if (measured) {
    const { bytes, lengths } = measured;
    const excess = bytes - bounds.maxBytes;
    // Each shortened string also gains a marker of about 60 characters.
    let cap = capFor(lengths, excess);
    for (let i = 0; i < 3; i++) cap = capFor(lengths, excess + 64 * lengths.filter((l) => l > cap).length);
    for (let tries = 0; cap >= 256 && tries < 8; tries++) {
      const r = attempt({ depth: bounds.maxDepth, chars: Math.min(cap, chars), items: Number.POSITIVE_INFINITY });
      if (r && r.bytes <= bounds.maxBytes) return strip(r);
      cap = Math.floor(cap * 0.7);
    }
  }
  const ladder: PassLimits[] = [
    { depth: bounds.maxDepth, chars: Math.min(chars, 1024), items: 1000 },
    { depth: bounds.maxDepth, chars: Math.min(chars, 256), items: 100 },
    { depth: Math.min(bounds.maxDepth, 8), chars: Math.min(chars, 128), items: 20 },
    { depth: Math.min(bounds.maxDepth, 2), chars: 64, items: 10 },
    { depth: Math.min(bounds.maxDepth, 1), chars: 64, items: 10 },
  ];
  for (const limits of ladder) {
    const r = attempt(limits);
    if (r && r.bytes <= bounds.maxBytes) return strip(r);
  }
  const why = measured ? `${measured.bytes} bytes as JSON, limit ${bounds.maxBytes}` : 'it cannot be serialised';
  const marker = `${TRUNCATION_MARKER}: ${why}]`;
  const { json, bytes } = measure(marker);
  return { value: marker, json, bytes, cut: [`${rootPath}: replaced whole (${why})`] };
}
