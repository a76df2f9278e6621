import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  callLog,
  startClusterTest,
  waitUntil,
  type ClusterTest,
  type TestCluster,
  type CallLog,
  type Client,
  type ServiceProcess,
  type TestContext,
} from '../helpers/index.js';

// Chaos 1: specialists are SIGKILLed mid-run, repeatedly. Every incident still completes, and
// the mutating tool of a counting MCP server is called exactly once per intended call.

let t: ClusterTest;
let ctx: TestContext;
let cluster: TestCluster;
let client: Client;
let toolLog: CallLog;

const logged = (tool: string) => toolLog.calls(tool);

beforeAll(async () => {
  t = await startClusterTest(
    'chaos-kill',
    (config, c) => {
      toolLog = callLog(join(c.dir, 'calls.jsonl'));
      // This test is about crashes, not approvals: let the mutating tools run unasked.
      config.mcpServers.demo.tools = {};
      config.mcpServers.demo.env = { DEMO_MCP_CALL_LOG: toolLog.path, DEMO_MCP_SLOW_MS: '400' };
      // Fast failure detection for the test: a dead worker's jobs move on after 3 s.
      config.workers = { lockDurationMs: 3_000, stalledIntervalMs: 1_000, maxStalledCount: 10 };
      config.specialists.kubernetes.concurrency = 5;
    },
    { specialists: 2 },
  );
  ({ ctx, cluster, client } = t);
});

afterAll(async () => {
  await t?.close();
});

/** The process running task `taskId` now (its job's worker, or the serve process of a local task). */
function specialistHolding(taskId: string): Promise<ServiceProcess | undefined> {
  return cluster.taskHolder(ctx.redis, ctx.prefix, 'kubernetes', taskId);
}

describe('specialists killed mid-run', () => {
  it('resumes a killed task elsewhere from its checkpoint (recovery time measured)', async () => {
    const incident = {
      id: 'recover-1',
      source: 'chaos',
      reason: 'PodCrashLooping',
      summary: 'x',
      labels: { service: 'checkout' },
      payload: {
        fake: {
          calls: {
            kubernetes: [
              { tool: 'demo__get_pods', args: { service: 'checkout' } },
              { tool: 'demo__get_logs', args: { service: 'checkout', lines: 5 } },
              { tool: 'demo__get_deployments', args: { service: 'checkout' } },
            ],
          },
        },
      },
    };
    const { job, runId } = await client.publish(incident);
    const started = await client.events.waitFor((e) => e.runId === runId && e.type === 'tool.started', 20_000);
    const holder = await specialistHolding(String(started.data.key).replace(/-s\d+-c\d+$/, ''));
    expect(holder).toBeDefined();
    const killedAt = Date.now();
    holder!.kill('SIGKILL');
    const next = await client.events.waitFor(
      (e) => e.runId === runId && e.type === 'model.called' && e.agent === 'kubernetes' && Date.parse(e.at) > killedAt,
      30_000,
      'next step after the kill',
    );
    const recoveryMs = Date.parse(next.at) - killedAt;
    process.stdout.write(`[chaos] recovery after SIGKILL: ${recoveryMs} ms (lockDuration 3000 ms, stalledInterval 1000 ms)\n`);
    const result = await client.result(job);
    expect(result.status).toBe('completed');
    expect(logged('get_pods').filter((l) => l.args.service === 'checkout').length).toBeGreaterThanOrEqual(1);
    // Co-located, the SIGKILL takes the specialists and the gateway too: an event one of them had
    // numbered and not yet sent never arrives (docs/protocol.md), so a number may stay unused.
    const unused = cluster.layout === 'split' ? {} : { unusedAfterMs: 5_000 };
    const calls = (await client.events.complete(runId, 20_000, unused)).filter((e) => e.type === 'tool.started').map((e) => e.data.key);
    // Split: the tool call in flight at the kill was answered from the gateway's record, not
    // started twice. Co-located, its gateway died with it: that read-only call, and only it, was
    // started again.
    if (cluster.layout === 'split') expect(new Set(calls).size).toBe(calls.length);
    else expect(new Set(calls).size).toBeGreaterThanOrEqual(calls.length - 1);
    expect(recoveryMs).toBeLessThan(15_000);
    await cluster.replace('specialist').ready();
  });

  it('completes 50 incidents while a specialist is SIGKILLed repeatedly, each mutating call made exactly once', async () => {
    const n = 50;
    const before = logged('restart_pod').length;
    const jobs = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        client.incidents.add(
          'incident',
          {
            id: `storm-${i}`,
            source: 'chaos',
            reason: 'PodCrashLooping',
            summary: `storm ${i}`,
            labels: { service: 'checkout' },
            payload: {
              fake: {
                calls: {
                  kubernetes: [
                    { tool: 'demo__get_pods', args: { service: 'checkout' } },
                    // A mutating call whose arguments name the incident, so the counting server tells them apart.
                    { tool: 'demo__restart_pod', args: { service: 'checkout', pod: 'checkout-7c9d6f8b4-9mz4q', reason: `storm-${i}` } },
                    { tool: 'demo__get_logs', args: { service: 'checkout', lines: 5 } },
                  ],
                },
              },
            },
          },
          { jobId: `storm-${i}` },
        ),
      ),
    );
    // Kills at points of progress, not on a timer: when the first storm tool call starts, then
    // each time 8 more runs have completed — so all four happen while runs are in flight (the
    // last one with 26 of 50 still out). A kill follows its threshold at once: the replacement
    // starts beside it and is not awaited before the next threshold (a start-up of seconds on a
    // loaded machine let the whole storm finish before the fourth kill). Only specialists that
    // have come up are victims, so each kill hits a process that holds work.
    const stormCompleted = () => client.events.events.filter((e) => e.type === 'run.completed' && e.incidentId.startsWith('storm-')).length;
    const up = new Set(cluster.hosts('specialist'));
    const startups: Promise<void>[] = [];
    let kills = 0;
    let done = false;
    const killer = (async () => {
      await client.events.waitFor(
        (e) => e.type === 'tool.started' && e.incidentId.startsWith('storm-'),
        30_000,
        'the first storm tool call',
      );
      for (const threshold of [0, 8, 16, 24]) {
        await waitUntil(() => done || stormCompleted() >= threshold, 120_000, `${threshold} storm runs completed`);
        // With every specialist killed and none come up yet, the next victim is the first to come up.
        await waitUntil(() => done || [...up].some((p) => p.running), 60_000, 'a specialist up to kill');
        if (done) break;
        const victims = [...up].filter((p) => p.running);
        const victim = victims[kills % victims.length]!;
        victim.kill('SIGKILL');
        up.delete(victim);
        kills++;
        const replacement = cluster.replace('specialist');
        startups.push(replacement.ready().then(() => void up.add(replacement)));
      }
    })();
    const results = await Promise.all(jobs.map((j) => client.result(j, 150_000)));
    done = true;
    await killer;
    await Promise.all(startups);
    const inDoubt = results.filter((r) => r.inDoubt).length;
    process.stdout.write(`[chaos] ${n} incidents, ${kills} specialist kills (${cluster.layout}), ${inDoubt} ended with a call in doubt\n`);
    expect(kills).toBe(4);
    const restarts = logged('restart_pod').slice(before);
    const perIncident = new Map<string, number>();
    for (const r of restarts) perIncident.set(String(r.args.reason), (perIncident.get(String(r.args.reason)) ?? 0) + 1);
    // Never twice, whatever the layout.
    expect([...perIncident.values()].every((c) => c === 1)).toBe(true);
    if (cluster.layout === 'split') {
      expect(results.map((r) => r.status)).toEqual(results.map(() => 'completed'));
      expect(restarts).toHaveLength(n);
      expect(perIncident.size).toBe(n);
    } else {
      // Co-located, a kill takes the gateway with its specialists: a restart_pod in flight is in
      // doubt (applied once or not at all, never sent again) and its run ends partial, saying so;
      // every other run completes with its restart applied once.
      for (const [i, r] of results.entries()) {
        if (r.status === 'completed') expect(perIncident.get(`storm-${i}`), `storm-${i}`).toBe(1);
        else {
          expect(r.status).toBe('partial');
          expect(r.inDoubt?.calls.map((c) => c.tool)).toEqual(['demo__restart_pod']);
        }
      }
    }
  }, 200_000);
});
