import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

interface CpuProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}
interface CpuProfile {
  nodes: CpuProfileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
}

export interface ProfileSummary {
  file: string;
  totalMs: number;
  idleMs: number;
  /** Top functions by self time (idle excluded). */
  top: { fn: string; where: string; selfMs: number; pct: number }[];
  /** Self time by module: a node_modules package, node: internals, a Bosun workspace, or a V8 pseudo-node. */
  byModule: { module: string; selfMs: number; pct: number }[];
  /**
   * Self time with native and node: frames (socket writes, timers, …) charged to the nearest
   * calling package or workspace: who causes the time.
   */
  byCaller: { module: string; selfMs: number; pct: number }[];
  /**
   * Self time charged to the nearest Bosun frame (libs/*, services/*) on the synchronous stack:
   * which Bosun function causes it; otherwise to the outermost package on the stack.
   */
  byBosunFrame: { frame: string; selfMs: number; pct: number }[];
}

/** Every .cpuprofile under `dir`, recursively. */
export function findProfiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...findProfiles(p));
    else if (name.endsWith('.cpuprofile')) out.push(p);
  }
  return out.sort();
}

function moduleOf(url: string, fn: string, root: string): string {
  if (!url) return fn.startsWith('(') && fn !== '(anonymous)' ? fn : '(native)';
  if (url.startsWith('node:')) return 'node: internals';
  const path = url.replace(/^file:\/\//, '');
  const nm = path.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = path.slice(nm + '/node_modules/'.length).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  const rel = relative(root, path);
  const parts = rel.split('/');
  return parts.length >= 2 ? `${parts[0]}/${parts[1]}` : rel;
}

/**
 * Self time per function: hitCount × the sampling interval ((endTime − startTime) / samples),
 * summed per callFrame functionName + url.
 */
export function summarizeProfile(file: string, root: string, topN = 15): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const totalSamples = profile.samples?.length ?? profile.nodes.reduce((a, n) => a + (n.hitCount ?? 0), 0);
  const totalMs = (profile.endTime - profile.startTime) / 1000;
  const intervalMs = totalSamples > 0 ? totalMs / totalSamples : 0;
  const byFn = new Map<string, { fn: string; where: string; selfMs: number }>();
  const byModule = new Map<string, number>();
  const byCaller = new Map<string, number>();
  const parent = new Map<number, CpuProfileNode>();
  for (const node of profile.nodes) {
    for (const c of node.children ?? []) parent.set(c, node);
  }
  const callerOf = (node: CpuProfileNode): string => {
    for (let n: CpuProfileNode | undefined = node; n; n = parent.get(n.id)) {
      const m = moduleOf(n.callFrame.url, n.callFrame.functionName, root);
      if (m !== 'node: internals' && m !== '(native)' && m !== '(root)') return m;
    }
    return '(no JS caller: event loop)';
  };
  const byBosunFrame = new Map<string, number>();
  const bosunFrameOf = (node: CpuProfileNode): string => {
    for (let n: CpuProfileNode | undefined = node; n; n = parent.get(n.id)) {
      const m = moduleOf(n.callFrame.url, n.callFrame.functionName, root);
      if (m.startsWith('libs/') || m.startsWith('services/')) {
        const file = n.callFrame.url
          .replace(/^file:\/\//, '')
          .replace(`${root}/`, '')
          .replace('/dist/', '/');
        return `${n.callFrame.functionName || '(anonymous)'} ${file}:${n.callFrame.lineNumber + 1}`;
      }
    }
    // No Bosun frame: name the outermost package on the stack, the one that started the work.
    let outer: string | undefined;
    for (let n: CpuProfileNode | undefined = node; n; n = parent.get(n.id)) {
      const m = moduleOf(n.callFrame.url, n.callFrame.functionName, root);
      if (m !== 'node: internals' && m !== '(native)' && m !== '(root)') outer = m;
    }
    return `${outer ?? '(no JS caller: event loop)'} (no Bosun frame on the stack)`;
  };
  let idleMs = 0;
  for (const node of profile.nodes) {
    const hits = node.hitCount ?? 0;
    if (hits === 0) continue;
    const ms = hits * intervalMs;
    const { functionName, url, lineNumber } = node.callFrame;
    if (functionName === '(idle)') {
      idleMs += ms;
      continue;
    }
    const fn = functionName || '(anonymous)';
    const key = `${fn}\u0000${url}`;
    const short = url ? url.replace(/^file:\/\//, '').replace(`${root}/`, '') : '';
    const where = short ? `${short.replace(/^.*node_modules\//, '')}:${lineNumber + 1}` : '';
    const entry = byFn.get(key) ?? { fn, where, selfMs: 0 };
    entry.selfMs += ms;
    byFn.set(key, entry);
    const mod = moduleOf(url, fn, root);
    byModule.set(mod, (byModule.get(mod) ?? 0) + ms);
    const caller = callerOf(node);
    byCaller.set(caller, (byCaller.get(caller) ?? 0) + ms);
    const frame = bosunFrameOf(node);
    byBosunFrame.set(frame, (byBosunFrame.get(frame) ?? 0) + ms);
  }
  const busy = Math.max(1e-9, totalMs - idleMs);
  return {
    file,
    totalMs,
    idleMs,
    top: [...byFn.values()]
      .sort((a, b) => b.selfMs - a.selfMs)
      .slice(0, topN)
      .map((e) => ({ ...e, pct: (100 * e.selfMs) / busy })),
    byModule: [...byModule.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 12)
      .map(([module, selfMs]) => ({ module, selfMs, pct: (100 * selfMs) / busy })),
    byCaller: [...byCaller.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 12)
      .map(([module, selfMs]) => ({ module, selfMs, pct: (100 * selfMs) / busy })),
    byBosunFrame: [...byBosunFrame.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 15)
      .map(([frame, selfMs]) => ({ frame, selfMs, pct: (100 * selfMs) / busy })),
  };
}
