import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  callLog,
  startClusterTest,
  startService,
  waitUntil,
  type CallLog,
  type ClusterTest,
  type ServiceProcess,
} from '../helpers/index.js';

// The co-located layout under SIGKILL (docs/scaling.md, "Layouts"): a `bosun serve` process dies
// with its coordinator, its specialists and its gateway at once, the gateway in the middle of a
// mutating call. What it held resumes in any other process — a split cluster or another
// `bosun serve` — from the same checkpoints and records, and no effect happens twice: a call that
// was in the MCP server when the process died is declared in doubt, never sent again.

let t: ClusterTest;
let toolLog: CallLog;

const restart = (reason: string) => ({ tool: 'demo__restart_pod', args: { service: 'checkout', pod: 'checkout-7c9d6f8b4-9mz4q', reason } });

function incident(id: string, calls: { tool: string; args: Record<string, unknown> }[]) {
  return {
    id,
    source: 'chaos',
    reason: 'PodCrashLooping',
    summary: id,
    labels: { service: 'checkout' },
    payload: { fake: { calls: { kubernetes: calls } } },
  };
}

/** How many times the MCP server received restart_pod for each reason. */
function restartsByReason(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const c of toolLog.calls('restart_pod')) counts.set(String(c.args.reason), (counts.get(String(c.args.reason)) ?? 0) + 1);
  return counts;
}

beforeAll(async () => {
  t = await startClusterTest(
    'chaos-colocated',
    (config, c) => {
      toolLog = callLog(join(c.dir, 'calls.jsonl'));
      // About crashes, not approvals: the mutating tools run unasked. Every call takes 400 ms (the
      // storm's kills land in calls); a rollback never answers (the first test's kill point).
      config.mcpServers.demo.tools = {};
      config.mcpServers.demo.env = { DEMO_MCP_CALL_LOG: toolLog.path, DEMO_MCP_SLOW_MS: '400', DEMO_MCP_HANG_TOOLS: 'rollback_deployment' };
      // A dead process's jobs move on after 3 s.
      config.workers = { lockDurationMs: 3_000, stalledIntervalMs: 1_000, maxStalledCount: 10 };
      config.specialists.kubernetes.concurrency = 5;
      // The CodeAct loop in the co-located process too (its scripts run on the sandbox's threads).
      config.specialists.coder = {
        ...config.specialists.kubernetes,
        description: 'CodeAct specialist of the test.',
        loop: 'codeact',
        fakePlan: [],
      };
    },
    { layout: 'colocated', specialists: 2 },
  );
});

afterAll(async () => {
  await t?.close();
});

describe('bosun serve processes SIGKILLed', () => {
  it('a run whose process died mid-call resumes in a split cluster; the call is in doubt, sent once', async () => {
    const { client, cluster, env } = t;
    const rollback = { tool: 'demo__rollback_deployment', args: { service: 'checkout', toVersion: 'v41' } };
    const { job, runId } = await client.publish(
      incident('co-kill-1', [{ tool: 'demo__get_pods', args: { service: 'checkout' } }, rollback]),
    );
    const started = await client.events.waitFor(
      (e) => e.runId === runId && e.type === 'tool.started' && e.data.tool === rollback.tool,
      30_000,
      'rollback started',
    );
    await waitUntil(() => toolLog.count('rollback_deployment') === 1, 10_000, 'the MCP server received the rollback', 10);
    // Every co-located process: the run's coordinator, its specialist and the gateway in the call
    // may be any of them.
    const serves = cluster.processes.filter((p) => p.running && p.name.startsWith('serve'));
    for (const p of serves) p.kill('SIGKILL');
    await Promise.all(serves.map((p) => p.exited));
    // The split layout takes over.
    const split = [
      startService('gateway', env),
      startService('coordinator', env),
      startService('specialist', env, { name: 'specialist-split' }),
    ];
    split.forEach((p) => cluster.add(p));
    await Promise.all(split.map((p) => p.ready({ timeoutMs: 60_000 })));

    const result = await client.result(job, 90_000);
    expect(result.status).toBe('partial');
    expect(result.inDoubt).toEqual({ count: 1, calls: [{ key: String(started.data.key), tool: rollback.tool, agent: 'kubernetes' }] });
    expect(toolLog.count('rollback_deployment')).toBe(1);
    // The read-only call before it was answered from its record, not made again.
    expect(toolLog.calls('get_pods').filter((c) => c.args.service === 'checkout')).toHaveLength(1);
    // The split processes stop; two co-located ones serve the next test.
    await Promise.all(split.map((p) => p.stop()));
    const again = [1, 2].map((i) => cluster.add(startService('serve', env, { name: `serve-r${i}` })));
    await Promise.all(again.map((p) => p.ready({ timeoutMs: 60_000 })));
  }, 150_000);

  it('completes 30 incidents while co-located processes are SIGKILLed repeatedly; no mutating call runs twice', async () => {
    const { client, cluster, env } = t;
    const n = 30;
    const jobs = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        client.incidents.add(
          'incident',
          incident(`co-storm-${i}`, [
            { tool: 'demo__get_pods', args: { service: 'checkout' } },
            restart(`co-storm-${i}`),
            { tool: 'demo__get_logs', args: { service: 'checkout', lines: 5 } },
          ]),
          { jobId: `co-storm-${i}` },
        ),
      ),
    );
    // Kills at points of progress, as in kill-specialist.test.ts: at the first storm tool call,
    // then each time 6 more runs have ended; the replacement is not awaited before the next.
    const ended = () => client.events.events.filter((e) => e.type === 'run.completed' && e.incidentId.startsWith('co-storm-')).length;
    const up = new Set<ServiceProcess>(cluster.processes.filter((p) => p.running && p.name.startsWith('serve')));
    const startups: Promise<void>[] = [];
    let kills = 0;
    let done = false;
    const killer = (async () => {
      await client.events.waitFor((e) => e.type === 'tool.started' && e.incidentId.startsWith('co-storm-'), 30_000, 'the first storm call');
      for (const threshold of [0, 6, 12]) {
        await waitUntil(() => done || ended() >= threshold, 120_000, `${threshold} storm runs ended`);
        await waitUntil(() => done || [...up].some((p) => p.running), 60_000, 'a co-located process up to kill');
        if (done) break;
        const victim = [...up].filter((p) => p.running)[kills % 2] ?? [...up].find((p) => p.running)!;
        victim.kill('SIGKILL');
        up.delete(victim);
        kills++;
        const replacement = cluster.add(startService('serve', env, { name: `serve-k${kills}` }));
        startups.push(replacement.ready({ timeoutMs: 60_000 }).then(() => void up.add(replacement)));
      }
    })();
    const results = await Promise.all(jobs.map((j) => client.result(j, 170_000)));
    done = true;
    await killer;
    await Promise.all(startups);
    const byStatus = results.reduce<Record<string, number>>((acc, r) => ({ ...acc, [r.status]: (acc[r.status] ?? 0) + 1 }), {});
    const inDoubt = results.reduce((sum, r) => sum + (r.inDoubt?.count ?? 0), 0);
    const restarts = restartsByReason();
    const reached = results.filter((r, i) => r.inDoubt && restarts.get(`co-storm-${i}`) === 1).length;
    process.stdout.write(
      `[chaos] co-located: ${n} incidents, ${kills} process kills, ${JSON.stringify(byStatus)}, ${inDoubt} calls in doubt (${reached} of them had reached the MCP server)\n`,
    );
    expect(kills).toBe(3);
    for (const [i, r] of results.entries()) {
      const reason = `co-storm-${i}`;
      // Every run ends with an honest answer: completed, or partial because a call is in doubt.
      if (r.status === 'completed') expect(restarts.get(reason), reason).toBe(1);
      else {
        expect(r.status, reason).toBe('partial');
        expect(
          r.inDoubt?.calls.map((c) => c.tool),
          reason,
        ).toEqual(['demo__restart_pod']);
        // In doubt because the process died after the gateway claimed it: in the MCP server
        // already, or not yet (the gateway died with the process between its claim and the
        // send). Nobody can know which; never sent again.
        expect(restarts.get(reason) ?? 0, reason).toBeLessThanOrEqual(1);
      }
    }
    expect([...restarts.entries()].filter(([reason, c]) => reason.startsWith('co-storm-') && c > 1)).toEqual([]);
  }, 240_000);

  it('a CodeAct script whose process dies between its calls resumes in another bosun serve; no effect twice', async () => {
    const { client, cluster, env, ctx } = t;
    const script = [
      'for (let i = 1; i <= 4; i++) {',
      '  call_tool("demo__restart_pod", { service: "checkout", pod: "checkout-7c9d6f8b4-9mz4q", reason: "co-codeact-" + i });',
      '}',
      'return { final_result: { summary: "restarted 4 times", findings: [], evidence: [] } };',
    ].join('\n');
    const { job, runId } = await client.publish({
      id: 'co-codeact',
      source: 'chaos',
      reason: 'PodCrashLooping',
      summary: 'restart four times',
      labels: { service: 'checkout' },
      payload: { fake: { route: ['coder'], scripts: { coder: [script] } } },
    });
    // Killed once the script's second call has answered: the process that runs the script (and
    // the gateway that made its calls) dies with it.
    const second = await client.events.waitFor(
      (e) => e.runId === runId && e.type === 'tool.completed' && String(e.data.key).endsWith('-s1-c1'),
      60_000,
      "the script's second call answered",
    );
    const taskId = String(second.data.key).replace(/-s\d+-c\d+$/, '');
    const victim = await cluster.taskHolder(ctx.redis, ctx.prefix, 'coder', taskId);
    expect(victim, `a bosun serve holds ${taskId}`).toBeDefined();
    victim!.kill('SIGKILL');
    const replacement = cluster.add(startService('serve', env, { name: 'serve-codeact' }));
    await replacement.ready({ timeoutMs: 60_000 });

    const result = await client.result(job, 120_000);
    const applied = restartsByReason();
    // The two calls answered before the kill were replayed from the journal, not made again.
    expect([applied.get('co-codeact-1'), applied.get('co-codeact-2')]).toEqual([1, 1]);
    // None twice; the one in flight at the kill (if any) is in doubt, and the run says so.
    expect([3, 4].map((i) => applied.get(`co-codeact-${i}`) ?? 0).every((n) => n <= 1)).toBe(true);
    if (result.status === 'completed') expect([applied.get('co-codeact-3'), applied.get('co-codeact-4')]).toEqual([1, 1]);
    else {
      expect(result.status).toBe('partial');
      expect(result.inDoubt?.calls.map((c) => c.tool)).toEqual(['demo__restart_pod']);
    }
    // The SIGKILL takes the process that numbered the events: one it had not sent yet never comes.
    const events = (await client.events.complete(runId, 20_000, { unusedAfterMs: 5_000 })).filter((e) => e.agent === 'coder');
    expect(events.some((e) => e.type === 'codeact.replayed' && e.data.source === 'journal')).toBe(true);
    process.stdout.write(
      `[chaos] co-located CodeAct: ${result.status}, effects ${JSON.stringify([1, 2, 3, 4].map((i) => applied.get(`co-codeact-${i}`) ?? 0))}\n`,
    );
  }, 150_000);
});
