#!/usr/bin/env node
/**
 * `npm run bench`: a real Bosun cluster (separate processes) against a raw BullMQ chain.
 * Prints a table and writes bench/results.json. See bench/README.md.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { cpus, totalmem, release, platform } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { SERVICES, assertLoopback, cleanupPrefix, killAllProcessesSync, stopAllProcesses, type ServiceName } from './cluster.js';
import { findProfiles, summarizeProfile, type ProfileSummary } from './profile.js';
import {
  budgetLeft,
  scenarioInFlight,
  scenarioLatency,
  scenarioRecovery,
  scenarioScaleOut,
  scenarioThroughput,
  type CommandStatsReport,
  type Ctx,
  type Row,
  type ScenarioResult,
} from './scenarios.js';
import { scenarioCodeAct } from './scenario-codeact.js';
import { scenarioAdk } from './scenario-adk.js';
import { PEER_SCENARIOS, scenarioPeer } from './peers/scenario.js';
import { PEER_KILL_ID, scenarioPeerKill } from './peers/kill.js';
import { abort, fmt, note } from './util.js';
import { scenarioObservability } from './observability.js';
import { SOAK_ID, scenarioSoak, soakOptions } from './soak.js';
import { assignKeys, compareText, readResults } from './compare.js';
import { TOKENS_ID, scenarioTokens } from './scenario-tokens.js';
import { RETENTION_ID, scenarioRetention } from './scenario-retention.js';

const USAGE = `usage: node bench/dist/main.js [--only 1,3] [--quick] [--throughput-n N] [--inflight-n N] [--scale-cap N] [--profile <service>]
                              [--soak 10m [--soak-rate N]] [--compare old.json [new.json]]
                              [--tool-transport nats|queue]

  --only 1,3           run only these scenarios (1 latency, 2 throughput, 3 many in flight, 4 scale-out, 5 recovery,
                       6 observability cost, 7 codeact, 8 adk: the same incident in-process with @google/adk, 9 soak;
                       the durable peers, installed from bench/peers on first use: 10 LangGraph + PostgreSQL with
                       durability "sync", 11 the same with the default "async", 12 Restate, 13 their kill tests;
                       14 tokens: what the standard incident sends to the model, 15 retention: Redis and JetStream
                       bytes a completed run leaves)
  --soak 10m           run the soak (scenario 9) for that long (90s, 10m, 1h; default 2m): the standard incident
                       at a steady rate, RSS of every process and latency over time; alone unless --only is given
  --soak-rate N        incidents/s during the soak (default 20)
  --compare old.json   after the run, print each figure's change against that results file; with a second file
                       (--compare old.json new.json) compare the two without running anything
  --quick              small counts (30 latency runs, 500 throughput, 200 in flight, 40 recovery; adk and peers 30 + 500;
                       peers' kill tests 2 incidents each)
  --throughput-n N     incidents in scenario 2 (default 5000, quick 500)
  --inflight-n N       incidents at once in scenario 3 (default 2000 then 10000, quick 200)
  --scale-cap N        kubernetes concurrency per specialist process in scenario 4 (default 125, quick 50)
  --profile <service>  run that service (${SERVICES.join(', ')}) under node --cpu-prof; profiles go to
                       bench/profiles/<date>/s<scenario>/ and their top self-time functions are printed
  --tool-transport T   how specialists send tool calls (gateway.transport): nats or queue (default: the
                       demo config's, nats)
  --layout L           split (default: gateway, coordinator and specialists as processes of their own) or
                       colocated (one \`bosun serve\` process per specialist process, hosting all three)

Needs Redis (REDIS_URL, default redis://127.0.0.1:6379) and NATS (NATS_URL, default nats://127.0.0.1:4222)
on 127.0.0.1, and a build (npx tsc -b). Scenarios 10, 11 and 13 need PostgreSQL (BENCH_PG_URL, default
postgres://postgres@127.0.0.1:5432/test); 12 and 13 run the Restate server under unshare (root).`;

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    options: {
      only: { type: 'string' },
      quick: { type: 'boolean', default: false },
      'throughput-n': { type: 'string' },
      layout: { type: 'string' },
      'inflight-n': { type: 'string' },
      'scale-cap': { type: 'string' },
      profile: { type: 'string' },
      soak: { type: 'string' },
      'soak-rate': { type: 'string' },
      compare: { type: 'string' },
      'tool-transport': { type: 'string' },
      help: { type: 'boolean', default: false },
    },
    allowPositionals: true,
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (positionals.length > 0) return compareOnly(values.compare, positionals);
  const oldResults = values.compare === undefined ? undefined : readResults(values.compare);
  const soak =
    values.soak !== undefined || values['soak-rate'] !== undefined
      ? soakOptions(values.soak, values['soak-rate'], values.quick ?? false)
      : undefined;
  const only = values.only
    ? new Set(values.only.split(',').map((s) => Number(s.trim())))
    : new Set(soak ? [] : [1, 2, 3, 4, 5, 6, 8, TOKENS_ID, RETENTION_ID]);
  for (const n of only)
    if (!Number.isInteger(n) || n < 1 || n > RETENTION_ID)
      throw new Error(`--only: "${values.only}" must list scenarios 1 to ${RETENTION_ID} (${SOAK_ID}: the soak)`);
  if (soak) only.add(SOAK_ID);
  const soakRun = soak ?? soakOptions(undefined, undefined, values.quick ?? false);
  const profileService = values.profile as ServiceName | undefined;
  if (profileService !== undefined && !SERVICES.includes(profileService)) throw new Error(`--profile: one of ${SERVICES.join(', ')}`);
  const throughputN = values['throughput-n'] ? Number(values['throughput-n']) : undefined;
  if (throughputN !== undefined && !(Number.isInteger(throughputN) && throughputN > 0 && throughputN <= 20_000))
    throw new Error('--throughput-n: 1 to 20000');
  const inflightN = values['inflight-n'] ? Number(values['inflight-n']) : undefined;
  if (inflightN !== undefined && !(Number.isInteger(inflightN) && inflightN > 0 && inflightN <= 10_000))
    throw new Error('--inflight-n: 1 to 10000');
  const scaleCap = values['scale-cap'] ? Number(values['scale-cap']) : undefined;
  if (scaleCap !== undefined && !(Number.isInteger(scaleCap) && scaleCap > 0 && scaleCap <= 10_000))
    throw new Error('--scale-cap: 1 to 10000');

  const toolTransport = values['tool-transport'];
  if (toolTransport !== undefined && toolTransport !== 'nats' && toolTransport !== 'queue')
    throw new Error('--tool-transport: nats or queue');

  const layout = values.layout ?? 'split';
  if (layout !== 'split' && layout !== 'colocated') throw new Error('--layout: split or colocated');

  const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
  assertLoopback('REDIS_URL', redisUrl);
  assertLoopback('NATS_URL', natsUrl);
  for (const f of [
    'services/tool-gateway/dist/bundle/main.js',
    'services/coordinator/dist/bundle/main.js',
    'services/specialist/dist/bundle/main.js',
    'mcp-servers/demo/dist/bundle/main.js',
  ]) {
    if (!existsSync(join(root, f))) throw new Error(`${f} is missing: build first (npx tsc -b)`);
  }

  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 3, lazyConnect: true });
  await redis.connect().catch((err: unknown) => {
    throw new Error(`Redis at ${redisUrl} does not answer (${(err as Error).message})`, { cause: err });
  });
  let nc: NatsConnection;
  try {
    nc = await connect({ servers: natsUrl.split(','), name: 'bosun-bench', timeout: 5_000 });
  } catch (err) {
    throw new Error(`NATS at ${natsUrl} does not answer (${(err as Error).message})`, { cause: err });
  }
  const started = new Date();
  const ctx: Ctx = {
    root,
    redisUrl,
    natsUrl,
    redis,
    nc,
    quick: values.quick ?? false,
    profile: profileService
      ? { service: profileService, dir: join(root, 'bench', 'profiles', started.toISOString().replace(/[:.]/g, '-')) }
      : undefined,
    prefixes: new Set(),
    // The whole bench stays under 10 minutes: 9.5 for the scenarios, the rest for start-up and clean-up;
    // the soak and the peer scenarios (never in the default run) add their own time.
    deadlineAt:
      started.getTime() +
      (values.quick ? 300_000 : 570_000) +
      (only.has(SOAK_ID) ? soakRun.durationMs + 60_000 : 0) +
      peerBudgetMs(only, values.quick ?? false),
    reserveMs: 0,
    toolTransport,
    layout,
  };

  // SIGINT / SIGTERM: stop every process, clean the prefixes in use, exit.
  let shuttingDown = false;
  const onSignal = (signal: string) => {
    if (shuttingDown) {
      killAllProcessesSync();
      process.exit(130);
    }
    shuttingDown = true;
    abort.requested = true;
    abort.reason = signal;
    note(`${signal}: stopping every process and cleaning up (again to kill at once)`);
    void (async () => {
      await stopAllProcesses(15_000);
      for (const p of ctx.prefixes) {
        const r = await cleanupPrefix(redis, nc, p).catch((err: unknown) => ({ keys: -1, stream: String(err) }));
        note(`cleaned ${p}: ${r.keys} keys deleted, stream ${r.stream}`);
      }
      process.exit(130);
    })();
  };
  process.on('SIGINT', () => onSignal('SIGINT'));
  process.on('SIGTERM', () => onSignal('SIGTERM'));

  const redisVersion = /redis_version:(\S+)/.exec(await redis.info('server'))?.[1] ?? '?';
  const machine = {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? '?',
    memoryMb: Math.round(totalmem() / 1024 / 1024),
    node: process.version,
    platform: `${platform()} ${release()}`,
    redis: redisVersion,
    nats: nc.info?.version ?? '?',
    date: started.toISOString(),
  };
  const source = gitState();
  note(
    `bench on ${machine.cpus} CPUs (${machine.cpuModel}), node ${machine.node}, redis ${machine.redis}, nats ${machine.nats}${ctx.quick ? ' — quick mode' : ''}`,
  );

  const scenarios: [number, () => Promise<ScenarioResult>][] = [
    [1, () => scenarioLatency(ctx)],
    [2, () => scenarioThroughput(ctx, throughputN)],
    [3, () => scenarioInFlight(ctx, inflightN)],
    [4, () => scenarioScaleOut(ctx, scaleCap)],
    [5, () => scenarioRecovery(ctx)],
    [6, () => scenarioObservability(ctx)],
    [7, () => scenarioCodeAct(ctx)],
    // Runs after 1 and 2, and reads Bosun's figures from their results.
    [8, () => scenarioAdk(ctx, results)],
    [SOAK_ID, () => scenarioSoak(ctx, soakRun)],
    // After 1 and 2 as well: Bosun's figures beside each peer's.
    [10, () => scenarioPeer(ctx, 10, results)],
    [11, () => scenarioPeer(ctx, 11, results)],
    [12, () => scenarioPeer(ctx, 12, results)],
    [PEER_KILL_ID, () => scenarioPeerKill(ctx)],
    [TOKENS_ID, () => scenarioTokens(ctx)],
    [RETENTION_ID, () => scenarioRetention(ctx)],
  ];
  const results: ScenarioResult[] = [];
  const errors: { id: number; error: string; skipped?: boolean }[] = [];
  const t0 = Date.now();
  for (const [id, run] of scenarios) {
    if (!only.has(id) || abort.requested) continue;
    // Keep about 35 s for each scenario still to come.
    ctx.reserveMs = 35_000 * scenarios.filter(([later]) => later > id && only.has(later)).length;
    if (budgetLeft(ctx) < 25_000) {
      note(`scenario ${id} skipped: the time budget is spent`);
      errors.push({ id, error: 'skipped: the 10-minute time budget is spent', skipped: true });
      continue;
    }
    const s0 = Date.now();
    try {
      const r = await run();
      r.data.durationMs = Date.now() - s0;
      results.push(r);
      note(`scenario ${id} done in ${((Date.now() - s0) / 1000).toFixed(1)} s`);
    } catch (err) {
      if (abort.requested) break;
      const message = err instanceof Error ? err.message : String(err);
      note(`scenario ${id} failed: ${message}`);
      errors.push({ id, error: message });
      await stopAllProcesses(15_000);
    }
  }
  const totalMs = Date.now() - t0;

  // The report.
  assignKeys(results);
  const rows: Row[] = results.flatMap((r) => r.rows);
  for (const e of errors)
    rows.push({
      scenario: `${e.id} (${e.skipped ? 'skipped' : 'error'})`,
      metric: e.error.split('\n')[0]!.slice(0, 100),
      bosun: '—',
      result: e.skipped ? 'n/a' : 'missed',
    });
  const out: string[] = [];
  out.push('');
  out.push(
    `Bosun bench — ${machine.date} — ${machine.cpus} CPUs ${machine.cpuModel}, node ${machine.node}, redis ${machine.redis}, nats ${machine.nats}${ctx.quick ? ' — QUICK MODE (small counts)' : ''}`,
  );
  out.push(`source: ${source.commit}${source.dirty.length ? ` + uncommitted changes in ${source.dirty.length} file(s)` : ''}`);
  out.push(`floor = a raw BullMQ chain with the same hops and no-op processors, in the same process layout, measured in the same run`);
  out.push('');
  out.push(...table(rows));
  for (const r of results) for (const n of r.notes) out.push(`  [${r.id}] ${n}`);
  const cs = pickCommandStats(results);
  if (cs) out.push('', ...commandStatsText(cs));
  let profiles: ProfileSummary[] = [];
  if (ctx.profile) {
    profiles = findProfiles(ctx.profile.dir).map((f) => summarizeProfile(f, root));
    out.push('', ...profileText(profiles, ctx.profile.service));
  }
  const budgetMs = ctx.deadlineAt - started.getTime() + 30_000; // 10 minutes, and the soak's length
  out.push(
    '',
    `total time ${(totalMs / 1000).toFixed(0)} s${totalMs > budgetMs ? ` — OVER the ${fmt(budgetMs / 60_000, 0)}-minute budget` : ''}`,
  );
  console.log(out.join('\n'));

  const file = join(root, 'bench', 'results.json');
  writeFileSync(
    file,
    `${JSON.stringify(
      {
        machine,
        source,
        args: {
          only: [...only].sort(),
          quick: ctx.quick,
          throughputN: throughputN ?? null,
          inflightN: inflightN ?? null,
          scaleCap: scaleCap ?? null,
          profile: profileService ?? null,
          soak: only.has(SOAK_ID) ? soakRun : null,
          toolTransport: toolTransport ?? null,
          layout,
        },
        totalMs,
        rows,
        scenarios: results.map((r) => ({ id: r.id, name: r.name, rows: r.rows, notes: r.notes, data: r.data })),
        commandStats: cs ?? null,
        profiles,
        errors,
      },
      null,
      2,
    )}\n`,
  );
  note(`wrote ${file}`);
  if (oldResults && values.compare)
    console.log(['', ...compareText(oldResults, readResults(file), { old: values.compare, new: file })].join('\n'));

  // The results are written: a failure to close the connection changes none of them.
  await nc.close().catch(() => undefined);
  redis.disconnect();
  return errors.some((e) => !e.skipped) ? 1 : 0;
}

/** The time the peer scenarios add to the bench's budget: each runs longer than the 35 s a scenario is given. */
function peerBudgetMs(only: ReadonlySet<number>, quick: boolean): number {
  const perf = Object.keys(PEER_SCENARIOS).filter((id) => only.has(Number(id))).length;
  return perf * (quick ? 90_000 : 240_000) + (only.has(PEER_KILL_ID) ? 120_000 : 0);
}

/** `--compare old.json new.json`: the comparison of two files, without a run. */
function compareOnly(old: string | undefined, positionals: string[]): number {
  if (old === undefined || positionals.length !== 1)
    throw new Error(
      `unexpected argument(s) ${positionals.join(' ')}: to compare two files without a run, write --compare old.json new.json`,
    );
  console.log(compareText(readResults(old), readResults(positionals[0]!), { old, new: positionals[0]! }).join('\n'));
  return 0;
}

/** The commit measured, and the files that differ from it (services built from a dirty tree). */
function gitState(): { commit: string; dirty: string[] } {
  try {
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
    const dirty = execFileSync(
      'git',
      ['status', '--porcelain', '--untracked-files=normal', '--', 'libs', 'services', 'mcp-servers', 'bench'],
      { cwd: root, encoding: 'utf8' },
    )
      .split('\n')
      .filter(Boolean)
      .map((l) => l.slice(3));
    return { commit, dirty };
  } catch {
    return { commit: 'unknown (no git)', dirty: [] };
  }
}

function table(rows: Row[]): string[] {
  const head = ['scenario', 'metric', 'bosun', 'floor (raw)', 'ratio', 'target', 'result'];
  const cells = rows.map((r) => [
    r.scenario,
    r.metric,
    r.bosun,
    r.floor ?? '',
    r.ratio ?? '',
    r.target ?? '',
    r.result === 'n/a' || !r.result ? '' : r.result.toUpperCase(),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => `| ${c.map((x, i) => (i >= 2 && i <= 4 ? x.padStart(widths[i]!) : x.padEnd(widths[i]!))).join(' | ')} |`;
  return [line(head), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...cells.map(line)];
}

function pickCommandStats(results: ScenarioResult[]): CommandStatsReport | undefined {
  return results.find((r) => r.id === 2)?.commandStats ?? results.find((r) => r.id === 1)?.commandStats;
}

function commandStatsText(cs: CommandStatsReport): string[] {
  const out = [
    `Redis commands per incident — ${cs.source}; INFO commandstats delta (server-wide: includes commands run inside Lua scripts, the bench's own client, and any other client of this Redis)`,
    `  total: ${fmt(cs.totalCalls / cs.incidents, 1)} calls/incident${cs.raw ? ` (raw chain: ${fmt(cs.raw.perIncident, 1)}, ${fmt(cs.totalCalls / cs.incidents / cs.raw.perIncident, 2)}×)` : ''}`,
    `  ${'command'.padEnd(18)} ${'calls/incident'.padStart(14)} ${'µs/incident'.padStart(12)}${cs.raw ? `   ${'raw chain'.padStart(10)}` : ''}`,
  ];
  for (const t of cs.top) {
    const raw = cs.raw?.top.find((r) => r.command === t.command);
    out.push(
      `  ${t.command.padEnd(18)} ${fmt(t.perIncident, 2).padStart(14)} ${fmt(t.usecPerIncident, 0).padStart(12)}${cs.raw ? `   ${(raw ? fmt(raw.perIncident, 2) : '—').padStart(10)}` : ''}`,
    );
  }
  return out;
}

function profileText(profiles: ProfileSummary[], service: string): string[] {
  if (profiles.length === 0) return [`no CPU profile of ${service} was written`];
  const out: string[] = [];
  for (const p of profiles) {
    out.push(
      `CPU profile ${p.file.replace(`${root}/`, '')}: ${fmt(p.totalMs / 1000, 1)} s, idle ${fmt(p.idleMs / 1000, 1)} s, busy ${fmt((p.totalMs - p.idleMs) / 1000, 1)} s`,
    );
    out.push(`  self time by module (% of busy): ${p.byModule.map((m) => `${m.module} ${fmt(m.pct, 1)}%`).join(', ')}`);
    out.push(
      `  same, native and node: frames charged to their caller: ${p.byCaller.map((m) => `${m.module} ${fmt(m.pct, 1)}%`).join(', ')}`,
    );
    out.push(`  top self-time functions:`);
    out.push(`  ${'self ms'.padStart(9)} ${'%busy'.padStart(6)}  function`);
    for (const t of p.top) out.push(`  ${fmt(t.selfMs, 0).padStart(9)} ${fmt(t.pct, 1).padStart(6)}  ${t.fn}  ${t.where}`);
    out.push(`  self time charged to the nearest Bosun function on the stack (which Bosun code causes it):`);
    for (const t of p.byBosunFrame) out.push(`  ${fmt(t.selfMs, 0).padStart(9)} ${fmt(t.pct, 1).padStart(6)}  ${t.frame}`);
  }
  return out;
}

process.on('exit', killAllProcessesSync);
main().then(
  (code) => process.exit(code),
  async (err: unknown) => {
    process.stderr.write(`bench: ${err instanceof Error ? err.message : String(err)}\n`);
    await stopAllProcesses(15_000);
    process.exit(1);
  },
);
