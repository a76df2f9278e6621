/**
 * CPU time of every process a peer scenario involves, read from /proc/<pid>/stat as
 * bench/src/cluster.ts does for Bosun's services: the bench process, the processes it started
 * (the MCP server, a worker, the Restate server) and PostgreSQL's: the backends of the bench's
 * own connections, and the server's shared processes (postmaster, WAL writer, checkpointer,
 * background writer, autovacuum; also the CPU of its children that ended meanwhile).
 */
import { CLOCK_TICKS, childPids, processTicks, reapedTicks } from '../cluster.js';
import type { PgPool } from './langgraph.js';

/** The processes of one line of the report: pid → CPU seconds so far. A pid may be negative for a counter that is not one process. */
export type CpuSource = () => Map<number, number>;

/** One process: its utime + stime. */
export function processSource(pid: () => number): CpuSource {
  return () => {
    const p = pid();
    const t = processTicks(p);
    return new Map(Number.isFinite(t) ? [[p, t / CLOCK_TICKS]] : []);
  };
}

/** A process's live children (looked up at each reading, so a restarted one is followed) and those it reaped. */
export function childrenSource(pid: () => number): CpuSource {
  return () => {
    const p = pid();
    const out = new Map<number, number>();
    for (const c of childPids(p)) {
      const t = processTicks(c);
      if (Number.isFinite(t)) out.set(c, t / CLOCK_TICKS);
    }
    const reaped = reapedTicks(p);
    if (Number.isFinite(reaped)) out.set(-p, reaped / CLOCK_TICKS);
    return out;
  };
}

/** This process (process.cpuUsage). */
export const selfSource: CpuSource = () => {
  const u = process.cpuUsage();
  return new Map([[0, (u.user + u.system) / 1e6]]);
};

/** Sums pid sets read before and after: a pid only in the second reading started meanwhile and counts from 0. */
export class CpuMeter {
  private readonly t0 = performance.now();
  private readonly start: Map<string, Map<number, number>>;

  constructor(private readonly sources: Record<string, CpuSource>) {
    this.start = new Map(Object.entries(sources).map(([k, s]) => [k, s()]));
  }

  /** CPU seconds per label since the meter was made, and the wall time. */
  stop(): { wallS: number; cpuSeconds: Record<string, number> } {
    const cpuSeconds: Record<string, number> = {};
    for (const [label, source] of Object.entries(this.sources)) {
      const before = this.start.get(label) ?? new Map<number, number>();
      let sum = 0;
      for (const [pid, s] of source()) sum += s - (before.get(pid) ?? 0);
      cpuSeconds[label] = sum;
    }
    return { wallS: (performance.now() - this.t0) / 1000, cpuSeconds };
  }
}

/**
 * PostgreSQL's processes as two sources: `backends`, those serving connections whose
 * `application_name` is `appName` (the bench's pool), and `server`, the postmaster with its
 * shared processes and the children it reaped, shared with any other client of this server.
 * Lists the pids through `monitor` (a pool of its own, so that its backend is in neither).
 */
export async function postgresSources(
  monitor: PgPool,
  appName: string,
): Promise<{ backends: CpuSource; server: CpuSource; refresh(): Promise<void> }> {
  let backends: number[] = [];
  let shared: number[] = [];
  let postmaster = -1;
  const refresh = async () => {
    const r = await monitor.query<{ pid: number; backend_type: string; application_name: string }>(
      'SELECT pid, backend_type, application_name FROM pg_stat_activity',
    );
    backends = r.rows.filter((x) => x.backend_type === 'client backend' && x.application_name === appName).map((x) => x.pid);
    shared = r.rows.filter((x) => x.backend_type !== 'client backend').map((x) => x.pid);
    const pm = await monitor.query<{ pid: number }>("SELECT (regexp_split_to_array(pg_read_file('postmaster.pid'), '\\n'))[1]::int AS pid");
    postmaster = pm.rows[0]?.pid ?? -1;
  };
  await refresh();
  const ticks = (pids: number[]) => {
    const out = new Map<number, number>();
    for (const p of pids) {
      const t = processTicks(p);
      if (Number.isFinite(t)) out.set(p, t / CLOCK_TICKS);
    }
    return out;
  };
  return {
    refresh,
    backends: () => ticks(backends),
    server: () => {
      const out = ticks([postmaster, ...shared]);
      const reaped = reapedTicks(postmaster);
      if (Number.isFinite(reaped)) out.set(-postmaster, reaped / CLOCK_TICKS);
      return out;
    },
  };
}
