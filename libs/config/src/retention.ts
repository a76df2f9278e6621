/**
 * The `retention:` section: how long each kind of data a run leaves behind is kept in Redis and
 * in the JetStream runs stream (docs/configuration.md#retention). Every default is what Bosun
 * kept before the section existed.
 */
import { z } from 'zod';

const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };

/** `"7d"`, `"12h"`, `"90m"`, `"45s"`, or a whole number of seconds → seconds. */
export function parseDuration(value: string | number): number | undefined {
  if (typeof value === 'number') return Number.isInteger(value) && value > 0 ? value : undefined;
  const m = /^\s*(\d+)\s*([smhd])\s*$/.exec(value);
  if (!m) return undefined;
  const seconds = Number(m[1]) * UNITS[m[2]!]!;
  return seconds > 0 ? seconds : undefined;
}

/** A duration written for people, in seconds; `forever` where {@link Duration} allows it. */
export function formatDuration(seconds: number | null): string {
  if (seconds === null) return 'forever';
  for (const [unit, size] of [
    ['d', 86_400],
    ['h', 3600],
    ['m', 60],
  ] as const)
    if (seconds % size === 0) return `${seconds / size}${unit}`;
  return `${seconds}s`;
}

/** The shortest retention of any kind: a run's data must outlive the run itself. */
const MIN_SECONDS = 3600;

const Duration = z.union([z.string(), z.number()]).transform((value, ctx) => {
  const seconds = parseDuration(value);
  if (seconds === undefined) {
    ctx.addIssue({
      code: 'custom',
      message: `must be a duration such as 7d, 12h or 90m, or a whole number of seconds (got ${JSON.stringify(value)})`,
    });
    return z.NEVER;
  }
  if (seconds < MIN_SECONDS) {
    ctx.addIssue({ code: 'custom', message: `must be at least 1h (got ${formatDuration(seconds)})` });
    return z.NEVER;
  }
  return seconds;
});

/** `forever`, or a {@link Duration}: forever is `null`. */
const DurationOrForever = z.union([z.literal('forever').transform(() => null), Duration]);

/** `"1GiB"`, `"512MiB"`, `"100MB"`, or bytes. */
const Size = z.union([z.string(), z.number()]).transform((value, ctx) => {
  const units: Record<string, number> = { B: 1, KB: 1e3, MB: 1e6, GB: 1e9, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 };
  const m = typeof value === 'string' ? /^\s*(\d+)\s*(B|KB|MB|GB|KiB|MiB|GiB)\s*$/.exec(value) : null;
  const bytes = typeof value === 'number' ? value : m ? Number(m[1]) * units[m[2]!]! : NaN;
  if (!Number.isInteger(bytes) || bytes < 1024 ** 2) {
    ctx.addIssue({
      code: 'custom',
      message: `must be a size of at least 1MiB, such as 1GiB or 512MiB, or a number of bytes (got ${JSON.stringify(value)})`,
    });
    return z.NEVER;
  }
  return bytes;
});

const DEFAULT_EVENTS = { maxAge: 7 * 86_400, maxBytes: 1024 ** 3, maxMessages: 1_000_000 };

/**
 * The section, parsed: every duration in seconds (`null`: forever), the stream's size in bytes.
 */
export const RetentionConfigSchema = z
  .object({
    /** Run and task checkpoints (`ckpt:run:*`, `ckpt:task:*`, `ckpt:remote:*`), the usage ledger, a task's cancel key and a run's event counter. */
    checkpoints: Duration.default(7 * 86_400),
    /** Finished task jobs on `specialist-<name>` (their return value is the task's result) and failed timer jobs. */
    taskResults: Duration.default(7 * 86_400),
    /** Finished incident jobs (the run result, read by `bosun result`); `forever` (the default) leaves them to whoever published them. */
    runResults: DurationOrForever.default(null),
    /** Tool-call records (`toolcall:<key>`): the idempotency record of every call. */
    toolRecords: Duration.default(7 * 86_400),
    /** The JetStream runs stream (`<prefix>-runs`): the oldest events go first at any of the three limits. */
    events: z
      .object({
        maxAge: Duration.default(DEFAULT_EVENTS.maxAge),
        maxBytes: Size.default(DEFAULT_EVENTS.maxBytes),
        maxMessages: z.number().int().min(1000).default(DEFAULT_EVENTS.maxMessages),
      })
      .strict()
      .default(DEFAULT_EVENTS),
    /** The audit stream (`<prefix>:audit`): about this many entries are kept (`XADD MAXLEN ~`). */
    audit: z
      .object({ maxEntries: z.number().int().min(1000).default(100_000) })
      .strict()
      .default({ maxEntries: 100_000 }),
  })
  .strict();

/** The parsed `retention:` section. */
export type RetentionConfig = z.output<typeof RetentionConfigSchema>;

/** What `retention:` is when the file has none. */
export const DEFAULT_RETENTION: RetentionConfig = Object.freeze({
  checkpoints: 7 * 86_400,
  taskResults: 7 * 86_400,
  runResults: null,
  toolRecords: 7 * 86_400,
  events: Object.freeze({ ...DEFAULT_EVENTS }),
  audit: Object.freeze({ maxEntries: 100_000 }),
});

/**
 * The rules between the kinds and the run's own limits; a message naming what is wrong, or
 * undefined. A run's data must outlive the run, and the records of its calls must outlive the
 * checkpoint a task resumes from: a task resumed without them could run a call again.
 */
export function retentionProblem(retention: RetentionConfig, runDeadlineMs: number): string | undefined {
  const deadline = Math.ceil(runDeadlineMs / 1000);
  for (const kind of ['checkpoints', 'taskResults', 'toolRecords', 'runResults'] as const) {
    const seconds = retention[kind];
    if (seconds !== null && seconds < deadline)
      return `retention.${kind} (${formatDuration(seconds)}) is shorter than coordinator.runDeadlineMs (${formatDuration(deadline)}): a run's data must outlive the run`;
  }
  if (retention.toolRecords < retention.checkpoints)
    return `retention.toolRecords (${formatDuration(retention.toolRecords)}) is shorter than retention.checkpoints (${formatDuration(retention.checkpoints)}): a task resumed from its checkpoint must still find the records of its calls, or a call could run twice`;
  return undefined;
}
