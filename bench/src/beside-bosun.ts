/**
 * Bosun's own figures of the same bench run (scenarios 1 and 2), for the scenarios that put a
 * peer framework beside Bosun (8: ADK in-process; 10-12: the durable peers).
 */
import type { ScenarioResult } from './scenarios.js';
import { fmt } from './util.js';

/** Bosun's figures from scenarios 1 and 2 of this run, when they ran. */
export interface BosunFigures {
  p50?: number;
  p99?: number;
  perSecond?: number;
  /** CPU ms per incident: services, the gateway's MCP server, Redis and NATS. */
  cpuMs?: number;
  /** The same without Redis and NATS (shared with anything else on this machine). */
  servicesCpuMs?: number;
}

export function bosunFigures(earlier: readonly ScenarioResult[]): BosunFigures {
  const out: BosunFigures = {};
  const s1 = earlier.find((r) => r.id === 1)?.data.bosun as { p50?: number; p99?: number } | undefined;
  if (s1) {
    out.p50 = s1.p50;
    out.p99 = s1.p99;
  }
  const s2 = earlier.find((r) => r.id === 2)?.data.bosun as
    { perSecond?: number; statuses?: Record<string, number>; failed?: number; cpu?: { cpuSeconds: Record<string, number> } } | undefined;
  if (s2) {
    out.perSecond = s2.perSecond;
    const incidents = Object.values(s2.statuses ?? {}).reduce((a, b) => a + b, 0) + (s2.failed ?? 0);
    if (s2.cpu && incidents > 0) {
      const entries = Object.entries(s2.cpu.cpuSeconds).filter(([k, v]) => k !== 'bench (this process)' && v > 0);
      const sum = (keep: (k: string) => boolean) => (1000 * entries.filter(([k]) => keep(k)).reduce((a, [, v]) => a + v, 0)) / incidents;
      out.cpuMs = sum(() => true);
      out.servicesCpuMs = sum((k) => k !== 'redis' && k !== 'nats-server');
    }
  }
  return out;
}

/** `a / b` as `1.23×`, or `—` when either is missing. */
export const ratio = (a: number | undefined, b: number | undefined) =>
  a !== undefined && b !== undefined && b > 0 ? `${fmt(a / b, 2)}×` : '—';
