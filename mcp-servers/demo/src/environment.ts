/**
 * The simulated production environment behind the demo MCP server.
 *
 * Everything here is deterministic: the data is hand-written or generated from
 * fixed seeds, and time is a logical clock that starts at {@link DEMO_NOW} and
 * moves forward one minute per mutation. Two fresh environments given the same
 * sequence of calls return identical results, which is what lets tests and the
 * recorded demo assert on exact values.
 *
 * Built-in problems (the things the demo's specialists are meant to find):
 *
 * - `checkout`: deployment `v42` (45 minutes before {@link DEMO_NOW}) caches whole carts
 *   in process memory. Pod `checkout-7c9d6f8b4-9mz4q` is in `CrashLoopBackOff` with
 *   7 restarts, last terminated `OOMKilled` (exit code 137, limit 512Mi); its logs carry
 *   the heap-out-of-memory and `reason=OOMKilled` lines. The service's error rate and
 *   memory are high. Restarting the pod brings it back to `Running` but memory stays
 *   high while v42 is current; rolling back to `v41` (or `v40`) clears everything.
 * - `payments`: p99 latency around 3.1 s since about 95 minutes before {@link DEMO_NOW},
 *   caused by a slow query on `ledger_entries` (sequential scan; the logs name the
 *   missing index `ledger_entries_merchant_created_idx`). It is not caused by a
 *   deployment or a pod, so neither restarts nor rollbacks change it: the right
 *   outcome is a diagnosis and an escalation, not a mutation.
 * - `search` is healthy, as a control.
 *
 * This module has no MCP imports so it can be unit-tested on its own.
 */

/** The simulation's "now" at start-up; the logical clock starts here. */
export const DEMO_NOW = '2025-06-03T14:00:00.000Z';

/** Lifecycle state of a simulated pod, a subset of Kubernetes' container states. */
export type PodStatus = 'Running' | 'CrashLoopBackOff';

/** Why a pod's container last terminated, as Kubernetes reports it. */
export interface PodTermination {
  /** Kubernetes' reason string, e.g. `OOMKilled`. */
  reason: string;
  /** The container's exit code (137 for a SIGKILL from the OOM killer). */
  exitCode: number;
  /** When it terminated (ISO 8601). */
  at: string;
}

/** One pod of a simulated service. */
export interface Pod {
  /** Pod name, unique within its service. */
  name: string;
  /** Owning service. */
  service: string;
  /** Current state. */
  status: PodStatus;
  /** Whether the pod passes its readiness probe and receives traffic. */
  ready: boolean;
  /** Container restarts since the pod was created. */
  restarts: number;
  /** Deployment version the pod runs. */
  version: string;
  /** Node the pod is scheduled on. */
  node: string;
  /** When the current container started (ISO 8601). */
  startedAt: string;
  /** Container memory limit in MiB. */
  memoryLimitMi: number;
  /** The last termination, or `null` if the container has not terminated since the pod was (re)created. */
  lastTermination: PodTermination | null;
}

/** Severity of a log line. */
export type LogLevel = 'INFO' | 'WARN' | 'ERROR';

/** One log line. */
export interface LogEntry {
  /** Timestamp (ISO 8601). */
  at: string;
  /** Pod that emitted it. */
  pod: string;
  /** Severity. */
  level: LogLevel;
  /** `app` for the service's own output, `kubelet` for platform events about the pod. */
  source: 'app' | 'kubelet';
  /** The message text. */
  message: string;
}

/** One release in a service's deployment history. */
export interface Deployment {
  /** Version label, e.g. `v42`. */
  version: string;
  /** When it was first deployed (ISO 8601). */
  deployedAt: string;
  /** Who deployed it. */
  author: string;
  /** One-line change summary. */
  change: string;
  /** Whether this is the version the service currently runs. */
  current: boolean;
  /** When the service was last rolled back away from this version, or `null`. */
  rolledBackAt: string | null;
}

/** Summary of one service, as returned by {@link DemoEnvironment.listServices}. */
export interface ServiceSummary {
  /** Service name, the key every other operation takes. */
  name: string;
  /** What the service does. */
  description: string;
  /** Owning team. */
  team: string;
  /** Version currently deployed. */
  currentVersion: string;
  /** Number of pods. */
  podCount: number;
  /** Number of pods passing readiness. */
  readyPods: number;
}

/** Aggregation window accepted by {@link DemoEnvironment.getMetrics}. */
export type MetricsWindow = '5m' | '1h' | '24h';

/** Every accepted {@link MetricsWindow}, shortest first. */
export const METRICS_WINDOWS: readonly MetricsWindow[] = ['5m', '1h', '24h'];

/** Service-level metrics over a window. */
export interface ServiceMetrics {
  /** Service name. */
  service: string;
  /** Aggregation window. */
  window: MetricsWindow;
  /** End of the window (ISO 8601). */
  asOf: string;
  /** Median request latency in milliseconds. */
  latencyP50Ms: number;
  /** 99th-percentile request latency in milliseconds. */
  latencyP99Ms: number;
  /** Share of requests that failed, in percent (0–100). */
  errorRatePercent: number;
  /** Mean CPU use across pods, in percent of the CPU limit. */
  cpuPercent: number;
  /** Mean memory use across pods, in percent of the memory limit. */
  memoryPercent: number;
  /** Mean request rate across the service. */
  requestsPerSecond: number;
}

/** Result of {@link DemoEnvironment.getPods}. */
export interface PodsResult {
  /** Service name. */
  service: string;
  /** Its pods, in a stable order. */
  pods: Pod[];
}

/** Result of {@link DemoEnvironment.getLogs}. */
export interface LogsResult {
  /** Service name. */
  service: string;
  /** The pod asked for, or `null` when lines from every pod were merged. */
  pod: string | null;
  /** The most recent lines, oldest first. */
  lines: LogEntry[];
}

/** Result of {@link DemoEnvironment.getDeployments}. */
export interface DeploymentsResult {
  /** Service name. */
  service: string;
  /** Version currently deployed. */
  currentVersion: string;
  /** Deployment history, newest first. */
  deployments: Deployment[];
}

/** Result of {@link DemoEnvironment.restartPod}. */
export interface RestartResult {
  /** Service name. */
  service: string;
  /** The pod after the restart. */
  pod: Pod;
  /** Its status before the restart. */
  previousStatus: PodStatus;
  /** Its restart count before the restart. */
  previousRestarts: number;
  /** When the restart happened (ISO 8601). */
  at: string;
}

/** Result of {@link DemoEnvironment.rollbackDeployment}. */
export interface RollbackResult {
  /** Service name. */
  service: string;
  /** Version running before the call. */
  fromVersion: string;
  /** Version running after the call. */
  toVersion: string;
  /** `false` when the service already ran `toVersion`, in which case nothing was changed. */
  changed: boolean;
  /** When the rollback happened (ISO 8601); the current time when nothing changed. */
  at: string;
  /** The service's pods after the call. */
  pods: Pod[];
}

/** The argument a {@link DemoEnvironmentError} is about. */
export type DemoArgument = 'service' | 'pod' | 'toVersion' | 'lines' | 'window';

/**
 * A bad argument to a {@link DemoEnvironment} operation (unknown service, pod or version,
 * or an out-of-range value). The message names the argument and its value, so it can be
 * shown to a model as is.
 */
export class DemoEnvironmentError extends Error {
  /** Which argument was wrong. */
  readonly argument: DemoArgument;
  /** The value that was given for it. */
  readonly value: unknown;

  constructor(argument: DemoArgument, value: unknown, message: string) {
    super(message);
    this.name = 'DemoEnvironmentError';
    this.argument = argument;
    this.value = value;
  }
}

/** Largest `lines` value {@link DemoEnvironment.getLogs} accepts. */
export const MAX_LOG_LINES = 200;
/** `lines` used by {@link DemoEnvironment.getLogs} when none is given. */
export const DEFAULT_LOG_LINES = 20;

// ---------------------------------------------------------------------------
// Seed data
// ---------------------------------------------------------------------------

const MINUTE_MS = 60_000;
const NOW_MS = Date.parse(DEMO_NOW);

/** ISO time `minutes` before {@link DEMO_NOW} (negative values are after it). */
function ago(minutes: number): string {
  return new Date(NOW_MS - minutes * MINUTE_MS).toISOString();
}

/** The numbers {@link ServiceMetrics} carries, without identity fields. */
type MetricValues = Pick<
  ServiceMetrics,
  'latencyP50Ms' | 'latencyP99Ms' | 'errorRatePercent' | 'cpuPercent' | 'memoryPercent' | 'requestsPerSecond'
>;

interface ServiceState {
  name: string;
  description: string;
  team: string;
  currentVersion: string;
  /** Oldest first; reversed on the way out. */
  deployments: Deployment[];
  pods: Pod[];
  /** Per pod, oldest first. */
  logs: Map<string, LogEntry[]>;
  healthy: MetricValues;
}

const CHECKOUT_CRASH_POD = 'checkout-7c9d6f8b4-9mz4q';
const CHECKOUT_BAD_VERSION = 'v42';
/** Minutes before DEMO_NOW that v42 went out. */
const CHECKOUT_DEPLOY_AGO = 45;
/** Minutes before DEMO_NOW that the payments slow query started. */
const PAYMENTS_SLOW_SINCE_AGO = 95;

const WINDOW_MINUTES: Record<MetricsWindow, number> = { '5m': 5, '1h': 60, '24h': 1440 };

/** Routine request lines, cycled through deterministically by index. */
const ROUTES: Record<string, readonly string[]> = {
  checkout: ['GET /api/cart', 'POST /api/cart/items', 'POST /api/orders', 'GET /api/orders/{id}'],
  payments: ['POST /v1/authorize', 'POST /v1/capture', 'GET /v1/merchants/{id}/statement', 'POST /v1/refunds'],
  search: ['GET /search?q=', 'GET /suggest?q=', 'GET /search?q=&page=2'],
};

/** Which routine lines {@link routineLines} writes. */
interface RoutineLines {
  service: string;
  pod: string;
  count: number;
  /** Minutes between two lines. */
  everyMinutes: number;
  /** Minutes before now of the last line. */
  endAgo: number;
  /** The latency of line `i`, in ms. */
  latency: (i: number) => number;
}

/**
 * `count` routine access-log lines for a pod, one every `everyMinutes`, ending at
 * `endAgo` minutes before now. Latency varies by index so lines are not all identical.
 */
function routineLines(spec: RoutineLines): LogEntry[] {
  const { service, pod, count, everyMinutes, endAgo, latency } = spec;
  const routes = ROUTES[service] ?? ['GET /'];
  const out: LogEntry[] = [];
  for (let i = 0; i < count; i++) {
    const minutesAgo = endAgo + (count - 1 - i) * everyMinutes;
    const route = routes[i % routes.length] ?? 'GET /';
    out.push({
      at: ago(minutesAgo),
      pod,
      level: 'INFO',
      source: 'app',
      message: `${route} 200 ${latency(i)}ms`,
    });
  }
  return out;
}

function byTime(a: LogEntry, b: LogEntry): number {
  return a.at < b.at ? -1 : a.at > b.at ? 1 : 0;
}

/** A running, ready pod of `service`, started `startedAgo` minutes ago. */
function pod(service: string, name: string, spec: { node: string; version: string; startedAgo: number; memoryLimitMi: number }): Pod {
  const { node, version, startedAgo, memoryLimitMi } = spec;
  return {
    name,
    service,
    status: 'Running',
    ready: true,
    restarts: 0,
    version,
    node,
    startedAt: ago(startedAgo),
    memoryLimitMi,
    lastTermination: null,
  };
}

function deployment(version: string, deployedAt: string, author: string, change: string): Deployment {
  return { version, deployedAt, author, change, current: false, rolledBackAt: null };
}

/** The logs of checkout's healthy pods: routine traffic, heap warnings, and errors caused by the crashing pod. */
function checkoutLogs(pods: Pod[]): Map<string, LogEntry[]> {
  const logs = new Map<string, LogEntry[]>();
  for (const [index, p] of pods.entries()) {
    if (p.name === CHECKOUT_CRASH_POD) continue;
    const lines = routineLines({
      service: 'checkout',
      pod: p.name,
      count: 14,
      everyMinutes: 3,
      endAgo: 1 + index,
      latency: (i) => 31 + ((i * 7 + index * 5) % 23),
    });
    lines.push(
      {
        at: p.startedAt,
        pod: p.name,
        level: 'INFO',
        source: 'app',
        message: 'checkout v42 listening on :8080 (CART_CACHE_MAX_ENTRIES=50000)',
      },
      {
        at: ago(12 + index),
        pod: p.name,
        level: 'WARN',
        source: 'app',
        message: `heap usage ${402 + index * 21}Mi of 512Mi limit (cart cache entries: ${31877 + index * 1733})`,
      },
      {
        at: ago(3 + index),
        pod: p.name,
        level: 'ERROR',
        source: 'app',
        message: `POST /api/orders 503 upstream reset while ${CHECKOUT_CRASH_POD} restarting (retried on this pod)`,
      },
    );
    logs.set(p.name, lines.sort(byTime));
  }
  logs.set(CHECKOUT_CRASH_POD, crashPodLogs());
  return logs;
}

/**
 * The crashing pod's story, eight times over (the first start plus 7 restarts): it starts,
 * fills its cart cache, hits the heap limit, is OOM-killed and backs off. The last crash
 * is the one lastTermination reports, and the pod is now waiting in back-off.
 */
function crashPodLogs(): LogEntry[] {
  const crashLines: LogEntry[] = [];
  const starts = [CHECKOUT_DEPLOY_AGO - 1, 39, 34, 29, 24, 19, 13, 6];
  for (const [cycle, startAgo] of starts.entries()) {
    const crashAgo = startAgo - 3;
    crashLines.push(
      {
        at: ago(startAgo),
        pod: CHECKOUT_CRASH_POD,
        level: 'INFO',
        source: 'app',
        message: 'checkout v42 listening on :8080 (CART_CACHE_MAX_ENTRIES=50000)',
      },
      {
        at: ago(startAgo - 2),
        pod: CHECKOUT_CRASH_POD,
        level: 'WARN',
        source: 'app',
        message: `heap usage ${468 + cycle * 4}Mi of 512Mi limit (cart cache entries: ${48210 + cycle * 97})`,
      },
      {
        at: ago(crashAgo),
        pod: CHECKOUT_CRASH_POD,
        level: 'ERROR',
        source: 'app',
        message: 'FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory',
      },
      {
        at: ago(crashAgo),
        pod: CHECKOUT_CRASH_POD,
        level: 'ERROR',
        source: 'kubelet',
        message: 'Container checkout terminated: reason=OOMKilled exitCode=137 memoryLimit=512Mi',
      },
      {
        at: ago(crashAgo),
        pod: CHECKOUT_CRASH_POD,
        level: 'WARN',
        source: 'kubelet',
        message: `Back-off restarting failed container checkout in pod ${CHECKOUT_CRASH_POD}`,
      },
    );
  }
  return crashLines.sort(byTime);
}

function seedCheckout(): ServiceState {
  const version = CHECKOUT_BAD_VERSION;
  const pods = [
    pod('checkout', 'checkout-7c9d6f8b4-2xk8p', { node: 'node-a', version, startedAgo: CHECKOUT_DEPLOY_AGO - 1, memoryLimitMi: 512 }),
    pod('checkout', CHECKOUT_CRASH_POD, { node: 'node-b', version, startedAgo: 6, memoryLimitMi: 512 }),
    pod('checkout', 'checkout-7c9d6f8b4-tq7wn', { node: 'node-c', version, startedAgo: CHECKOUT_DEPLOY_AGO - 2, memoryLimitMi: 512 }),
  ];
  const crashing = pods[1]!;
  crashing.status = 'CrashLoopBackOff';
  crashing.ready = false;
  crashing.restarts = 7;
  crashing.lastTermination = { reason: 'OOMKilled', exitCode: 137, at: ago(3) };

  const logs = checkoutLogs(pods);

  return {
    name: 'checkout',
    description: 'Cart and order placement API',
    team: 'storefront',
    currentVersion: version,
    deployments: [
      deployment('v40', '2025-06-01T10:12:00.000Z', 'dana', 'Upgrade express to 4.21'),
      deployment('v41', '2025-06-02T16:45:00.000Z', 'li', 'Validate gift cards before placing orders'),
      deployment('v42', ago(CHECKOUT_DEPLOY_AGO), 'sam', 'Cache full cart objects in process memory (CART_CACHE_MAX_ENTRIES=50000)'),
    ],
    pods,
    logs,
    healthy: { latencyP50Ms: 38, latencyP99Ms: 180, errorRatePercent: 0.2, cpuPercent: 35, memoryPercent: 48, requestsPerSecond: 220 },
  };
}

const SLOW_QUERY_DETAIL =
  'SELECT id, amount_cents, status FROM ledger_entries WHERE merchant_id = $1 AND created_at > $2 ORDER BY created_at DESC LIMIT 50' +
  ' (plan: Seq Scan on ledger_entries, rows=18.4M; index ledger_entries_merchant_created_idx not found)';

function seedPayments(): ServiceState {
  const version = 'v17';
  const pods = [
    pod('payments', 'payments-5f8c7d9b6-h4kx2', { node: 'node-a', version, startedAgo: 4300, memoryLimitMi: 1024 }),
    pod('payments', 'payments-5f8c7d9b6-r7pld', { node: 'node-c', version, startedAgo: 4300, memoryLimitMi: 1024 }),
  ];
  const logs = new Map<string, LogEntry[]>();
  for (const [index, p] of pods.entries()) {
    // Healthy traffic before the slow query started, slow traffic after.
    const before = routineLines({
      service: 'payments',
      pod: p.name,
      count: 6,
      everyMinutes: 5,
      endAgo: PAYMENTS_SLOW_SINCE_AGO + 2 + index,
      latency: (i) => 41 + ((i * 5 + index * 3) % 17),
    });
    const after = routineLines({
      service: 'payments',
      pod: p.name,
      count: 18,
      everyMinutes: 5,
      endAgo: 1 + index,
      latency: (i) => 2600 + ((i * 137 + index * 61) % 700),
    });
    const warnings: LogEntry[] = [
      {
        at: ago(PAYMENTS_SLOW_SINCE_AGO - index),
        pod: p.name,
        level: 'WARN',
        source: 'app',
        message: `slow query 2114ms: ${SLOW_QUERY_DETAIL}`,
      },
    ];
    for (let i = 0; i < 6; i++) {
      const at = ago(80 - i * 14 - index * 2);
      warnings.push(
        { at, pod: p.name, level: 'WARN', source: 'app', message: `slow query ${2870 + i * 41 + index * 13}ms: ${SLOW_QUERY_DETAIL}` },
        {
          at,
          pod: p.name,
          level: 'WARN',
          source: 'app',
          message: `db pool exhausted: 20/20 connections in use, ${12 + i + index} requests waiting`,
        },
      );
    }
    warnings.push({
      at: ago(3 + index),
      pod: p.name,
      level: 'ERROR',
      source: 'app',
      message: 'POST /v1/authorize 504 timed out after 5000ms waiting for a database connection',
    });
    logs.set(p.name, [...before, ...after, ...warnings].sort(byTime));
  }
  return {
    name: 'payments',
    description: 'Payment authorisation, capture and merchant ledger',
    team: 'payments',
    currentVersion: version,
    deployments: [
      deployment('v15', '2025-05-20T09:30:00.000Z', 'omar', 'Retry idempotent captures on gateway timeouts'),
      deployment('v16', '2025-05-28T13:05:00.000Z', 'priya', 'Bump pg driver to 8.16'),
      deployment('v17', '2025-05-31T11:20:00.000Z', 'omar', 'Add merchant statement endpoint'),
    ],
    pods,
    logs,
    healthy: { latencyP50Ms: 45, latencyP99Ms: 210, errorRatePercent: 0.1, cpuPercent: 30, memoryPercent: 52, requestsPerSecond: 140 },
  };
}

function seedSearch(): ServiceState {
  const version = 'v9';
  const pods = [
    pod('search', 'search-64b5c8f7d-8wq3n', { node: 'node-b', version, startedAgo: 2900, memoryLimitMi: 2048 }),
    pod('search', 'search-64b5c8f7d-kz5vt', { node: 'node-c', version, startedAgo: 2900, memoryLimitMi: 2048 }),
  ];
  const logs = new Map<string, LogEntry[]>();
  for (const [index, p] of pods.entries()) {
    logs.set(
      p.name,
      routineLines({
        service: 'search',
        pod: p.name,
        count: 30,
        everyMinutes: 2,
        endAgo: 1 + index,
        latency: (i) => 14 + ((i * 11 + index * 7) % 19),
      }),
    );
  }
  return {
    name: 'search',
    description: 'Product search and suggestions',
    team: 'discovery',
    currentVersion: version,
    deployments: [
      deployment('v8', '2025-05-26T15:40:00.000Z', 'mei', 'Tune BM25 field weights'),
      deployment('v9', '2025-06-01T08:55:00.000Z', 'mei', 'Add typo-tolerant suggestions'),
    ],
    pods,
    logs,
    healthy: { latencyP50Ms: 22, latencyP99Ms: 95, errorRatePercent: 0.05, cpuPercent: 41, memoryPercent: 60, requestsPerSecond: 380 },
  };
}

function round(value: number, digits: number): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

/** Linear blend of `healthy` and `problem` with weight `f` on the problem, rounded for display. */
function blend(healthy: MetricValues, problem: MetricValues, f: number): MetricValues {
  const mix = (a: number, b: number): number => a * (1 - f) + b * f;
  return {
    latencyP50Ms: Math.round(mix(healthy.latencyP50Ms, problem.latencyP50Ms)),
    latencyP99Ms: Math.round(mix(healthy.latencyP99Ms, problem.latencyP99Ms)),
    errorRatePercent: round(mix(healthy.errorRatePercent, problem.errorRatePercent), 2),
    cpuPercent: Math.round(mix(healthy.cpuPercent, problem.cpuPercent)),
    memoryPercent: Math.round(mix(healthy.memoryPercent, problem.memoryPercent)),
    requestsPerSecond: Math.round(mix(healthy.requestsPerSecond, problem.requestsPerSecond)),
  };
}

// ---------------------------------------------------------------------------
// The environment
// ---------------------------------------------------------------------------

/**
 * An in-memory, deterministic simulation of a few production services (`checkout`,
 * `payments`, `search`) with pods, logs, metrics and deployment history.
 *
 * Reads never change state. {@link DemoEnvironment.restartPod} and
 * {@link DemoEnvironment.rollbackDeployment} change it for the lifetime of the instance.
 * Every method returns copies, so callers cannot change the state by editing results.
 * Bad arguments throw {@link DemoEnvironmentError}.
 */
export class DemoEnvironment {
  private readonly services = new Map<string, ServiceState>();
  /** Minutes the logical clock has advanced past {@link DEMO_NOW}. */
  private tick = 0;

  constructor() {
    for (const state of [seedCheckout(), seedPayments(), seedSearch()]) {
      this.services.set(state.name, state);
    }
    for (const state of this.services.values()) this.markCurrent(state);
  }

  /** The environment's current logical time (ISO 8601). */
  now(): string {
    return new Date(NOW_MS + this.tick * MINUTE_MS).toISOString();
  }

  /** Names of every service, in a stable order. */
  serviceNames(): string[] {
    return [...this.services.keys()];
  }

  /** A summary of every service. */
  listServices(): { services: ServiceSummary[] } {
    return {
      services: [...this.services.values()].map((s) => ({
        name: s.name,
        description: s.description,
        team: s.team,
        currentVersion: s.currentVersion,
        podCount: s.pods.length,
        readyPods: s.pods.filter((p) => p.ready).length,
      })),
    };
  }

  /** The pods of `service`. */
  getPods(service: string): PodsResult {
    const state = this.service(service);
    return { service: state.name, pods: structuredClone(state.pods) };
  }

  /**
   * The most recent `lines` log lines of `service`, oldest first: of one pod if `pod`
   * is given, else of all its pods merged by time.
   */
  getLogs(service: string, pod?: string, lines: number = DEFAULT_LOG_LINES): LogsResult {
    const state = this.service(service);
    if (!Number.isInteger(lines) || lines < 1 || lines > MAX_LOG_LINES) {
      throw new DemoEnvironmentError('lines', lines, `Invalid lines ${String(lines)}: must be an integer from 1 to ${MAX_LOG_LINES}.`);
    }
    let merged: LogEntry[];
    if (pod !== undefined) {
      merged = state.logs.get(this.pod(state, pod).name) ?? [];
    } else {
      // A stable sort keeps same-timestamp lines in pod order, so the merge is deterministic.
      merged = state.pods.flatMap((p) => state.logs.get(p.name) ?? []).sort(byTime);
    }
    return { service: state.name, pod: pod ?? null, lines: structuredClone(merged.slice(-lines)) };
  }

  /**
   * Metrics of `service` over `window`. The simulation keeps no history: windows differ
   * only in how much of a still-active problem they dilute with healthy time, and a
   * fixed problem disappears from every window at once.
   */
  getMetrics(service: string, window: MetricsWindow = '1h'): ServiceMetrics {
    const state = this.service(service);
    const minutes = WINDOW_MINUTES[window];
    if (minutes === undefined) {
      throw new DemoEnvironmentError('window', window, `Invalid window "${String(window)}": must be one of ${METRICS_WINDOWS.join(', ')}.`);
    }
    let values = state.healthy;
    const problem = this.activeProblem(state);
    if (problem) {
      const affected = Math.min(1, problem.sinceAgoMinutes / minutes);
      values = blend(state.healthy, problem.values, affected);
    }
    return { service: state.name, window, asOf: this.now(), ...values };
  }

  /** The deployment history of `service`, newest first. */
  getDeployments(service: string): DeploymentsResult {
    const state = this.service(service);
    return {
      service: state.name,
      currentVersion: state.currentVersion,
      deployments: structuredClone([...state.deployments].reverse()),
    };
  }

  /**
   * Restarts `pod` of `service`: it becomes `Running` and ready, its restart count is
   * reset and its last termination cleared. It does not fix the cause of a crash; on
   * checkout v42 the pod's log shows memory climbing again.
   */
  restartPod(service: string, pod: string): RestartResult {
    const state = this.service(service);
    const target = this.pod(state, pod);
    const previousStatus = target.status;
    const previousRestarts = target.restarts;
    const at = this.advance();
    this.startFresh(target, at);
    this.appendLog(state, {
      at,
      pod: target.name,
      level: 'INFO',
      source: 'kubelet',
      message: `Pod ${target.name} restarted on operator request`,
    });
    this.appendStartupLogs(state, target, at);
    return { service: state.name, pod: structuredClone(target), previousStatus, previousRestarts, at };
  }

  /**
   * Rolls `service` to `toVersion`, which must be in its deployment history (`42` is
   * accepted for `v42`). Every pod is replaced by a fresh `Running` one on that version,
   * which clears any crash. Rolling to the version already current changes nothing and
   * reports `changed: false`.
   */
  rollbackDeployment(service: string, toVersion: string): RollbackResult {
    const state = this.service(service);
    const target = this.version(state, toVersion);
    const fromVersion = state.currentVersion;
    if (target.version === fromVersion) {
      return {
        service: state.name,
        fromVersion,
        toVersion: fromVersion,
        changed: false,
        at: this.now(),
        pods: structuredClone(state.pods),
      };
    }
    const at = this.advance();
    const previous = state.deployments.find((d) => d.version === fromVersion);
    if (previous) previous.rolledBackAt = at;
    state.currentVersion = target.version;
    this.markCurrent(state);
    for (const p of state.pods) {
      p.version = target.version;
      this.startFresh(p, at);
      this.appendLog(state, {
        at,
        pod: p.name,
        level: 'INFO',
        source: 'kubelet',
        message: `Rolled back ${state.name} from ${fromVersion} to ${target.version}; pod replaced`,
      });
      this.appendStartupLogs(state, p, at);
    }
    return { service: state.name, fromVersion, toVersion: target.version, changed: true, at, pods: structuredClone(state.pods) };
  }

  // -------------------------------------------------------------------------

  private service(name: string): ServiceState {
    const state = this.services.get(name);
    if (!state) {
      throw new DemoEnvironmentError('service', name, `Unknown service "${name}". Known services: ${this.serviceNames().join(', ')}.`);
    }
    return state;
  }

  private pod(state: ServiceState, name: string): Pod {
    const found = state.pods.find((p) => p.name === name);
    if (!found) {
      throw new DemoEnvironmentError(
        'pod',
        name,
        `Unknown pod "${name}" in service "${state.name}". Its pods: ${state.pods.map((p) => p.name).join(', ')}.`,
      );
    }
    return found;
  }

  private version(state: ServiceState, version: string): Deployment {
    // Models often drop the "v" of a version label; accepting both avoids a pointless failed mutation.
    const wanted = /^\d+$/.test(version) ? `v${version}` : version;
    const found = state.deployments.find((d) => d.version === wanted);
    if (!found) {
      throw new DemoEnvironmentError(
        'toVersion',
        version,
        `Unknown toVersion "${version}" for service "${state.name}". Its versions: ${state.deployments.map((d) => d.version).join(', ')}.`,
      );
    }
    return found;
  }

  /** Moves the logical clock forward so each mutation gets its own, still deterministic, timestamp. */
  private advance(): string {
    this.tick += 1;
    return this.now();
  }

  private markCurrent(state: ServiceState): void {
    for (const d of state.deployments) d.current = d.version === state.currentVersion;
  }

  private startFresh(p: Pod, at: string): void {
    p.status = 'Running';
    p.ready = true;
    p.restarts = 0;
    p.startedAt = at;
    p.lastTermination = null;
  }

  private appendLog(state: ServiceState, entry: LogEntry): void {
    const lines = state.logs.get(entry.pod);
    if (lines) lines.push(entry);
    else state.logs.set(entry.pod, [entry]);
  }

  private appendStartupLogs(state: ServiceState, p: Pod, at: string): void {
    if (state.name === 'checkout' && p.version === CHECKOUT_BAD_VERSION) {
      this.appendLog(state, {
        at,
        pod: p.name,
        level: 'INFO',
        source: 'app',
        message: 'checkout v42 listening on :8080 (CART_CACHE_MAX_ENTRIES=50000)',
      });
      // Hints that a restart only buys time while the cache change is live.
      this.appendLog(state, {
        at,
        pod: p.name,
        level: 'WARN',
        source: 'app',
        message: 'heap usage 301Mi of 512Mi limit one minute after start (cart cache entries: 20544)',
      });
    } else {
      this.appendLog(state, { at, pod: p.name, level: 'INFO', source: 'app', message: `${state.name} ${p.version} listening on :8080` });
    }
  }

  /**
   * The problem currently affecting `state`'s metrics, with how long it has lasted,
   * or `undefined` when the service is healthy.
   */
  private activeProblem(state: ServiceState): { values: MetricValues; sinceAgoMinutes: number } | undefined {
    // Problems are anchored to DEMO_NOW, not the logical clock, so time passing does not drift the numbers.
    if (state.name === 'checkout' && state.currentVersion === CHECKOUT_BAD_VERSION) {
      const crashing = state.pods.some((p) => p.status === 'CrashLoopBackOff');
      const values: MetricValues = crashing
        ? { latencyP50Ms: 41, latencyP99Ms: 1250, errorRatePercent: 6.1, cpuPercent: 52, memoryPercent: 94, requestsPerSecond: 214 }
        : { latencyP50Ms: 39, latencyP99Ms: 205, errorRatePercent: 0.3, cpuPercent: 40, memoryPercent: 81, requestsPerSecond: 220 };
      return { values, sinceAgoMinutes: CHECKOUT_DEPLOY_AGO };
    }
    if (state.name === 'payments') {
      return {
        values: { latencyP50Ms: 48, latencyP99Ms: 3100, errorRatePercent: 0.9, cpuPercent: 33, memoryPercent: 55, requestsPerSecond: 138 },
        sinceAgoMinutes: PAYMENTS_SLOW_SINCE_AGO,
      };
    }
    return undefined;
  }
}
