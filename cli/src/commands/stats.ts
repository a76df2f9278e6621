/** `bosun stats [--json]`: the degraded-result counters and the dropped events. */
import { keys } from '@bosun/transport';
import { defineRedisCommand } from '../command.js';
import type { OperatorDeps } from '../operator.js';
import { printJson, printText } from '../terminal.js';

/** `bosun stats`. */
export interface Stats {
  /** Degraded results per agent and kind, most first. */
  degraded: { agent: string; kind: string; count: number }[];
  /** Events dropped (NATS unreachable with a full buffer, or sequencing failed). */
  dropped: number;
}

/** The counters: a hash `<agent>:<kind>` → count, and the `dropped` field of the event counters. */
export async function readStats(deps: OperatorDeps): Promise<Stats> {
  const [raw, dropped] = await Promise.all([
    deps.redis.hgetall(keys.degraded(deps.prefix)),
    deps.redis.hget(keys.events(deps.prefix), 'dropped'),
  ]);
  const degraded = Object.entries(raw).map(([field, count]) => {
    const i = field.lastIndexOf(':');
    return { agent: i < 0 ? field : field.slice(0, i), kind: i < 0 ? '?' : field.slice(i + 1), count: Number(count) };
  });
  degraded.sort((a, b) => b.count - a.count || a.agent.localeCompare(b.agent) || a.kind.localeCompare(b.kind));
  return { degraded, dropped: Number(dropped ?? 0) };
}

/** The text of `bosun stats`. */
export function formatStats(stats: Stats): string {
  const lines = ['degraded results'];
  if (stats.degraded.length === 0) lines.push('  none');
  else {
    const w = Math.max(5, ...stats.degraded.map((d) => d.agent.length));
    lines.push(`  ${'agent'.padEnd(w)}  ${'kind'.padEnd(9)} count`);
    for (const d of stats.degraded) lines.push(`  ${d.agent.padEnd(w)}  ${d.kind.padEnd(9)} ${d.count}`);
  }
  lines.push('', `events dropped: ${stats.dropped}`);
  return lines.join('\n');
}

export const statsCommand = defineRedisCommand({
  name: 'stats',
  usage: '  bosun stats [--json]              degraded-result counters and dropped events',
  options: { json: { type: 'boolean', default: false } },
  positionals: 0,
  check: ({ values }) => ({ json: values.json }),
  async handler({ json }, deps) {
    const stats = await readStats(deps);
    if (json) printJson(stats);
    else printText(formatStats(stats));
    return 0;
  },
});
