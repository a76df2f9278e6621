/**
 * The peers as the scenarios drive them: LangGraph.js with its PostgreSQL checkpointer in the
 * bench process, Restate as a server process and an endpoint process. Each driver runs one
 * incident to its end and names the processes whose CPU counts for it.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManagedProcess, pidStatusKb, childPids } from '../cluster.js';
import { sleep } from '../util.js';
import { peerModule, peerVersion } from './load.js';
import { startLangGraph, type Durability, type LangGraphHarness, type PgPool } from './langgraph.js';
import { CpuMeter, childrenSource, postgresSources, processSource, selfSource, type CpuSource } from './meter.js';
import type { PeerIncident, PeerOutcome } from './plan.js';
import { RestateIngressError, RestateServer, freePort, invokeIncident } from './restate.js';
import type { WorkerLine, WorkerSpec } from './worker.js';

/** One peer, started, as the scenarios measure it. */
export interface PeerDriver {
  /** Runs one incident to its end. */
  run(incident: PeerIncident): Promise<PeerOutcome>;
  /** Starts a CPU meter over every process that counts for the peer (its servers and databases included). */
  meter(): Promise<PeerMeter>;
  /** VmRSS (kB) of each process (or group) that counts, now. */
  rssKb(): Record<string, number>;
  /** The versions tested, for the notes. */
  readonly versions: Record<string, string>;
  close(): Promise<void>;
}

/** A started meter: `stop()` gives CPU seconds per process label, those that count and those reported apart. */
export interface PeerMeter {
  stop(): Promise<{ wallS: number; counted: Record<string, number>; apart: Record<string, number> }>;
}

/** `postgres://postgres@127.0.0.1:5432/test` unless BENCH_PG_URL says otherwise (loopback only). */
export function pgUrl(): string {
  const url = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const host = new URL(url).hostname;
  if (!['127.0.0.1', 'localhost', '[::1]', '::1'].includes(host))
    throw new Error(`BENCH_PG_URL: ${host} is not the loopback — the bench only talks to a local PostgreSQL`);
  return url;
}

interface PgModule {
  Pool: new (config: { connectionString: string; application_name: string; max: number }) => PgPool;
}

/** LangGraph + PostgresSaver in this process; every run on a new thread of a schema the driver creates and drops. */
export async function langGraphDriver(o: { root: string; durability: Durability; pgOptions?: string }): Promise<PeerDriver> {
  const tag = randomBytes(5).toString('hex');
  const schema = `bosun_bench_${tag}`;
  const appName = `bosun-bench-${tag}`;
  const url = pgUrl();
  const pg = peerModule<PgModule>(o.root, 'pg');
  const monitor = new pg.Pool({ connectionString: url, application_name: `${appName}-monitor`, max: 1 });
  const dropSchema = async () => {
    try {
      await monitor.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    } finally {
      await monitor.end();
    }
  };
  let h: LangGraphHarness | undefined;
  let serverVersion: string;
  let pgSources: Awaited<ReturnType<typeof postgresSources>>;
  try {
    h = await startLangGraph({
      root: o.root,
      pgUrl: url,
      schema,
      appName,
      durability: o.durability,
      ...(o.pgOptions ? { pgOptions: o.pgOptions } : {}),
    });
    serverVersion = (await monitor.query<{ v: string }>('SELECT current_setting($$server_version$$) AS v')).rows[0]?.v ?? '?';
    pgSources = await postgresSources(monitor, appName);
  } catch (err) {
    // The start failed; its error is the one to report, after closing what was opened and dropping the schema.
    await h?.close().catch(() => undefined); // see above
    await dropSchema().catch(() => undefined); // see above
    throw err;
  }
  const harness = h;
  let n = 0;
  return {
    versions: {
      '@langchain/langgraph': peerVersion(o.root, '@langchain/langgraph'),
      '@langchain/langgraph-checkpoint-postgres': peerVersion(o.root, '@langchain/langgraph-checkpoint-postgres'),
      '@langchain/mcp-adapters': peerVersion(o.root, '@langchain/mcp-adapters'),
      '@langchain/core': peerVersion(o.root, '@langchain/core'),
      pg: peerVersion(o.root, 'pg'),
      PostgreSQL: serverVersion,
    },
    run: (incident) => harness.run(`${incident.id}-${++n}`, incident),
    async meter() {
      await pgSources.refresh();
      const sources: Record<string, CpuSource> = {
        'bench process (LangGraph)': selfSource,
        'MCP server': childrenSource(() => process.pid),
        'PostgreSQL backends': pgSources.backends,
        'PostgreSQL server (shared)': pgSources.server,
      };
      const m = new CpuMeter(sources);
      return {
        async stop() {
          await pgSources.refresh();
          const r = m.stop();
          return { wallS: r.wallS, counted: r.cpuSeconds, apart: {} };
        },
      };
    },
    rssKb: () => ({
      'bench process': pidStatusKb(process.pid, 'VmRSS'),
      'MCP server': childPids(process.pid).reduce((a, p) => a + (pidStatusKb(p, 'VmRSS') || 0), 0),
    }),
    async close() {
      try {
        await harness.close();
      } finally {
        await dropSchema();
      }
    },
  };
}

/** Starts the peers' worker (worker.ts) and waits for its ready line (60 s at most). */
export async function startWorker(
  root: string,
  name: string,
  spec: WorkerSpec,
  onLine?: (line: WorkerLine) => void,
): Promise<ManagedProcess> {
  const proc = new ManagedProcess({
    name,
    script: join(root, 'bench/dist/peers/worker.js'),
    cwd: root,
    keepLines: 200,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, BENCH_PEER_WORKER: JSON.stringify(spec), RESTATE_LOGGING: 'WARN' },
    ...(onLine
      ? {
          onLine: (text: string) => {
            const line = parseWorkerLine(text);
            if (line) onLine(line);
          },
        }
      : {}),
  });
  await proc.proc.waitForLine((l) => parseWorkerLine(l)?.peer === 'ready', 60_000, 'its ready line ({"peer":"ready"})');
  return proc;
}

/** A worker's JSON line, or undefined for any other output (the SDKs' logs). */
export function parseWorkerLine(text: string): WorkerLine | undefined {
  if (!text.startsWith('{"peer":')) return undefined;
  try {
    return JSON.parse(text) as WorkerLine;
  } catch {
    return undefined; // a log line that only looks like ours
  }
}

/** The Restate server and one endpoint process (the worker) registered with it; incidents go through the ingress. */
export async function restateDriver(o: { root: string; fsync: boolean }): Promise<PeerDriver> {
  const dir = mkdtempSync(join(tmpdir(), 'bosun-bench-restate-'));
  let server: RestateServer | undefined;
  let worker: ManagedProcess | undefined;
  try {
    server = await RestateServer.start({ root: o.root, dir, fsync: o.fsync });
    const port = await freePort();
    worker = await startWorker(o.root, 'restate-endpoint', { kind: 'restate', root: o.root, port });
    await server.register(`http://127.0.0.1:${port}`);
  } catch (err) {
    await worker?.stop(10_000);
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const s = server;
  const w = worker;
  return {
    versions: {
      '@restatedev/restate-server': peerVersion(o.root, '@restatedev/restate-server'),
      '@restatedev/restate-sdk': peerVersion(o.root, '@restatedev/restate-sdk'),
      '@modelcontextprotocol/sdk (endpoint)': peerVersion(o.root, '@modelcontextprotocol/sdk'),
    },
    run: (incident) => invokeIncidentRetrying(s.ingressUrl, incident),
    meter() {
      const m = new CpuMeter({
        'restate-server': processSource(() => s.pid),
        'endpoint process (SDK)': processSource(() => w.pid),
        'MCP server': childrenSource(() => w.pid),
      });
      const client = new CpuMeter({ 'bench process (ingress client)': selfSource });
      return Promise.resolve({
        stop() {
          const r = m.stop();
          return Promise.resolve({ wallS: r.wallS, counted: r.cpuSeconds, apart: client.stop().cpuSeconds });
        },
      });
    },
    rssKb: () => ({
      'restate-server': pidStatusKb(s.pid, 'VmRSS'),
      'endpoint process': pidStatusKb(w.pid, 'VmRSS'),
      'MCP server': childPids(w.pid).reduce((a, p) => a + (pidStatusKb(p, 'VmRSS') || 0), 0),
    }),
    async close() {
      await w.stop(10_000);
      await s.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * {@link invokeIncident}, again while the ingress answers 404: a deployment just registered
 * takes a moment to reach the ingress (the first warm-up runs only).
 */
async function invokeIncidentRetrying(ingressUrl: string, incident: PeerIncident): Promise<PeerOutcome> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      return await invokeIncident(ingressUrl, incident);
    } catch (err) {
      if (!(err instanceof RestateIngressError && err.status === 404) || Date.now() > deadline) throw err;
      await sleep(100);
    }
  }
}
