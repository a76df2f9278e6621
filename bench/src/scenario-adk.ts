/**
 * Scenario 8: the standard incident in-process with Google's Agent Development Kit for
 * TypeScript (`@google/adk`), beside Bosun's figures of scenarios 1 and 2 of the same run.
 *
 * One LlmAgent, a zero-latency fake model (a BaseLlm) with the plan of Bosun's fake model for
 * the standard incident (get_pods, get_deployments, then the answer), and the same demo MCP
 * server over stdio. No durability: sessions, events and tool results live in this process only.
 *
 * ADK is measured two ways:
 * - `as shipped`: ADK's MCPToolset, which (in @google/adk 2.0.0) opens a new MCP session — a new
 *   stdio server process — for every tool listing (twice per model turn) and every tool call: 8
 *   server processes for the standard incident (counted once by patching createSession);
 * - `one session`: ADK's MCPTool over one long-lived stdio session, as Bosun's gateway keeps one
 *   MCP server process. This is the fair peer, and the one the target compares with.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type * as AdkModule from '@google/adk';
import type { BaseLlmConnection, BaseTool, LlmRequest, LlmResponse, MCPConnectionParams } from '@google/adk';
import { within, type Ctx, type Row, type ScenarioResult } from './scenarios.js';
import { bosunFigures, ratio } from './beside-bosun.js';
import { STANDARD_CALLS } from './peers/plan.js';
import { checkAbort, fmt, note, percentile } from './util.js';

/** The ADK module, loaded with import() only when scenario 8 runs (it is large). */
type Adk = typeof AdkModule;
type McpClient = Awaited<ReturnType<InstanceType<Adk['MCPSessionManager']>['createSession']>>;

/** The two read-only calls of the standard incident, as Bosun's fake model makes them. */
export const ADK_PLAN: readonly { tool: string; args: Record<string, unknown> }[] = STANDARD_CALLS;

/** The incident text the agent receives (what Bosun's coordinator puts in its first message). */
const INCIDENT_TEXT = JSON.stringify({
  id: 'bench',
  source: 'bench',
  reason: 'PodCrashLooping',
  summary: 'bench',
  labels: { service: 'checkout' },
});

/** Names of the tools already answered in the request's history. */
function answeredTools(request: LlmRequest): Set<string> {
  const out = new Set<string>();
  for (const c of request.contents) for (const p of c.parts ?? []) if (p.functionResponse?.name) out.add(p.functionResponse.name);
  return out;
}

/**
 * The fake model's decision for one request, from the history alone (as Bosun's fake model
 * decides): the first planned call not answered yet, else a final text answer.
 */
export function fakeTurn(request: LlmRequest): LlmResponse {
  const answered = answeredTools(request);
  const next = ADK_PLAN.find((c) => !answered.has(c.tool));
  if (next) return { content: { role: 'model', parts: [{ functionCall: { name: next.tool, args: next.args } }] } };
  return { content: { role: 'model', parts: [{ text: `Summary: checked ${ADK_PLAN.map((c) => c.tool).join(', ')} for checkout.` }] } };
}

/** Builds the fake model class on the loaded ADK module (ADK is imported only when scenario 8 runs). */
function fakeModelClass(adk: Adk) {
  return class FakeAdkModel extends adk.BaseLlm {
    constructor() {
      super({ model: 'bosun-bench-fake' });
    }
    // eslint-disable-next-line @typescript-eslint/require-await -- ADK's interface is an async generator; the fake answers at once.
    async *generateContentAsync(request: LlmRequest): AsyncGenerator<LlmResponse, void> {
      yield fakeTurn(request);
    }
    connect(): Promise<BaseLlmConnection> {
      return Promise.reject(new Error('the bench fake model has no live connection'));
    }
  };
}

/** An ADK MCP session manager that keeps one session (one server process) for every call. */
function oneSessionManagerClass(adk: Adk) {
  return class OneSessionManager extends adk.MCPSessionManager {
    private session: Promise<McpClient> | undefined;
    override createSession(): Promise<McpClient> {
      this.session ??= super.createSession();
      return this.session;
    }
    /** Sessions are kept open between calls; {@link shutdown} closes the one session. */
    override closeSession(): Promise<void> {
      return Promise.resolve();
    }
    async shutdown(): Promise<void> {
      const s = this.session;
      this.session = undefined;
      if (s) await super.closeSession(await s);
    }
  };
}

/** One ADK agent and runner over the demo MCP server; `close()` ends every MCP session. */
export interface AdkHarness {
  /** Runs the standard incident; resolves with the final answer and the tool calls seen. */
  run(userId: string): Promise<{ answer: string; toolCalls: string[] }>;
  close(): Promise<void>;
}

/** The demo MCP server's stdio parameters, as the gateway starts it (node mcp-servers/demo/dist/bundle/main.js). */
export function demoServerParams(root: string): MCPConnectionParams {
  return {
    type: 'StdioConnectionParams',
    serverParams: {
      command: process.execPath,
      args: [join(root, 'mcp-servers/demo/dist/bundle/main.js')],
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' },
      stderr: 'ignore',
    },
    timeout: 30_000,
  };
}

/** Starts an ADK harness: `mode` `shipped` (MCPToolset as is) or `session` (one MCP session). */
export async function startAdk(root: string, mode: 'shipped' | 'session'): Promise<AdkHarness> {
  const adk = await import('@google/adk');
  adk.setLogLevel(adk.LogLevel.ERROR);
  const params = demoServerParams(root);
  let tools: (BaseTool | InstanceType<Adk['MCPToolset']>)[];
  let close: () => Promise<void>;
  if (mode === 'shipped') {
    const toolset = new adk.MCPToolset(
      params,
      ADK_PLAN.map((c) => c.tool),
    );
    tools = [toolset];
    close = () => toolset.close();
  } else {
    const manager = new (oneSessionManagerClass(adk))(params);
    const session = await manager.createSession();
    const listed = await session.listTools();
    tools = listed.tools.filter((t) => ADK_PLAN.some((c) => c.tool === t.name)).map((t) => new adk.MCPTool(t, manager));
    close = () => manager.shutdown();
  }
  const agent = new adk.LlmAgent({
    name: 'kubernetes',
    description: 'Investigates Kubernetes incidents with read-only tools.',
    instruction: 'Investigate the incident with the tools you have, then answer with a summary.',
    model: new (fakeModelClass(adk))(),
    tools,
  });
  const runner = new adk.InMemoryRunner({ agent, appName: 'bosun-bench' });
  return {
    async run(userId) {
      let answer = '';
      const toolCalls: string[] = [];
      for await (const event of runner.runEphemeral({ userId, newMessage: { role: 'user', parts: [{ text: INCIDENT_TEXT }] } })) {
        if (event.errorMessage) throw new Error(`ADK run ${userId}: ${event.errorCode ?? 'error'}: ${event.errorMessage}`);
        for (const c of adk.getFunctionCalls(event)) toolCalls.push(c.name ?? '?');
        if (adk.isFinalResponse(event)) answer += (event.content?.parts ?? []).map((p) => p.text ?? '').join('');
      }
      if (!answer) throw new Error(`ADK run ${userId} ended without a final answer`);
      return { answer, toolCalls };
    },
    close,
  };
}

// ---------------------------------------------------------------------------------------------
// CPU and RSS of this process and its children (the MCP server processes)

/** USER_HZ: 100 on every Linux this runs on. */
const CLOCK_TICKS = 100;

/** utime, stime, cutime, cstime (clock ticks) of a process; NaNs once it is gone. */
function statTicks(pid: number | 'self'): { own: number; reaped: number } {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    // After the command: state(0) … utime(11) stime(12) cutime(13) cstime(14)
    return { own: Number(f[11]) + Number(f[12]), reaped: Number(f[13]) + Number(f[14]) };
  } catch {
    return { own: Number.NaN, reaped: Number.NaN };
  }
}

function livePids(): number[] {
  try {
    return readFileSync(`/proc/${process.pid}/task/${process.pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

function rssKb(pid: number | 'self'): number {
  try {
    return Number(/^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? Number.NaN);
  } catch {
    return Number.NaN;
  }
}

/**
 * CPU seconds over an interval: this process (process.cpuUsage), its live children (the MCP
 * server: /proc/<pid>/stat) and the children that ended and were reaped meanwhile (cutime +
 * cstime of this process: the per-call servers of ADK's MCPToolset).
 */
class SelfCpuMeter {
  private readonly self0 = process.cpuUsage();
  private readonly reaped0 = statTicks('self').reaped;
  private readonly live0 = new Map(livePids().map((pid) => [pid, statTicks(pid).own]));
  private readonly t0 = performance.now();

  stop(): { wallS: number; benchS: number; childrenS: number } {
    const self = process.cpuUsage(this.self0);
    let ticks = statTicks('self').reaped - this.reaped0;
    for (const pid of livePids()) {
      const own = statTicks(pid).own;
      if (Number.isFinite(own)) ticks += own - (this.live0.get(pid) ?? 0);
    }
    return { wallS: (performance.now() - this.t0) / 1000, benchS: (self.user + self.system) / 1e6, childrenS: ticks / CLOCK_TICKS };
  }
}

/** Peak RSS of this process and of its children, sampled every 200 ms. */
class SelfRssSampler {
  peakSelfKb = 0;
  peakChildrenKb = 0;
  private readonly timer = setInterval(() => this.sample(), 200);
  constructor() {
    this.timer.unref();
    this.sample();
  }
  private sample(): void {
    this.peakSelfKb = Math.max(this.peakSelfKb, rssKb('self') || 0);
    this.peakChildrenKb = Math.max(
      this.peakChildrenKb,
      livePids().reduce((a, p) => a + (rssKb(p) || 0), 0),
    );
  }
  stop(): { selfMb: number; childrenMb: number } {
    clearInterval(this.timer);
    this.sample();
    return { selfMb: this.peakSelfKb / 1024, childrenMb: this.peakChildrenKb / 1024 };
  }
}

// ---------------------------------------------------------------------------------------------
// The measurements

interface Sequential {
  ms: number[];
  cpuMsPerIncident: number;
  benchCpuMs: number;
  childrenCpuMs: number;
}

async function sequential(h: AdkHarness, tag: string, warm: number, n: number, budgetMs: number): Promise<Sequential> {
  for (let i = 0; i < warm; i++) await h.run(`${tag}-warm-${i}`);
  const ms: number[] = [];
  const meter = new SelfCpuMeter();
  const t0 = performance.now();
  for (let i = 0; i < n && performance.now() - t0 < budgetMs; i++) {
    checkAbort();
    const s = performance.now();
    const r = await h.run(`${tag}-${i}`);
    ms.push(performance.now() - s);
    if (r.toolCalls.length !== ADK_PLAN.length)
      throw new Error(`ADK run ${tag}-${i} made ${r.toolCalls.length} tool calls, not ${ADK_PLAN.length}`);
  }
  const cpu = meter.stop();
  const k = Math.max(1, ms.length);
  return {
    ms,
    cpuMsPerIncident: (1000 * (cpu.benchS + cpu.childrenS)) / k,
    benchCpuMs: (1000 * cpu.benchS) / k,
    childrenCpuMs: (1000 * cpu.childrenS) / k,
  };
}

interface Throughput {
  n: number;
  done: number;
  wallMs: number;
  perSecond: number;
  cpuMsPerIncident: number;
  benchCpuMs: number;
  childrenCpuMs: number;
  rss: { selfMb: number; childrenMb: number };
}

/** `n` incidents, at most `concurrency` at a time, until done or `budgetMs`. */
async function throughput(h: AdkHarness, n: number, concurrency: number, budgetMs: number): Promise<Throughput> {
  const rss = new SelfRssSampler();
  const meter = new SelfCpuMeter();
  const t0 = performance.now();
  let next = 0;
  let done = 0;
  const worker = async () => {
    while (next < n && performance.now() - t0 < budgetMs) {
      checkAbort();
      const i = next++;
      await h.run(`tput-${i}`);
      done++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const wallMs = performance.now() - t0;
  const cpu = meter.stop();
  return {
    n,
    done,
    wallMs,
    perSecond: done / (wallMs / 1000),
    cpuMsPerIncident: (1000 * (cpu.benchS + cpu.childrenS)) / Math.max(1, done),
    benchCpuMs: (1000 * cpu.benchS) / Math.max(1, done),
    childrenCpuMs: (1000 * cpu.childrenS) / Math.max(1, done),
    rss: rss.stop(),
  };
}

/**
 * Scenario 8. The rows put Bosun in the `bosun` column and ADK (one MCP session) in the floor
 * column; the ratio is Bosun / ADK. Bosun's figures come from scenarios 1 and 2 of this run.
 */
export async function scenarioAdk(ctx: Ctx, earlier: readonly ScenarioResult[]): Promise<ScenarioResult> {
  const quick = ctx.quick;
  const n = quick ? 30 : 300;
  const shippedN = quick ? 3 : 10;
  const tputN = quick ? 500 : 5000;
  const concurrency = 50;
  const result: ScenarioResult = { id: 8, name: 'adk', rows: [], notes: [], data: {} };
  const adkVersion = readAdkVersion();
  const rssBeforeMb = rssKb('self') / 1024;

  note(`8 adk: @google/adk ${adkVersion}, the standard incident in-process; MCPToolset as shipped, ${shippedN} sequential runs`);
  const shipped = await startAdk(ctx.root, 'shipped');
  let shippedSeq: Sequential;
  try {
    shippedSeq = await sequential(shipped, 'shipped', 1, shippedN, within(ctx, 60_000, 0.2));
  } finally {
    await shipped.close();
  }

  note(`8 adk: one MCP session, ${n} sequential runs, then ${tputN} at most ${concurrency} at a time`);
  const h = await startAdk(ctx.root, 'session');
  let seq: Sequential;
  let tput: Throughput;
  try {
    seq = await sequential(h, 'seq', quick ? 5 : 20, n, within(ctx, quick ? 30_000 : 90_000, 0.4));
    tput = await throughput(h, tputN, concurrency, within(ctx, quick ? 60_000 : 180_000, 0.9));
  } finally {
    await h.close();
  }

  const b = bosunFigures(earlier);
  const missing = b.p50 === undefined || b.cpuMs === undefined ? ' (Bosun: run with --only 1,2,8)' : '';
  const label = `8 adk ${adkVersion} (in-process, no durability)${missing}`;
  const p50 = percentile(seq.ms, 50);
  const p99 = percentile(seq.ms, 99);
  const cpuRatio = b.cpuMs !== undefined ? b.cpuMs / tput.cpuMsPerIncident : undefined;
  const rows: Row[] = [
    {
      scenario: label,
      metric: `p50 latency (ms), Bosun s1 vs ADK one session (${seq.ms.length} sequential)`,
      bosun: fmt(b.p50),
      floor: fmt(p50, 2),
      ratio: ratio(b.p50, p50),
      result: 'n/a',
    },
    { scenario: '', metric: 'p99 latency (ms), same', bosun: fmt(b.p99), floor: fmt(p99, 2), ratio: ratio(b.p99, p99), result: 'n/a' },
    {
      scenario: '',
      metric: `incidents/s, Bosun s2 vs ADK (${tput.done} at most ${concurrency} at a time)`,
      bosun: fmt(b.perSecond),
      floor: fmt(tput.perSecond),
      ratio: ratio(b.perSecond, tput.perSecond),
      result: 'n/a',
    },
    {
      scenario: '',
      metric: 'CPU ms per incident, all processes (Bosun s2 with Redis and NATS; ADK + MCP server)',
      bosun: fmt(b.cpuMs, 2),
      floor: fmt(tput.cpuMsPerIncident, 2),
      ratio: ratio(b.cpuMs, tput.cpuMsPerIncident),
      target: '≤ 3.00× ADK',
      result: cpuRatio === undefined ? 'n/a' : cpuRatio <= 3 ? 'met' : 'missed',
    },
    {
      scenario: '',
      metric: 'peak RSS (MB), ADK: bench process + MCP server',
      bosun: '—',
      floor: `${fmt(tput.rss.selfMb, 0)} + ${fmt(tput.rss.childrenMb, 0)}`,
      result: 'n/a',
    },
    {
      scenario: '',
      metric: `ADK MCPToolset as shipped (a server process per call): p50 ms, CPU ms/incident (${shippedSeq.ms.length} seq.)`,
      bosun: '—',
      floor: `${fmt(percentile(shippedSeq.ms, 50))}, ${fmt(shippedSeq.cpuMsPerIncident, 1)}`,
      result: 'n/a',
    },
  ];
  result.rows.push(...rows);
  result.notes.push(
    `ADK = @google/adk ${adkVersion}: one LlmAgent, InMemoryRunner.runEphemeral per incident, a zero-latency fake BaseLlm (get_pods, get_deployments, answer), ADK's MCPTool over one stdio session to mcp-servers/demo; the ratio column is Bosun / ADK`,
    `ADK CPU ms per incident: throughput ${fmt(tput.cpuMsPerIncident, 2)} (bench process ${fmt(tput.benchCpuMs, 2)}, MCP server ${fmt(tput.childrenCpuMs, 2)}); sequential ${fmt(seq.cpuMsPerIncident, 2)} (bench ${fmt(seq.benchCpuMs, 2)}, MCP ${fmt(seq.childrenCpuMs, 2)})`,
    `Bosun CPU ms per incident (scenario 2): ${fmt(b.cpuMs, 2)} with Redis and NATS, ${fmt(b.servicesCpuMs, 2)} for the services and the gateway's MCP server alone (${ratio(b.servicesCpuMs, tput.cpuMsPerIncident)} ADK's); Redis and NATS are shared with anything else running on this machine`,
    `ADK MCPToolset as shipped opens a new MCP session (spawns the stdio server) for each tool listing (twice per model turn) and each tool call, 8 per incident with 2.0.0: p50 ${fmt(percentile(shippedSeq.ms, 50))} ms, CPU ${fmt(shippedSeq.cpuMsPerIncident, 1)} ms per incident (bench ${fmt(shippedSeq.benchCpuMs, 1)}, MCP servers ${fmt(shippedSeq.childrenCpuMs, 1)}); not run for throughput`,
    `bench process RSS before ADK was loaded: ${fmt(rssBeforeMb, 0)} MB (it also holds the bench's own Redis and NATS clients)`,
  );
  if (tput.done < tputN)
    result.notes.push(`ADK throughput: only ${tput.done}/${tputN} finished within the time budget; the rate is over those`);
  result.data = {
    adkVersion,
    concurrency,
    shipped: { p50: percentile(shippedSeq.ms, 50), samples: shippedSeq.ms.length, cpuMs: shippedSeq.cpuMsPerIncident },
    sequential: { p50, p90: percentile(seq.ms, 90), p99, samples: seq.ms.length, cpuMs: seq.cpuMsPerIncident },
    throughput: tput,
    bosun: b,
    cpuRatio: cpuRatio ?? null,
    rssBeforeMb,
  };
  return result;
}

/** The installed @google/adk version (its package.json). */
function readAdkVersion(): string {
  try {
    const main = import.meta.resolve('@google/adk');
    let dir = dirname(new URL(main).pathname);
    for (let i = 0; i < 6; i++, dir = dirname(dir)) {
      try {
        const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
        if (pkg.name === '@google/adk') return pkg.version ?? '?';
      } catch {
        /* no package.json at this level */
      }
    }
  } catch {
    /* not resolvable */
  }
  return '?';
}
