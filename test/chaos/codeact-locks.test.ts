import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  TestCluster,
  callLog,
  demoConfig,
  freePort,
  openClient,
  openContext,
  startService,
  writeConfig,
  type CallLog,
  type Client,
  type ServiceProcess,
  type TestContext,
} from '../helpers/index.js';

// Issue 19, item 1: CodeAct scripts within their limits must not cost other tasks their locks.
// Two specialist processes with a short worker lock (2 s, scaled down from the default 10 s);
// eight incidents at once, each a script that computes for about 1 s (well within its limit, 10
// s here so that a loaded machine does not reach it) and then calls a slow mutating tool (1.5 s). When the scripts ran on the specialist's
// event loop, four of them on one process stalled it for 4 s: locks lapsed, tasks ran on both
// processes, calls came back in doubt and /healthz took seconds. Now every task runs once, on
// one process, every effect once, and /healthz answers while the scripts compute.

const POD = 'checkout-7c9d6f8b4-9mz4q';
const INCIDENTS = 8;

let ctx: TestContext;
let cluster: TestCluster;
let client: Client;
let toolLog: CallLog;
const specialists: { process: ServiceProcess; port: number }[] = [];

/** Computes for about `ms` (reading the clock every 10,000 steps, not at each), then makes one slow mutating call. */
function script(i: number, ms = 1_000): string {
  return [
    'const t0 = Date.now(); let x = 0;',
    `for (;;) { for (let j = 0; j < 10000; j++) x = (x + j * 7) % 1000003; if (Date.now() - t0 > ${ms}) break; }`,
    `const r = call_tool("demo__restart_pod", { service: "checkout", pod: "${POD}", reason: "codeact-locks-${i}" });`,
    'return { final_result: { summary: "computed " + x + ", then restarted", findings: [], evidence: [JSON.stringify(r)] } };',
  ].join('\n');
}

beforeAll(async () => {
  ctx = await openContext('chaos-codeact-locks');
  const config = demoConfig();
  toolLog = callLog(join(ctx.dir, 'calls.jsonl'));
  config.mcpServers.demo.tools = {};
  config.mcpServers.demo.env = { DEMO_MCP_CALL_LOG: toolLog.path, DEMO_MCP_SLOW_MS: '1500' };
  config.workers = { lockDurationMs: 2_000, stalledIntervalMs: 1_000, maxStalledCount: 10 };
  config.specialists.coder = {
    ...config.specialists.kubernetes,
    description: 'CodeAct specialist of the test.',
    loop: 'codeact',
    fakePlan: [],
    codeact: { timeMs: 10_000, memoryMb: 64, maxToolCalls: 5 },
  };
  const env = { ...ctx.env, LOG_LEVEL: 'info', BOSUN_CONFIG: writeConfig(ctx, config) };
  // Split: a gateway and a coordinator, then the two specialist processes. Co-located: two
  // `bosun serve` processes, whose scripts run as local tasks in the run's pass, under the run's
  // lock, beside the coordinator's own lock renewals.
  cluster = await TestCluster.start(env, { specialistArgs: [] });
  const kind = cluster.layout === 'split' ? 'specialist' : 'serve';
  for (const name of [`${kind}-a`, `${kind}-b`]) {
    const port = await freePort();
    const p = cluster.add(startService(kind, { ...env, BOSUN_HEALTH_PORT: String(port) }, { name, args: ['--only', 'coder'] }));
    specialists.push({ process: p, port });
  }
  await Promise.all(specialists.map((s) => s.process.ready()));
  client = await openClient(ctx);
}, 120_000);

afterAll(async () => {
  await client?.close();
  await cluster?.stop();
  await ctx?.close();
});

/** Probes each specialist's /healthz every 100 ms until stopped; the slowest answer (or a timeout) of each. */
function probeHealth(): { stop(): Promise<number[]> } {
  let running = true;
  const loops = specialists.map(async ({ port }) => {
    let worst = 0;
    while (running) {
      const t0 = performance.now();
      try {
        const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(10_000) });
        await res.arrayBuffer();
        worst = Math.max(worst, res.ok ? performance.now() - t0 : Number.POSITIVE_INFINITY);
      } catch {
        worst = Number.POSITIVE_INFINITY; // no answer within 10 s
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    return worst;
  });
  return {
    async stop() {
      running = false;
      return Promise.all(loops);
    },
  };
}

describe('CodeAct scripts computing on two specialist processes with a short lock', () => {
  it('each task runs once, on one process, each effect once, nothing in doubt, and /healthz answers promptly', async () => {
    const health = probeHealth();
    const published = await Promise.all(
      Array.from({ length: INCIDENTS }, (_, i) =>
        client.publish({
          id: `codeact-locks-${i}`,
          source: 'chaos',
          reason: 'PodCrashLooping',
          summary: 'compute, then restart',
          labels: { service: 'checkout' },
          payload: { fake: { route: ['coder'], scripts: { coder: [script(i)] } } },
        }),
      ),
    );
    const results = await Promise.all(published.map(({ job }) => client.result(job, 150_000)));
    const worst = await health.stop();
    process.stdout.write(
      `[chaos] codeact locks: slowest /healthz of each specialist while scripts computed: ${worst.map((w) => `${w.toFixed(0)} ms`).join(', ')}\n`,
    );

    expect(results.map((r) => r.status)).toEqual(Array.from({ length: INCIDENTS }, () => 'completed'));
    expect(results.every((r) => !r.inDoubt)).toBe(true);
    for (const { runId } of published) {
      const events = (await client.events.complete(runId)).filter((e) => e.agent === 'coder');
      // Once: never started again by the other process after a lapsed lock, never replayed.
      expect(
        events.filter((e) => e.type === 'agent.started'),
        runId,
      ).toHaveLength(1);
      expect(
        events.filter((e) => e.type === 'codeact.replayed'),
        runId,
      ).toHaveLength(0);
      expect(
        events.filter((e) => e.type === 'tool.in_doubt'),
        runId,
      ).toHaveLength(0);
    }
    const applied = toolLog.calls('restart_pod').map((c) => String(c.args.reason));
    expect(applied.sort()).toEqual(Array.from({ length: INCIDENTS }, (_, i) => `codeact-locks-${i}`).sort());
    const lockErrors = specialists.flatMap((s) => s.process.lines.filter((l) => /could not renew lock|missing lock/i.test(l)));
    expect(lockErrors).toEqual([]);
    // Before: the sum of a process's scripts (4 s and more here; 8-21 s in the issue). A
    // generous bound: on a loaded 2-core machine every answer is slow.
    for (const w of worst) expect(w).toBeLessThan(2_500);
  }, 240_000);
});
