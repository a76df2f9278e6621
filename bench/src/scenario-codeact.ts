import { allRunsSubject, type IncidentInput } from '@bosun/contract';
import { CpuMeter } from './cluster.js';
import { IncidentClient, startBosun, within, withPrefix, type Ctx, type ScenarioResult } from './scenarios.js';
import { checkAbort, fmt, note, percentile } from './util.js';
import { INCIDENTS_QUEUE } from '@bosun/contract';
import { runScript } from '@bosun/sandbox';

/** The three read-only calls both loops make for one incident. */
const CALLS = [
  { tool: 'demo__get_pods', args: { service: 'checkout' } },
  { tool: 'demo__get_deployments', args: { service: 'checkout' } },
  { tool: 'demo__get_logs', args: { service: 'checkout', lines: 5 } },
];

/** The standard incident for one specialist: `kubernetes` (task loop) or `triage` (CodeAct, the three calls in one script). */
function incidentFor(id: string, agent: 'kubernetes' | 'triage'): IncidentInput {
  return {
    id,
    source: 'bench',
    reason: 'PodCrashLooping',
    summary: 'bench',
    labels: { service: 'checkout' },
    payload: { fake: { route: [agent], calls: { [agent]: CALLS } } },
  };
}

/** Counts the specialists' model calls per incident, from the events. */
class TurnCounter {
  readonly turns = new Map<string, number>();
  private readonly sub: { unsubscribe(): void } | undefined;
  constructor(ctx: Ctx, prefix: string) {
    this.sub = ctx.nc?.subscribe(allRunsSubject(prefix), {
      callback: (err, msg) => {
        if (err) return;
        try {
          const e = msg.json<{ type: string; incidentId: string; agent?: string }>();
          if (e.type === 'model.called' && e.agent !== 'coordinator') this.turns.set(e.incidentId, (this.turns.get(e.incidentId) ?? 0) + 1);
        } catch {
          /* not an event */
        }
      },
    });
  }
  close(): void {
    this.sub?.unsubscribe();
  }
}

interface LoopMeasure {
  ms: number[];
  turns: number[];
  specialistCpuMs: number;
  statuses: Record<string, number>;
}

async function measure(
  ctx: Ctx,
  client: IncidentClient,
  counter: TurnCounter,
  agent: 'kubernetes' | 'triage',
  n: number,
  budgetMs: number,
  procs: Parameters<typeof CpuMeter.start>[0],
): Promise<LoopMeasure> {
  const out: LoopMeasure = { ms: [], turns: [], specialistCpuMs: 0, statuses: {} };
  const meter = await CpuMeter.start(procs, ctx.redis);
  const t0 = performance.now();
  for (let i = 0; i < n && performance.now() - t0 < budgetMs; i++) {
    checkAbort();
    const id = `${agent}-${i}`;
    const r = await client.one(id, 30_000, incidentFor(id, agent));
    out.ms.push(r.ms);
    out.statuses[r.status] = (out.statuses[r.status] ?? 0) + 1;
  }
  const cpu = await meter.stop();
  await new Promise((r) => setTimeout(r, 300));
  for (let i = 0; i < out.ms.length; i++) out.turns.push(counter.turns.get(`${agent}-${i}`) ?? 0);
  out.specialistCpuMs = (1000 * (cpu.cpuSeconds.specialist ?? 0)) / Math.max(1, out.ms.length);
  return out;
}

/** Runs `n` scripts that each wait on a tool that answers only once all are suspended; the process's RSS then. */
async function suspendedScripts(n: number): Promise<{ rssMb: number; addedMb: number }> {
  const before = process.memoryUsage().rss;
  let release: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let waiting = 0;
  const host = {
    tools: ['demo__slow'],
    callTool: async () => {
      waiting++;
      await gate;
      return { ok: 1 };
    },
    now: () => Date.now(),
    random: () => Math.random(),
  };
  const runs = Array.from({ length: n }, () => runScript('return { observation: call_tool("demo__slow", {}) };', host));
  const t0 = performance.now();
  while (waiting < n && performance.now() - t0 < 60_000) await new Promise((r) => setTimeout(r, 50));
  const rss = process.memoryUsage().rss;
  release();
  await Promise.all(runs);
  return { rssMb: rss / 1048576, addedMb: (rss - before) / 1048576 };
}

/**
 * Scenario 6: the standard incident (three read-only tools) through the task loop
 * (`kubernetes`) and through the CodeAct loop (`triage`, one script), sequentially, in the same
 * cluster: model turns per incident, p50 latency, and the specialist's CPU per incident. The
 * target: the sandbox and a three-call script add at most 5 ms of specialist CPU per incident
 * over the same calls in the task loop.
 */
export async function scenarioCodeAct(ctx: Ctx): Promise<ScenarioResult> {
  const n = ctx.quick ? 15 : 60;
  const result: ScenarioResult = { id: 6, name: 'codeact', rows: [], notes: [], data: { n } };
  await withPrefix(ctx, async (prefix) => {
    note(`6 codeact: the standard incident through the task loop and the CodeAct loop, ${n} sequential runs each`);
    const b = await startBosun(ctx, prefix, 6, {});
    try {
      const client = await IncidentClient.open(ctx, prefix, INCIDENTS_QUEUE);
      const counter = new TurnCounter(ctx, prefix);
      try {
        for (let i = 0; i < 3; i++) {
          await client.one(`warm-k-${i}`, 30_000, incidentFor(`warm-k-${i}`, 'kubernetes'));
          await client.one(`warm-t-${i}`, 30_000, incidentFor(`warm-t-${i}`, 'triage'));
        }
        const budget = within(ctx, ctx.quick ? 30_000 : 90_000, 0.45);
        const task = await measure(ctx, client, counter, 'kubernetes', n, budget, b.cluster.procs);
        const codeact = await measure(ctx, client, counter, 'triage', n, budget, b.cluster.procs);
        const extraCpu = codeact.specialistCpuMs - task.specialistCpuMs;
        result.rows.push(
          {
            scenario: `6 codeact (${codeact.ms.length} + ${task.ms.length} sequential runs)`,
            metric: 'model turns per incident, specialist (CodeAct / task)',
            bosun: `${fmt(percentile(codeact.turns, 50), 0)} / ${fmt(percentile(task.turns, 50), 0)}`,
            result: 'n/a',
          },
          {
            scenario: '',
            metric: 'p50 publish→result (ms), CodeAct / task',
            bosun: `${fmt(percentile(codeact.ms, 50))} / ${fmt(percentile(task.ms, 50))}`,
            result: 'n/a',
          },
          {
            scenario: '',
            metric: 'specialist CPU ms per incident, CodeAct − task',
            bosun: `${fmt(codeact.specialistCpuMs, 2)} − ${fmt(task.specialistCpuMs, 2)} = ${fmt(extraCpu, 2)}`,
            target: '≤ 5 ms',
            result: extraCpu <= 5 ? 'met' : 'missed',
          },
        );
        result.notes.push(`statuses: CodeAct ${JSON.stringify(codeact.statuses)}, task ${JSON.stringify(task.statuses)}`);
        const suspended = await suspendedScripts(200);
        result.rows.push({
          scenario: '',
          metric: '200 scripts suspended on a slow tool: RSS of the process (MB)',
          bosun: `${fmt(suspended.rssMb, 0)} (+${fmt(suspended.addedMb, 0)})`,
          target: '< 400 MB',
          result: suspended.rssMb < 400 ? 'met' : 'missed',
        });
        result.notes.push('the 200 suspended scripts run in the bench process itself, on @bosun/sandbox alone (no specialist around them)');
        result.data.codeact = { p50: percentile(codeact.ms, 50), turns: percentile(codeact.turns, 50), cpuMs: codeact.specialistCpuMs };
        result.data.task = { p50: percentile(task.ms, 50), turns: percentile(task.turns, 50), cpuMs: task.specialistCpuMs };
      } finally {
        counter.close();
        await client.close();
      }
    } finally {
      await b.cluster.stop();
    }
  });
  return result;
}
