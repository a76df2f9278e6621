/**
 * `--compare <old results.json>`: the change of every figure found in two results files, and
 * whether it is better or worse given the figure's direction, so that a regression shows in a
 * review. Everything but `readResults` is pure. See bench/README.md, "Comparing two runs".
 */
import { readFileSync } from 'node:fs';
import type { Row } from './scenarios.js';
import { fmt } from './util.js';

/** A change smaller than this (in %) is reported as `same`: the noise of one run on a shared machine. */
export const SAME_PCT = 5;

/**
 * Figures near zero whose % change means little, judged on their absolute change instead: the
 * soak's RSS slopes (MB/min). Keyed by the start of the figure's key.
 */
export const ABSOLUTE_SAME: readonly { prefix: string; within: number }[] = [{ prefix: '9:rss slope:', within: 0.5 }];

/** One comparable number of a results file. */
export interface Figure {
  key: string;
  label: string;
  value: number;
  /** As printed (the table's cell), for the report. */
  text: string;
  better?: 'higher' | 'lower' | undefined;
}

export type Verdict = 'better' | 'worse' | 'same' | 'changed';

export interface Change {
  key: string;
  label: string;
  old: Figure;
  new: Figure;
  /** (new − old) / |old| in %; NaN when old is 0 and new is not. */
  pct: number;
  verdict: Verdict;
}

/** The parts of bench/results.json that a comparison reads (every one optional in an old file). */
interface ResultsDoc {
  machine?: { date?: string; cpus?: number; cpuModel?: string };
  source?: { commit?: string; dirty?: unknown[] };
  args?: Record<string, unknown>;
  scenarios: { id: number; name?: string; rows?: Row[]; data?: Record<string, unknown> }[];
  commandStats?: { totalCalls?: number; incidents?: number; source?: string } | null;
}

/**
 * A row's key: its scenario and its metric in lower case, without the parenthesized or bracketed
 * parts that hold numbers (counts that move from run to run: `(peak active 125)`, `[52/52 runs]`).
 */
export function rowKey(scenarioId: number, metric: string): string {
  const words = metric
    .replace(/\s*[([][^()[\]]*\d[^()[\]]*[)\]]/g, '')
    .replace(/\s+/g, ' ')
    .trim()
    .toLowerCase();
  return `${scenarioId}:${words}`;
}

/** Gives every row of these scenarios a key (`rowKey`, `#2`… on a repeat) unless it has one. */
export function assignKeys(scenarios: readonly { id: number; rows: Row[] }[]): void {
  for (const s of scenarios) {
    const seen = new Set<string>();
    for (const row of s.rows) {
      const base = row.key ?? rowKey(s.id, row.metric);
      let key = base;
      for (let i = 2; seen.has(key); i++) key = `${base}#${i}`;
      seen.add(key);
      row.key = key;
    }
  }
}

/**
 * The number a table cell stands for: `32.7` → 32.7, `2.26×` → 2.26, `297 (+194)` → 297,
 * `300/300` → 1 (a share), `18.7 − 14.0 = 4.7` → 4.7 (the result); NaN when there is none (`—`).
 */
export function parseFigure(text: unknown): number {
  if (typeof text !== 'string') return Number.NaN;
  const t = text.trim();
  const eq = t.lastIndexOf('=');
  if (eq >= 0) return parseFigure(t.slice(eq + 1));
  const share = /^(\d+)\/(\d+)$/.exec(t);
  if (share) return Number(share[2]) > 0 ? Number(share[1]) / Number(share[2]) : Number.NaN;
  const lead = /^[-+]?\d+(\.\d+)?/.exec(t);
  return lead ? Number(lead[0]) : Number.NaN;
}

/**
 * Which way is better for a row: its own `better`, else its target (`≤`/`<` lower, `≥`/`>`/`all`
 * higher), else its metric's words (rates and completions higher; times, sizes, CPU and counts of
 * calls lower); undefined when none of those says.
 */
export function direction(row: Pick<Row, 'metric' | 'target' | 'better'>): 'higher' | 'lower' | undefined {
  if (row.better) return row.better;
  const target = (row.target ?? '').trim();
  if (/^[≤<]/.test(target)) return 'lower';
  if (/^[≥>]/.test(target) || target === 'all') return 'higher';
  const m = row.metric.toLowerCase();
  if (/incidents\/s|completed|throughput/.test(m)) return 'higher';
  if (/\(ms|\(s\)|\bms\b|rss|\bmb\b|\bkb\b|cpu|latency|time|µs|slope|calls|syscalls/.test(m)) return 'lower';
  return undefined;
}

/** Checks that `doc` is a bench results file; throws a message that names `name` otherwise. */
export function asResults(doc: unknown, name: string): ResultsDoc {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc))
    throw new Error(`${name}: not a bench results file (not a JSON object)`);
  const scenarios = (doc as { scenarios?: unknown }).scenarios;
  if (!Array.isArray(scenarios))
    throw new Error(`${name}: not a bench results file (no "scenarios" list; bench/results.json as written by npm run bench has one)`);
  const ok = scenarios.filter(
    (s): s is ResultsDoc['scenarios'][number] => typeof s === 'object' && s !== null && typeof (s as { id?: unknown }).id === 'number',
  );
  return { ...(doc as Omit<ResultsDoc, 'scenarios'>), scenarios: ok };
}

/** Every comparable figure of a results file, by key: each row's value and ratio, Redis calls and CPU per incident. */
export function figures(doc: ResultsDoc): Map<string, Figure> {
  const out = new Map<string, Figure>();
  const add = (f: Figure) => {
    if (Number.isFinite(f.value) && !out.has(f.key)) out.set(f.key, f);
  };
  for (const s of doc.scenarios) {
    const rows = Array.isArray(s.rows) ? (s.rows as unknown[]).filter(isRow) : [];
    const copy = rows.map((r) => ({ ...r }));
    assignKeys([{ id: s.id, rows: copy }]);
    for (const r of copy) {
      const label = `${s.id} ${r.metric.replace(/\s*[([][^()[\]]*\d[^()[\]]*[)\]]/g, '')}`;
      const better = direction(r);
      add({ key: r.key!, label, value: typeof r.value === 'number' ? r.value : parseFigure(r.bosun), text: r.bosun, better });
      add({ key: `${r.key!} (ratio)`, label: `${label} (ratio)`, value: parseFigure(r.ratio), text: r.ratio ?? '', better });
    }
    if (s.id === 2) for (const f of cpuFigures(s.data)) add(f);
  }
  const cs = doc.commandStats;
  if (cs && typeof cs.totalCalls === 'number' && typeof cs.incidents === 'number' && cs.incidents > 0) {
    const v = cs.totalCalls / cs.incidents;
    // Scenario 2 (bulk) and 1 (sequential) count differently: the key says which.
    const from = /^scenario (\d+)/.exec(cs.source ?? '')?.[1] ?? '?';
    add({
      key: `redis:calls per incident:${from}`,
      label: `${from} Redis commands per incident`,
      value: v,
      text: fmt(v, 1),
      better: 'lower',
    });
  }
  return out;
}

function isRow(r: unknown): r is Row {
  return typeof r === 'object' && r !== null && typeof (r as { metric?: unknown }).metric === 'string';
}

/** Scenario 2's CPU ms per incident by process (the steadiest figure on a shared machine). */
function cpuFigures(data: Record<string, unknown> | undefined): Figure[] {
  const bosun = data?.bosun as
    { cpu?: { cpuSeconds?: Record<string, unknown> }; statuses?: Record<string, unknown>; failed?: unknown } | undefined;
  const seconds = bosun?.cpu?.cpuSeconds;
  if (!seconds || typeof seconds !== 'object') return [];
  const finished =
    Object.values(bosun.statuses ?? {}).reduce<number>((a, v) => a + (typeof v === 'number' ? v : 0), 0) +
    (typeof bosun.failed === 'number' ? bosun.failed : 0);
  if (finished <= 0) return [];
  return Object.entries(seconds)
    .filter((e): e is [string, number] => typeof e[1] === 'number' && e[0] !== 'bench (this process)')
    .map(([proc, s]) => ({
      key: `2:cpu ms per incident:${proc}`,
      label: `2 CPU ms per incident, ${proc}`,
      value: (1000 * s) / finished,
      text: fmt((1000 * s) / finished, 2),
      better: 'lower' as const,
    }));
}

/** Better, worse or the same, given the direction; `changed` when the figure has none. */
export function verdict(key: string, old: number, now: number, better: Figure['better']): { pct: number; verdict: Verdict } {
  const pct = old === now ? 0 : old === 0 ? Number.NaN : (100 * (now - old)) / Math.abs(old);
  const absolute = ABSOLUTE_SAME.find((a) => key.startsWith(a.prefix));
  const same = absolute ? Math.abs(now - old) < absolute.within : Math.abs(pct) < SAME_PCT;
  if (same) return { pct, verdict: 'same' };
  if (!better) return { pct, verdict: 'changed' };
  return { pct, verdict: now > old === (better === 'higher') ? 'better' : 'worse' };
}

/** Pairs the figures of two files by key: the changes, and what only one of them has. */
export function compareFigures(
  old: Map<string, Figure>,
  now: Map<string, Figure>,
): { changes: Change[]; onlyOld: Figure[]; onlyNew: Figure[] } {
  const changes: Change[] = [];
  for (const [key, n] of now) {
    const o = old.get(key);
    if (!o) continue;
    changes.push({ key, label: n.label, old: o, new: n, ...verdict(key, o.value, n.value, n.better ?? o.better) });
  }
  return {
    changes,
    onlyOld: [...old.values()].filter((f) => !now.has(f.key)),
    onlyNew: [...now.values()].filter((f) => !old.has(f.key)),
  };
}

const ARROW = (c: Change) => (c.new.value > c.old.value ? '↑' : c.new.value < c.old.value ? '↓' : '=');

/** The comparison as text: a header per file, a table of changes, a summary line, and what did not match. */
export function compareText(oldDoc: ResultsDoc, newDoc: ResultsDoc, names: { old: string; new: string }): string[] {
  const { changes, onlyOld, onlyNew } = compareFigures(figures(oldDoc), figures(newDoc));
  const out = [`Comparison — old: ${describe(oldDoc, names.old)}`, `             new: ${describe(newDoc, names.new)}`];
  const differs = ['quick', 'throughputN', 'scaleCap', 'profile', 'soak'].filter(
    (k) => JSON.stringify(oldDoc.args?.[k] ?? null) !== JSON.stringify(newDoc.args?.[k] ?? null),
  );
  if (differs.length)
    out.push(
      `  the runs were made with other arguments (${differs.map((k) => `${k}: ${JSON.stringify(oldDoc.args?.[k] ?? null)} → ${JSON.stringify(newDoc.args?.[k] ?? null)}`).join(', ')}): counts differ`,
    );
  if (changes.length === 0) {
    const ids = (d: ResultsDoc) => d.scenarios.map((s) => s.id).join(',') || 'none';
    out.push(`  no figure in common (old has scenarios ${ids(oldDoc)}, new has ${ids(newDoc)}): nothing to compare`);
  } else {
    const head = ['figure', 'old', 'new', 'change', ''];
    const cells = changes.map((c) => [
      c.label,
      c.old.text,
      c.new.text,
      Number.isFinite(c.pct) ? `${c.pct >= 0 ? '+' : ''}${fmt(c.pct, 1)} %` : 'n/a',
      `${ARROW(c)} ${c.verdict}`,
    ]);
    const w = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
    const line = (c: string[]) => `| ${c.map((x, i) => (i >= 1 && i <= 3 ? x.padStart(w[i]!) : x.padEnd(w[i]!))).join(' | ')} |`;
    out.push(line(head), `|${w.map((x) => '-'.repeat(x + 2)).join('|')}|`, ...cells.map(line));
    const count = (v: Verdict) => changes.filter((c) => c.verdict === v);
    const worse = count('worse');
    out.push(
      `${worse.length} worse, ${count('better').length} better, ${count('same').length} the same (within ${SAME_PCT} %), ${count('changed').length} changed with no direction`,
    );
    if (worse.length) out.push(`  worse: ${worse.map((c) => c.label).join('; ')}`);
  }
  if (onlyOld.length) out.push(`  only in old (not measured now): ${onlyOld.map((f) => f.label).join('; ')}`);
  if (onlyNew.length) out.push(`  only in new: ${onlyNew.map((f) => f.label).join('; ')}`);
  return out;
}

function describe(doc: ResultsDoc, name: string): string {
  const dirty = Array.isArray(doc.source?.dirty) && doc.source.dirty.length ? ' (+ uncommitted changes)' : '';
  return `${name}, ${doc.machine?.date ?? 'undated'}, commit ${doc.source?.commit ?? '?'}${dirty}, ${doc.machine?.cpus ?? '?'} CPUs${doc.args?.quick ? ', quick' : ''}`;
}

/** Reads and checks a results file; clear errors for a missing file, bad JSON or another shape. */
export function readResults(path: string): ResultsDoc {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`--compare: cannot read ${path} (${(err as Error).message})`, { cause: err });
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new Error(`--compare: ${path} is not JSON (${(err as Error).message})`, { cause: err });
  }
  return asResults(doc, path);
}
