/**
 * Scenario 13: the kill test of each durable peer. A worker process runs a few incidents whose
 * plan is get_pods → restart_pod (the demo server's mutating tool, its `reason` the incident's
 * key) → get_logs → answer, with every demo tool call taking 1 s. Once the demo server's call
 * log shows every incident's restart_pod inside the server, the worker is SIGKILLed (its MCP
 * server ends with it: its stdin closes), a new worker is started, and the framework resumes
 * each run as it is meant to:
 *
 * - LangGraph: the new worker calls `invoke(null, { thread_id })` on each thread whose last
 *   checkpoint has a next step (LangGraph does not know which threads were in flight: the
 *   caller must; the bench passes the keys), in the same durability mode;
 * - Restate: the server retries each invocation against the endpoint, which comes back on the
 *   same port; the bench waits on `/restate/invocation/<id>/attach`.
 *
 * The independent counter is the demo server's call log (`DEMO_MCP_CALL_LOG`, one line written
 * synchronously when a call reaches the tool's handler, the counter of
 * test/chaos/kill-specialist.test.ts): restart_pod calls per key. Bosun's figure is 1 per key;
 * a peer that sends the interrupted call again shows 2.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ManagedProcess } from '../cluster.js';
import type { Ctx, Row, ScenarioResult } from '../scenarios.js';
import { fmt, note, sleep } from '../util.js';
import { pgUrl, startWorker } from './drivers.js';
import type { PgPool } from './langgraph.js';
import { ensurePeers, peerModule, peerVersion } from './load.js';
import { KILL_TOOL, checkOutcome, effectsPerKeyFile, killCalls, peerIncident, type PeerIncident, type PeerOutcome } from './plan.js';
import { RestateServer, attachInvocation, freePort, sendIncident } from './restate.js';
import type { WorkerLine } from './worker.js';

/** The scenario's number. */
export const PEER_KILL_ID = 13;

/** Milliseconds every demo tool call takes in the kill test: the window in which the kill lands. */
export const KILL_SLOW_MS = 1_000;

/** What one peer's kill test found. */
export interface KillResult {
  peer: string;
  keys: string[];
  /** restart_pod calls that reached the demo server, per key. */
  effects: Record<string, number>;
  /** How each run ended after the restart, per key (LangGraph: resumed / started again). */
  how: Record<string, string>;
  completed: number;
  /**
   * Runs whose result is not the planned one (a call missing or repeated in the history, no
   * answer), with what is wrong: a finding of the test, not an error of the bench.
   */
  wrong: Record<string, string>;
  /** SIGKILL → last result, ms. */
  recoveryMs: number;
  /** restart_pod calls per key seen when the kill was sent. */
  atKill: Record<string, number>;
}

/** Waits until the call log shows `tool` for every key (the calls are inside the MCP server). */
async function untilAllInside(callLog: string, keys: string[], timeoutMs: number, worker: ManagedProcess): Promise<Map<string, number>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const counts = effectsPerKeyFile(callLog, keys);
    if ([...counts.values()].every((c) => c >= 1)) return counts;
    if (!worker.proc.running) throw new Error(`the worker exited before every ${KILL_TOOL} call began: ${worker.describe()}`);
    if (Date.now() > deadline)
      throw new Error(`not every ${KILL_TOOL} call reached the MCP server within ${timeoutMs} ms: ${worker.describe()}`);
    await sleep(20);
  }
}

/** Collects a LangGraph worker's `done` lines until `finished`, an error or its exit. */
function collect(lines: WorkerLine[], worker: ManagedProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  return (async () => {
    for (;;) {
      const error = lines.find((l) => l.peer === 'error');
      if (error && error.peer === 'error') throw new Error(`the restarted worker failed: ${error.message.split('\n')[0]}`);
      if (lines.some((l) => l.peer === 'finished')) return;
      if (!worker.proc.running) throw new Error(`the restarted worker exited before finishing: ${worker.describe()}`);
      if (Date.now() > deadline) throw new Error(`the restarted worker did not finish within ${timeoutMs} ms: ${worker.describe()}`);
      await sleep(50);
    }
  })();
}

function summarize(
  peer: string,
  incidents: PeerIncident[],
  callLog: string,
  outcomes: Map<string, { how: string; outcome: PeerOutcome }>,
  killedAt: number,
  atKill: Map<string, number>,
): KillResult {
  const keys = incidents.map((i) => i.id);
  const wrong: Record<string, string> = {};
  for (const i of incidents) {
    const o = outcomes.get(i.id);
    if (!o) throw new Error(`${peer}: run ${i.id} has no result after the restart`);
    try {
      checkOutcome(i.id, i, o.outcome);
    } catch (err) {
      wrong[i.id] = `${(err as Error).message} (${o.how}; answer "${o.outcome.answer.slice(0, 60)}")`;
    }
  }
  return {
    peer,
    keys,
    wrong,
    effects: Object.fromEntries(effectsPerKeyFile(callLog, keys)),
    how: Object.fromEntries([...outcomes].map(([k, v]) => [k, v.how])),
    completed: outcomes.size,
    recoveryMs: Date.now() - killedAt,
    atKill: Object.fromEntries(atKill),
  };
}

/** The kill test of LangGraph in one durability mode. */
export async function killLangGraph(root: string, durability: 'sync' | 'async', k: number): Promise<KillResult> {
  const peer = `LangGraph (durability ${durability})`;
  const tag = randomBytes(5).toString('hex');
  const dir = mkdtempSync(join(tmpdir(), 'bosun-bench-kill-'));
  const callLog = join(dir, 'calls.jsonl');
  const incidents = Array.from({ length: k }, (_, i) =>
    peerIncident(`kill-lg-${durability}-${tag}-${i}`, killCalls(`kill-lg-${durability}-${tag}-${i}`)),
  );
  const base = {
    kind: 'langgraph' as const,
    root,
    pgUrl: pgUrl(),
    schema: `bosun_bench_${tag}`,
    appName: `bosun-bench-${tag}`,
    durability,
    incidents,
  };
  const mcpEnv = { DEMO_MCP_CALL_LOG: callLog, DEMO_MCP_SLOW_MS: String(KILL_SLOW_MS) };
  const workers: ManagedProcess[] = [];
  try {
    const first: WorkerLine[] = [];
    const w1 = await startWorker(root, 'langgraph-worker-1', { ...base, mode: 'run', mcpEnv }, (l) => first.push(l));
    workers.push(w1);
    const atKill = await untilAllInside(
      callLog,
      base.incidents.map((i) => i.id),
      60_000,
      w1,
    );
    await w1.kill();
    const killedAt = Date.now();
    if (first.some((l) => l.peer === 'done')) throw new Error(`${peer}: a run ended before the kill; the kill did not land mid-call`);
    const second: WorkerLine[] = [];
    const w2 = await startWorker(root, 'langgraph-worker-2', { ...base, mode: 'resume', mcpEnv }, (l) => second.push(l));
    workers.push(w2);
    await collect(second, w2, 90_000);
    const outcomes = new Map<string, { how: string; outcome: PeerOutcome }>();
    for (const l of second) if (l.peer === 'done') outcomes.set(l.key, { how: l.how, outcome: l.outcome });
    return summarize(peer, incidents, callLog, outcomes, killedAt, atKill);
  } finally {
    await Promise.all(workers.map((w) => w.stop(10_000)));
    const pg = peerModule<{ Pool: new (c: { connectionString: string; max: number }) => PgPool }>(root, 'pg');
    const monitor = new pg.Pool({ connectionString: base.pgUrl, max: 1 });
    try {
      await monitor.query(`DROP SCHEMA IF EXISTS "${base.schema}" CASCADE`);
    } finally {
      await monitor.end();
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The kill test of Restate: the endpoint process is killed; the server retries on the restarted one. */
export async function killRestate(root: string, k: number): Promise<KillResult> {
  const peer = 'Restate';
  const tag = randomBytes(5).toString('hex');
  const dir = mkdtempSync(join(tmpdir(), 'bosun-bench-kill-'));
  const callLog = join(dir, 'calls.jsonl');
  const incidents = Array.from({ length: k }, (_, i) => peerIncident(`kill-rs-${tag}-${i}`, killCalls(`kill-rs-${tag}-${i}`)));
  const mcpEnv = { DEMO_MCP_CALL_LOG: callLog, DEMO_MCP_SLOW_MS: String(KILL_SLOW_MS) };
  let server: RestateServer | undefined;
  const workers: ManagedProcess[] = [];
  try {
    server = await RestateServer.start({ root, dir, fsync: true });
    const port = await freePort();
    const spec = { kind: 'restate' as const, root, port, mcpEnv };
    const w1 = await startWorker(root, 'restate-endpoint-1', spec);
    workers.push(w1);
    await server.register(`http://127.0.0.1:${port}`);
    const ids = await Promise.all(incidents.map((i) => sendIncidentRetrying(server!, i)));
    const atKill = await untilAllInside(
      callLog,
      incidents.map((i) => i.id),
      60_000,
      w1,
    );
    await w1.kill();
    const killedAt = Date.now();
    workers.push(await startWorker(root, 'restate-endpoint-2', spec));
    const results = await Promise.all(ids.map((id) => attachInvocation(server!.ingressUrl, id, 120_000)));
    const outcomes = new Map(incidents.map((i, n) => [i.id, { how: 'retried by the server', outcome: results[n]! }]));
    return summarize(peer, incidents, callLog, outcomes, killedAt, atKill);
  } finally {
    await Promise.all(workers.map((w) => w.stop(10_000)));
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `/send`, again while the ingress does not know the just-registered service yet. */
async function sendIncidentRetrying(server: RestateServer, incident: PeerIncident): Promise<string> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      return await sendIncident(server.ingressUrl, incident, incident.id);
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(100);
    }
  }
}

/** `a ×3, b ×2`: how often each value occurs. */
function tally(values: readonly string[]): string {
  const counts = new Map<string, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  return [...counts].map(([v, n]) => `${v} ×${n}`).join(', ');
}

/** The rows of one peer's kill test. */
export function killRows(r: KillResult, first: boolean): Row[] {
  const counts = r.keys.map((k) => r.effects[k] ?? 0);
  const duplicated = counts.filter((c) => c > 1).length;
  const label = first ? `${PEER_KILL_ID} kill test: SIGKILL the worker while ${KILL_TOOL} is in the MCP server — ${r.peer}` : `— ${r.peer}`;
  return [
    {
      scenario: label,
      metric: `runs completed after the restart (${r.keys.length} in flight at the kill)`,
      bosun: '—',
      floor: `${r.completed}/${r.keys.length}`,
      result: 'n/a',
    },
    {
      scenario: '',
      metric: `${KILL_TOOL} calls per key that reached the MCP server (demo call log); Bosun: 1 (test/chaos/kill-specialist)`,
      bosun: '1',
      floor: counts.join(', '),
      value: Math.max(...counts),
      better: 'lower',
      result: 'n/a',
    },
    {
      scenario: '',
      metric: 'keys whose effect ran twice or more',
      bosun: '0',
      floor: `${duplicated}/${r.keys.length}`,
      value: duplicated,
      better: 'lower',
      result: 'n/a',
    },
    {
      scenario: '',
      metric: 'results that are not the planned run (a call missing from or repeated in the history, or no answer)',
      bosun: '0',
      floor: `${Object.keys(r.wrong).length}/${r.keys.length}`,
      value: Object.keys(r.wrong).length,
      better: 'lower',
      result: 'n/a',
    },
    { scenario: '', metric: 'SIGKILL → every result (s)', bosun: '—', floor: fmt(r.recoveryMs / 1000, 1), result: 'n/a' },
  ];
}

/** Scenario 13: the kill tests of LangGraph (sync and async) and Restate. */
export async function scenarioPeerKill(ctx: Ctx): Promise<ScenarioResult> {
  ensurePeers(ctx.root);
  const k = ctx.quick ? 2 : 5;
  const results: KillResult[] = [];
  for (const run of [() => killLangGraph(ctx.root, 'sync', k), () => killLangGraph(ctx.root, 'async', k), () => killRestate(ctx.root, k)]) {
    const r = await run();
    note(
      `${PEER_KILL_ID} kill ${r.peer}: ${r.completed}/${r.keys.length} completed; ${KILL_TOOL} per key ${r.keys.map((key) => r.effects[key]).join(', ')}`,
    );
    results.push(r);
  }
  const versions = [
    '@langchain/langgraph',
    '@langchain/langgraph-checkpoint-postgres',
    '@restatedev/restate-server',
    '@restatedev/restate-sdk',
  ]
    .map((p) => `${p} ${peerVersion(ctx.root, p)}`)
    .join(', ');
  return {
    id: PEER_KILL_ID,
    name: 'peers-kill',
    rows: results.flatMap((r, i) => killRows(r, i === 0)),
    notes: [
      `${PEER_KILL_ID}: ${versions}; ${k} incidents per peer, every demo tool call ${KILL_SLOW_MS} ms, one SIGKILL once every ${KILL_TOOL} call was in the MCP server, then a new worker`,
      ...results.map(
        (r) =>
          `${PEER_KILL_ID} ${r.peer}: after the restart ${tally(Object.values(r.how))}; ${KILL_TOOL} calls per key when the kill was sent: ${Object.values(r.atKill).join(', ')}${
            Object.keys(r.wrong).length ? `; not the planned run: ${Object.values(r.wrong).join('; ')}` : ''
          }`,
      ),
    ],
    data: { k, slowMs: KILL_SLOW_MS, results },
  };
}
