import { describe, it, expect } from 'vitest';
import { DEFAULT_LOG_LINES, DEMO_NOW, DemoEnvironment, DemoEnvironmentError, MAX_LOG_LINES } from './environment.js';

const CRASH_POD = 'checkout-7c9d6f8b4-9mz4q';

/** Runs `fn` and returns the DemoEnvironmentError it throws, failing the test if it throws anything else. */
function errorOf(fn: () => unknown): DemoEnvironmentError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(DemoEnvironmentError);
    return error as DemoEnvironmentError;
  }
  throw new Error('expected a DemoEnvironmentError, nothing was thrown');
}

describe('DemoEnvironment reads', () => {
  it('lists the three services with their current versions', () => {
    const { services } = new DemoEnvironment().listServices();
    expect(services.map((s) => s.name)).toEqual(['checkout', 'payments', 'search']);
    expect(services.map((s) => s.currentVersion)).toEqual(['v42', 'v17', 'v9']);
    const checkout = services.find((s) => s.name === 'checkout');
    expect(checkout).toMatchObject({ podCount: 3, readyPods: 2 });
  });

  it('shows the checkout pod crash-looping after an OOM kill', () => {
    const { pods } = new DemoEnvironment().getPods('checkout');
    expect(pods).toHaveLength(3);
    const crashing = pods.filter((p) => p.status === 'CrashLoopBackOff');
    expect(crashing.map((p) => p.name)).toEqual([CRASH_POD]);
    expect(crashing[0]).toMatchObject({ ready: false, restarts: 7, version: 'v42', memoryLimitMi: 512 });
    expect(crashing[0]?.lastTermination).toMatchObject({ reason: 'OOMKilled', exitCode: 137 });
    expect(pods.filter((p) => p.name !== CRASH_POD).every((p) => p.status === 'Running' && p.restarts === 0)).toBe(true);
  });

  it('has only healthy pods outside checkout', () => {
    const env = new DemoEnvironment();
    for (const service of ['payments', 'search']) {
      expect(env.getPods(service).pods.every((p) => p.status === 'Running' && p.ready)).toBe(true);
    }
  });

  it('returns the most recent log lines, default 20, oldest first', () => {
    const env = new DemoEnvironment();
    const { lines, pod } = env.getLogs('checkout');
    expect(pod).toBeNull();
    expect(lines).toHaveLength(DEFAULT_LOG_LINES);
    const times = lines.map((l) => l.at);
    expect([...times].sort()).toEqual(times);
    // The default merged view is enough for a specialist to see the crash.
    expect(lines.some((l) => l.message.includes('OOMKilled'))).toBe(true);
    // Nothing logged after the simulation's "now".
    expect(lines.every((l) => l.at <= DEMO_NOW)).toBe(true);
  });

  it('filters logs to one pod and honours `lines`', () => {
    const env = new DemoEnvironment();
    const result = env.getLogs('checkout', CRASH_POD, 5);
    expect(result.pod).toBe(CRASH_POD);
    expect(result.lines).toHaveLength(5);
    expect(result.lines.every((l) => l.pod === CRASH_POD)).toBe(true);
    expect(result.lines.map((l) => l.message)).toContain('Container checkout terminated: reason=OOMKilled exitCode=137 memoryLimit=512Mi');
    expect(result.lines.map((l) => l.message)).toContain(
      'FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory',
    );
    // Asking for more lines than exist returns all of them.
    const all = env.getLogs('search', undefined, MAX_LOG_LINES).lines;
    expect(all.length).toBeGreaterThan(DEFAULT_LOG_LINES);
    expect(all.length).toBeLessThanOrEqual(MAX_LOG_LINES);
  });

  it('shows the payments slow query in its logs', () => {
    const { lines } = new DemoEnvironment().getLogs('payments');
    const slow = lines.filter((l) => l.message.startsWith('slow query'));
    expect(slow.length).toBeGreaterThan(0);
    expect(slow[0]?.message).toContain('ledger_entries');
    expect(slow[0]?.message).toContain('Seq Scan');
  });

  it('rejects out-of-range lines', () => {
    const env = new DemoEnvironment();
    for (const bad of [0, MAX_LOG_LINES + 1, 2.5]) {
      expect(errorOf(() => env.getLogs('checkout', undefined, bad)).argument).toBe('lines');
    }
  });

  it('reports the built-in problems in metrics and dilutes them over longer windows', () => {
    const env = new DemoEnvironment();
    const payments5m = env.getMetrics('payments', '5m');
    expect(payments5m.latencyP99Ms).toBeGreaterThan(2000);
    expect(payments5m.latencyP50Ms).toBeLessThan(100);
    expect(env.getMetrics('payments', '24h').latencyP99Ms).toBeLessThan(payments5m.latencyP99Ms);

    const checkout5m = env.getMetrics('checkout', '5m');
    expect(checkout5m.errorRatePercent).toBeGreaterThan(5);
    expect(checkout5m.memoryPercent).toBeGreaterThan(90);
    const checkout1h = env.getMetrics('checkout', '1h');
    const checkout24h = env.getMetrics('checkout', '24h');
    expect(checkout1h.errorRatePercent).toBeLessThan(checkout5m.errorRatePercent);
    expect(checkout24h.errorRatePercent).toBeLessThan(checkout1h.errorRatePercent);

    const search = env.getMetrics('search', '5m');
    expect(search).toMatchObject({ latencyP99Ms: 95, errorRatePercent: 0.05 });
    expect(env.getMetrics('search', '24h')).toMatchObject({ latencyP99Ms: 95, errorRatePercent: 0.05 });
  });

  it('defaults metrics to the 1h window', () => {
    const env = new DemoEnvironment();
    expect(env.getMetrics('checkout')).toEqual(env.getMetrics('checkout', '1h'));
  });

  it('lists deployments newest first, with the current one marked', () => {
    const { currentVersion, deployments } = new DemoEnvironment().getDeployments('checkout');
    expect(currentVersion).toBe('v42');
    expect(deployments.map((d) => d.version)).toEqual(['v42', 'v41', 'v40']);
    expect(deployments.filter((d) => d.current).map((d) => d.version)).toEqual(['v42']);
    expect(deployments[0]?.change).toContain('CART_CACHE_MAX_ENTRIES');
    expect(deployments.every((d) => d.rolledBackAt === null)).toBe(true);
  });

  it('is deterministic across instances', () => {
    const a = new DemoEnvironment();
    const b = new DemoEnvironment();
    for (const service of a.serviceNames()) {
      expect(a.getPods(service)).toEqual(b.getPods(service));
      expect(a.getLogs(service, undefined, MAX_LOG_LINES)).toEqual(b.getLogs(service, undefined, MAX_LOG_LINES));
      expect(a.getMetrics(service, '24h')).toEqual(b.getMetrics(service, '24h'));
      expect(a.getDeployments(service)).toEqual(b.getDeployments(service));
    }
    a.restartPod('checkout', CRASH_POD);
    b.restartPod('checkout', CRASH_POD);
    expect(a.getLogs('checkout')).toEqual(b.getLogs('checkout'));
  });

  it('returns copies, so editing a result does not change the state', () => {
    const env = new DemoEnvironment();
    const first = env.getPods('checkout');
    first.pods[1]!.status = 'Running';
    env.getLogs('checkout').lines.length = 0;
    expect(env.getPods('checkout').pods[1]?.status).toBe('CrashLoopBackOff');
    expect(env.getLogs('checkout').lines).toHaveLength(DEFAULT_LOG_LINES);
  });
});

describe('DemoEnvironment errors', () => {
  it('names an unknown service and lists the known ones', () => {
    const env = new DemoEnvironment();
    for (const call of [
      () => env.getPods('billing'),
      () => env.getLogs('billing'),
      () => env.getMetrics('billing'),
      () => env.getDeployments('billing'),
      () => env.restartPod('billing', CRASH_POD),
      () => env.rollbackDeployment('billing', 'v41'),
    ]) {
      const error = errorOf(call);
      expect(error.argument).toBe('service');
      expect(error.value).toBe('billing');
      expect(error.message).toContain('"billing"');
      expect(error.message).toContain('checkout, payments, search');
    }
  });

  it('names an unknown pod', () => {
    const env = new DemoEnvironment();
    const error = errorOf(() => env.restartPod('payments', CRASH_POD));
    expect(error.argument).toBe('pod');
    expect(error.message).toContain(`"${CRASH_POD}"`);
    expect(error.message).toContain('"payments"');
    expect(errorOf(() => env.getLogs('checkout', 'nope')).argument).toBe('pod');
  });

  it('names an unknown version', () => {
    const error = errorOf(() => new DemoEnvironment().rollbackDeployment('checkout', 'v99'));
    expect(error.argument).toBe('toVersion');
    expect(error.message).toContain('"v99"');
    expect(error.message).toContain('v40, v41, v42');
  });

  it('rejects an unknown window', () => {
    const env = new DemoEnvironment();
    // Simulates an unchecked caller; the MCP layer validates the enum before this point.
    expect(errorOf(() => env.getMetrics('checkout', '7d' as never)).argument).toBe('window');
  });
});

describe('DemoEnvironment mutations', () => {
  it('restart_pod brings the crashing pod back with restarts reset', () => {
    const env = new DemoEnvironment();
    const result = env.restartPod('checkout', CRASH_POD);
    expect(result).toMatchObject({ service: 'checkout', previousStatus: 'CrashLoopBackOff', previousRestarts: 7 });
    expect(result.pod).toMatchObject({ name: CRASH_POD, status: 'Running', ready: true, restarts: 0, lastTermination: null });
    expect(result.at > DEMO_NOW).toBe(true);
    expect(result.pod.startedAt).toBe(result.at);

    const pods = env.getPods('checkout').pods;
    expect(pods.every((p) => p.status === 'Running')).toBe(true);
    expect(env.listServices().services[0]).toMatchObject({ readyPods: 3 });

    const lines = env.getLogs('checkout', CRASH_POD, 3).lines;
    expect(lines.every((l) => l.at === result.at)).toBe(true);
    expect(lines[0]?.message).toContain('restarted');
  });

  it('restart_pod stops the errors but not the memory growth of v42', () => {
    const env = new DemoEnvironment();
    env.restartPod('checkout', CRASH_POD);
    const metrics = env.getMetrics('checkout', '5m');
    expect(metrics.errorRatePercent).toBeLessThan(1);
    expect(metrics.memoryPercent).toBeGreaterThan(75);
    expect(env.getDeployments('checkout').currentVersion).toBe('v42');
  });

  it('restart_pod does not fix the payments slow query', () => {
    const env = new DemoEnvironment();
    const before = env.getMetrics('payments', '5m');
    env.restartPod('payments', 'payments-5f8c7d9b6-h4kx2');
    const after = env.getMetrics('payments', '5m');
    expect({ ...after, asOf: before.asOf }).toEqual(before);
  });

  it('each mutation gets a later, deterministic timestamp', () => {
    const env = new DemoEnvironment();
    const first = env.restartPod('search', 'search-64b5c8f7d-8wq3n');
    const second = env.restartPod('search', 'search-64b5c8f7d-8wq3n');
    expect(first.at).toBe('2025-06-03T14:01:00.000Z');
    expect(second.at).toBe('2025-06-03T14:02:00.000Z');
    expect(env.now()).toBe(second.at);
  });

  it('rollback_deployment moves checkout to v41 and clears the crash and the memory problem', () => {
    const env = new DemoEnvironment();
    const result = env.rollbackDeployment('checkout', 'v41');
    expect(result).toMatchObject({ service: 'checkout', fromVersion: 'v42', toVersion: 'v41', changed: true });
    expect(result.pods.every((p) => p.status === 'Running' && p.ready && p.restarts === 0 && p.version === 'v41')).toBe(true);

    const { currentVersion, deployments } = env.getDeployments('checkout');
    expect(currentVersion).toBe('v41');
    expect(deployments.find((d) => d.current)?.version).toBe('v41');
    expect(deployments.find((d) => d.version === 'v42')?.rolledBackAt).toBe(result.at);

    const metrics = env.getMetrics('checkout', '5m');
    expect(metrics).toMatchObject({ errorRatePercent: 0.2, memoryPercent: 48, latencyP99Ms: 180 });
    expect(env.getLogs('checkout', CRASH_POD, 2).lines.map((l) => l.message)).toEqual([
      'Rolled back checkout from v42 to v41; pod replaced',
      'checkout v41 listening on :8080',
    ]);
  });

  it('rollback_deployment accepts a version number without the "v"', () => {
    const env = new DemoEnvironment();
    expect(env.rollbackDeployment('checkout', '40').toVersion).toBe('v40');
    expect(env.getDeployments('checkout').currentVersion).toBe('v40');
  });

  it('rollback_deployment to the current version changes nothing', () => {
    const env = new DemoEnvironment();
    const before = env.getPods('checkout');
    const result = env.rollbackDeployment('checkout', 'v42');
    expect(result).toMatchObject({ changed: false, fromVersion: 'v42', toVersion: 'v42', at: DEMO_NOW });
    expect(env.getPods('checkout')).toEqual(before);
    expect(env.now()).toBe(DEMO_NOW);
  });

  it('rolling forward to v42 again brings the memory problem back without a crash', () => {
    const env = new DemoEnvironment();
    env.rollbackDeployment('checkout', 'v41');
    env.rollbackDeployment('checkout', 'v42');
    expect(env.getPods('checkout').pods.every((p) => p.status === 'Running')).toBe(true);
    expect(env.getMetrics('checkout', '5m').memoryPercent).toBeGreaterThan(75);
  });

  it('keeps state per instance', () => {
    const changed = new DemoEnvironment();
    changed.rollbackDeployment('checkout', 'v41');
    expect(new DemoEnvironment().getDeployments('checkout').currentVersion).toBe('v42');
  });
});
