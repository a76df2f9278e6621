/**
 * Scenario 13: what a completed run leaves behind for its retention. N standard runs in bulk on
 * a fresh cluster (default `retention:`), then every key under the prefix: `MEMORY USAGE` (bytes
 * of key and value with Redis's overhead), its type and time to live, grouped by the key's
 * pattern; and the JetStream runs stream's bytes and messages. From those, Redis memory and
 * JetStream disk for 100,000 runs a day, with the defaults and with a setting that halves the
 * bytes per retained run; a second, smaller cluster runs with that setting to show the
 * lifetimes it sets. See docs/scaling.md, "Cost of retention".
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { INCIDENTS_QUEUE, runsStreamName } from '@bosun/contract';
import { Cluster, buildConfig } from './cluster.js';
import { IncidentClient, within, withPrefix, type Ctx, type Row, type ScenarioResult } from './scenarios.js';
import { fmt, note } from './util.js';

/** The scenario's number (after the durable peers' 10 and 11, and the tokens' 12). */
export const RETENTION_ID = 15;

const DAY = 86_400;

/** The kinds of `retention:`, and what is not a run's (fixed: the catalog, counters, capped streams). */
export type RetentionKind = 'checkpoints' | 'toolRecords' | 'taskResults' | 'runResults' | 'audit' | 'toolJobs' | 'fixed';

/** Key patterns (after `<prefix>:`), the kind each belongs to; the first that matches wins. */
const PATTERNS: [RegExp, string, RetentionKind][] = [
  [/^ckpt:run:/, 'ckpt:run:<runId>', 'checkpoints'],
  [/^ckpt:task:/, 'ckpt:task:<taskId>', 'checkpoints'],
  [/^ckpt:remote:/, 'ckpt:remote:<taskId>', 'checkpoints'],
  [/^run:[^:]+:seq$/, 'run:<runId>:seq', 'checkpoints'],
  [/^usage:/, 'usage:<runId>', 'checkpoints'],
  [/^cancel:/, 'cancel:<id>', 'checkpoints'],
  [/^trace:/, 'trace:<runId>', 'checkpoints'],
  [/^toolcall:/, 'toolcall:<key>', 'toolRecords'],
  [/^audit$/, 'audit', 'audit'],
  [
    /^incidents:(?!(?:completed|failed|wait|active|delayed|paused|prioritized|waiting-children|events|meta|id|marker|stalled-check|limiter|pc|de)$)[^:]+$/,
    'incidents:<id> (job: incident, run result)',
    'runResults',
  ],
  [/^incidents:[^:]+:(dependencies|processed|failed|unsuccessful)$/, 'incidents:<id>:<children>', 'runResults'],
  [/^incidents:completed$/, 'incidents:completed', 'runResults'],
  [/^specialist-[^:]+:(completed|failed)$/, 'specialist-<name>:completed', 'taskResults'],
  [
    /^specialist-[^:]+:(?!(?:wait|active|delayed|paused|prioritized|waiting-children|events|meta|id|marker|stalled-check|limiter|pc|de)$)[^:]+$/,
    'specialist-<name>:<taskId> (job: task, its result)',
    'taskResults',
  ],
  [
    /^tools:(?!(?:completed|failed|wait|active|delayed|paused|prioritized|events|meta|id|marker|stalled-check|limiter|pc|de)$)[^:]+$/,
    'tools:<key> (job: tool call)',
    'toolJobs',
  ],
  [/^tools:(completed|failed)$/, 'tools:completed', 'toolJobs'],
];

/** The pattern and kind of a key (without the prefix). */
export function classify(key: string): { pattern: string; kind: RetentionKind } {
  for (const [re, pattern, kind] of PATTERNS) if (re.test(key)) return { pattern, kind };
  // Queue bookkeeping (meta, id, capped event streams), the catalog, counters: not per run.
  return { pattern: key, kind: 'fixed' };
}

/** One pattern's measure. */
export interface PatternBytes {
  pattern: string;
  kind: RetentionKind;
  keys: number;
  bytes: number;
  /** The median time to live of its keys in seconds; -1 when they have none. */
  ttlSeconds: number;
}

/** Scans the prefix's keys and measures each (`MEMORY USAGE … SAMPLES 0`, `PTTL`), by pattern. */
export async function measureKeys(ctx: Ctx, prefix: string): Promise<PatternBytes[]> {
  const groups = new Map<string, { kind: RetentionKind; bytes: number; ttls: number[] }>();
  let cursor = '0';
  do {
    const [next, found] = await ctx.redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (found.length === 0) continue;
    const pipe = ctx.redis.pipeline();
    for (const key of found) pipe.call('MEMORY', 'USAGE', key, 'SAMPLES', '0').pttl(key);
    const replies = (await pipe.exec()) ?? [];
    found.forEach((key, i) => {
      const bytes = Number(replies[2 * i]?.[1] ?? 0);
      const pttl = Number(replies[2 * i + 1]?.[1] ?? -2);
      if (pttl === -2) return; // Gone between SCAN and MEMORY USAGE.
      const { pattern, kind } = classify(key.slice(prefix.length + 1));
      const g = groups.get(pattern) ?? { kind, bytes: 0, ttls: [] };
      g.bytes += bytes;
      g.ttls.push(pttl < 0 ? -1 : pttl / 1000);
      groups.set(pattern, g);
    });
  } while (cursor !== '0');
  return [...groups.entries()]
    .map(([pattern, g]) => {
      const sorted = g.ttls.sort((a, b) => a - b);
      return {
        pattern,
        kind: g.kind,
        keys: g.ttls.length,
        bytes: g.bytes,
        ttlSeconds: Math.round(sorted[Math.floor(sorted.length / 2)] ?? -1),
      };
    })
    .sort((a, b) => b.bytes - a.bytes);
}

/** A `retention:` section, as the bench writes it and reads its lifetimes (seconds; null: forever). */
export interface RetentionSetting {
  label: string;
  config: Record<string, unknown>;
  lifetime: Record<Exclude<RetentionKind, 'fixed'>, number | null>;
}

/** Today's defaults (docs/configuration.md#retention); tool jobs are kept a day, the audit stream by count. */
export const DEFAULTS: RetentionSetting = {
  label: 'defaults',
  config: {},
  lifetime: { checkpoints: 7 * DAY, toolRecords: 7 * DAY, taskResults: 7 * DAY, runResults: null, audit: null, toolJobs: DAY },
};

/**
 * The setting that halves the bytes per retained run: the state a run needs while it runs (its
 * checkpoints, its calls' records, its task jobs) kept a day after the run, the run's result a week.
 */
export const HALVING: RetentionSetting = {
  label: 'checkpoints, toolRecords, taskResults 1d; runResults 7d',
  config: { checkpoints: '1d', toolRecords: '1d', taskResults: '1d', runResults: '7d' },
  lifetime: { checkpoints: DAY, toolRecords: DAY, taskResults: DAY, runResults: 7 * DAY, audit: null, toolJobs: DAY },
};

/**
 * Bytes per run retained over a 7-day window: each kind's bytes per run, weighted by the share of
 * the week it is kept (a kind kept for ever counts whole: in 7 days of runs all of it is there).
 */
export function retainedBytesPerRun(perRun: Map<RetentionKind, number>, setting: RetentionSetting): number {
  let sum = 0;
  for (const [kind, bytes] of perRun) {
    if (kind === 'fixed') continue;
    const life = setting.lifetime[kind];
    sum += bytes * (life === null ? 1 : Math.min(life, 7 * DAY) / (7 * DAY));
  }
  return sum;
}

/** Bytes per run of each kind. */
export function bytesPerRun(patterns: readonly PatternBytes[], runs: number): Map<RetentionKind, number> {
  const out = new Map<RetentionKind, number>();
  for (const p of patterns) out.set(p.kind, (out.get(p.kind) ?? 0) + p.bytes / runs);
  return out;
}

async function streamState(
  ctx: Ctx,
  prefix: string,
): Promise<{ bytes: number; messages: number; config: { max_age: number; max_bytes: number; max_msgs: number } }> {
  if (!ctx.nc) return { bytes: NaN, messages: NaN, config: { max_age: NaN, max_bytes: NaN, max_msgs: NaN } };
  const info = await (await jetstreamManager(ctx.nc)).streams.info(runsStreamName(prefix));
  return { bytes: info.state.bytes, messages: info.state.messages, config: info.config };
}

/** Runs `n` standard incidents in bulk on a cluster with `retention`; measures what is left. */
async function runAndMeasure(ctx: Ctx, n: number, retention: Record<string, unknown>) {
  return withPrefix(ctx, async (prefix) => {
    const config = buildConfig(ctx.root, { toolTransport: ctx.toolTransport, coordinatorConcurrency: 200, kubernetesConcurrency: 200 });
    config.retention = retention;
    const cluster = new Cluster({ root: ctx.root, prefix, redisUrl: ctx.redisUrl, natsUrl: ctx.natsUrl, redis: ctx.redis, config });
    try {
      await cluster.start('tool-gateway');
      await Promise.all([cluster.start('coordinator'), cluster.start('specialist')]);
      const client = await IncidentClient.open(ctx, prefix, INCIDENTS_QUEUE);
      let done: Awaited<ReturnType<IncidentClient['bulk']>>;
      try {
        done = await client.bulk(
          Array.from({ length: n }, (_, i) => `ret-${i}`),
          within(ctx, 240_000, 0.8),
          { label: 'retention' },
        );
      } finally {
        await client.close();
      }
      // Events of the last runs may still be on their way to the stream.
      await new Promise((r) => setTimeout(r, 1_000));
      const patterns = await measureKeys(ctx, prefix);
      const stream = await streamState(ctx, prefix);
      return { done, patterns, stream };
    } finally {
      await cluster.stop();
    }
  });
}

const kb = (b: number) => `${fmt(b / 1024, 2)} KB`;
const gb = (b: number) => `${fmt(b / 1e9, 1)} GB`;

/** Scenario 13; see the file's comment. */
export async function scenarioRetention(ctx: Ctx): Promise<ScenarioResult> {
  const n = ctx.quick ? 500 : 5000;
  const small = ctx.quick ? 100 : 300;
  const result: ScenarioResult = { id: RETENTION_ID, name: 'retention', rows: [], notes: [], data: { n } };
  note(`${RETENTION_ID} retention: ${n} standard runs in bulk, then MEMORY USAGE of every key and the stream's bytes`);
  const base = await runAndMeasure(ctx, n, {});
  const runs = base.done.statuses.completed ?? 0;
  if (runs === 0) throw new Error('no run completed');
  if (base.done.timedOut || runs < n)
    result.notes.push(
      `only ${runs} of ${n} runs completed within the time budget: the keys of the unfinished ones are counted too, so the bytes per run are a little high`,
    );
  const perRun = bytesPerRun(base.patterns, runs);
  const perRunTotal = [...perRun.entries()].filter(([k]) => k !== 'fixed').reduce((a, [, b]) => a + b, 0);
  const streamPerRun = base.stream.bytes / runs;
  const msgsPerRun = base.stream.messages / runs;
  const day = 100_000;
  const retainedDefault = retainedBytesPerRun(perRun, DEFAULTS);
  const retainedHalving = retainedBytesPerRun(perRun, HALVING);
  const forever = [...perRun.entries()].filter(([k]) => DEFAULTS.lifetime[k as Exclude<RetentionKind, 'fixed'>] === null && k !== 'fixed');
  const foreverPerRun = forever.reduce((a, [, b]) => a + b, 0);

  note(`${RETENTION_ID} retention: ${small} runs with retention ${JSON.stringify(HALVING.config)}, to read the lifetimes it sets`);
  const halved = await runAndMeasure(ctx, small, HALVING.config);
  const ttlOf = (ps: PatternBytes[], pattern: string) => ps.find((p) => p.pattern === pattern)?.ttlSeconds ?? NaN;
  const hours = (s: number) => (s < 0 ? 'none' : `${fmt(s / 3600, 1)} h`);

  const byKind = ([...perRun.entries()] as [RetentionKind, number][])
    .filter(([k]) => k !== 'fixed')
    .sort((a, b) => b[1] - a[1])
    .map(([k, b]) => `${k} ${kb(b)}`)
    .join(', ');
  const rows: Row[] = [
    {
      scenario: `${RETENTION_ID} retention (${runs} standard runs)`,
      metric: 'Redis bytes per completed run (MEMORY USAGE), by kind',
      bosun: `${kb(perRunTotal)}: ${byKind}`,
      value: perRunTotal,
      better: 'lower',
      result: 'n/a',
    },
    {
      scenario: '',
      metric: 'JetStream bytes and messages per run (runs stream)',
      bosun: `${kb(streamPerRun)}, ${fmt(msgsPerRun, 1)} messages`,
      value: streamPerRun,
      better: 'lower',
      result: 'n/a',
    },
    {
      scenario: '',
      metric: 'bytes per run retained over 7 days: defaults → setting',
      bosun: `${kb(retainedDefault)} → ${kb(retainedHalving)} (${fmt((100 * retainedHalving) / retainedDefault, 0)} %)`,
      value: retainedHalving / retainedDefault,
      target: '≤ 50 %',
      result: retainedHalving <= retainedDefault / 2 ? 'met' : 'missed',
    },
    {
      scenario: '',
      metric: '100,000 runs a day: Redis memory after 7 days, defaults → setting',
      bosun: `${gb(retainedDefault * day * 7)} (+${gb(foreverPerRun * day)} a day for ever after) → ${gb(retainedHalving * day * 7)} (flat)`,
      value: retainedDefault * day * 7,
      better: 'lower',
      result: 'n/a',
    },
    {
      scenario: '',
      metric: '100,000 runs a day: JetStream disk for 7 days of events; what the default limits keep',
      bosun: `${gb(streamPerRun * day * 7)}, ${fmt((msgsPerRun * day * 7) / 1e6, 1)} M messages; 1 GiB / 1 M messages keep ${fmt(Math.min(1024 ** 3 / (streamPerRun * day), 1e6 / (msgsPerRun * day)) * 24, 1)} h`,
      value: streamPerRun * day * 7,
      better: 'lower',
      result: 'n/a',
    },
    {
      scenario: '',
      metric: `lifetimes with the setting (${halved.done.statuses.completed ?? 0} runs): task checkpoint, call record, run checkpoint`,
      bosun: [
        ttlOf(halved.patterns, 'ckpt:task:<taskId>'),
        ttlOf(halved.patterns, 'toolcall:<key>'),
        ttlOf(halved.patterns, 'ckpt:run:<runId>'),
      ]
        .map(hours)
        .join(', '),
      result: 'n/a',
    },
  ];
  result.rows.push(...rows);
  result.notes.push(
    `by pattern (${runs} runs): ${base.patterns
      .slice(0, 12)
      .map((p) => `${p.pattern} ${p.keys} keys ${kb(p.bytes / runs)}/run ttl ${hours(p.ttlSeconds)}`)
      .join('; ')}`,
    'bytes per retained run: each kind weighted by the share of a 7-day window it is kept; run results are kept for ever by default (their publisher removes them), so the defaults keep growing after the week',
  );
  result.data.patterns = base.patterns;
  result.data.stream = base.stream;
  result.data.perRun = Object.fromEntries(perRun);
  result.data.halvedPatterns = halved.patterns;
  result.data.retained = { defaults: retainedDefault, setting: retainedHalving, setting_config: HALVING.config };
  return result;
}
