import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  callLog,
  startClusterTest,
  waitUntil,
  testLayout,
  type CallLog,
  type Client,
  type ClusterTest,
  type ServiceProcess,
  type TestCluster,
  type TestContext,
} from '../helpers/index.js';

// Chaos: a CodeAct script makes five mutating calls to the demo MCP server, which logs every
// call that reaches it (the real applications). The specialist running it is SIGKILLed between
// calls 2 and 3, and again between calls 4 and 5. The task completes in another process, each
// effect is applied exactly once, and the calls already made are answered from the journal. Each
// call takes 1.5 s, so that the kill lands between two calls even on a loaded machine.

let t: ClusterTest;
let ctx: TestContext;
let cluster: TestCluster;
let client: Client;
let toolLog: CallLog;

const POD = 'checkout-7c9d6f8b4-9mz4q';
const FIVE = [
  'const done = [];',
  'for (let i = 1; i <= 5; i++) {',
  `  call_tool("demo__restart_pod", { service: "checkout", pod: "${POD}", reason: "codeact-chaos-" + i });`,
  '  done.push(i);',
  '}',
  'console.log("restarted", done.length, "times");',
  'return { final_result: { summary: "restarted " + done.length + " times", findings: [], evidence: done.map(String) } };',
].join('\n');

beforeAll(async () => {
  t = await startClusterTest(
    'chaos-codeact',
    (config, c) => {
      toolLog = callLog(join(c.dir, 'calls.jsonl'));
      config.mcpServers.demo.tools = {};
      config.mcpServers.demo.env = { DEMO_MCP_CALL_LOG: toolLog.path, DEMO_MCP_SLOW_MS: '1500' };
      config.workers = { lockDurationMs: 3_000, stalledIntervalMs: 1_000, maxStalledCount: 10 };
      config.specialists.coder = {
        ...config.specialists.kubernetes,
        description: 'CodeAct specialist of the test.',
        loop: 'codeact',
        fakePlan: [],
      };
    },
    { specialists: 2 },
  );
  ({ ctx, cluster, client } = t);
});

afterAll(async () => {
  await t?.close();
});

/** The process running task `taskId` now (its job's worker, or the serve process of a local task). */
function holder(taskId: string): Promise<ServiceProcess | undefined> {
  return cluster.taskHolder(ctx.redis, ctx.prefix, 'coder', taskId);
}

/** Waits for call `index` (from 0) of the script to complete, then SIGKILLs the specialist running it and starts another. */
async function killAfterCall(runId: string, index: number, name: string): Promise<void> {
  const completed = await client.events.waitFor(
    (e) => e.runId === runId && e.type === 'tool.completed' && String(e.data.key).endsWith(`-s1-c${index}`),
    60_000,
    `call ${index + 1} completed`,
  );
  const taskId = String(completed.data.key).replace(/-s\d+-c\d+$/, '');
  const victim = await holder(taskId);
  expect(victim, `a specialist holds ${taskId}`).toBeDefined();
  victim!.kill('SIGKILL');
  await cluster.replace('specialist', { name }).ready();
}

// Killed after a call completed, a co-located process takes its gateway with it, and the next
// call, already sent, is in doubt rather than answered from a record: those two cases run split
// here, and co-located in kill-colocated.test.ts ('a CodeAct script whose process dies between
// its calls'), which asserts either ending. The gateway's own death mid-call runs in both.
const splitOnly = it.runIf(testLayout() === 'split');

describe('a CodeAct specialist killed mid-script', () => {
  splitOnly(
    'completes elsewhere with each of five effects applied exactly once, replayed calls answered from the journal',
    async () => {
      const { job, runId } = await client.publish({
        id: 'codeact-kill-1',
        source: 'chaos',
        reason: 'PodCrashLooping',
        summary: 'restart five times',
        labels: { service: 'checkout' },
        payload: { fake: { route: ['coder'], scripts: { coder: [FIVE] } } },
      });
      await killAfterCall(runId, 1, 'specialist-k1');
      await killAfterCall(runId, 3, 'specialist-k2');
      const result = await client.result(job, 120_000);
      expect(result.status).toBe('completed');
      expect(result.specialists[0]).toMatchObject({ name: 'coder', status: 'completed', output: { summary: 'restarted 5 times' } });

      // Each effect once: the server saw each of the five calls exactly once.
      const applied = toolLog.calls('restart_pod').map((c) => String(c.args.reason));
      expect(applied.sort()).toEqual([1, 2, 3, 4, 5].map((i) => `codeact-chaos-${i}`));

      const events = (await client.events.complete(runId)).filter((e) => e.agent === 'coder');
      // One model turn: the script was replayed, never written again.
      expect(events.filter((e) => e.type === 'model.called')).toHaveLength(1);
      const replays = events.filter((e) => e.type === 'codeact.replayed' && e.data.key !== undefined);
      const fromJournal = replays.filter((e) => e.data.source === 'journal').map((e) => Number(e.data.index));
      const count = (list: number[], i: number) => list.filter((x) => x === i).length;
      const all = replays.map((e) => Number(e.data.index));
      // Replay 1 (killed after call 2) covers calls 1-2, and call 3 if it was already sent; replay
      // 2 (killed after call 4) covers calls 1-4, and call 5 if it was already sent. A call whose answer was saved is answered from
      // the journal; the one in flight at the kill is sent again under its key and answered from
      // the gateway's record.
      expect([count(all, 0), count(all, 1), count(all, 3)]).toEqual([2, 2, 1]);
      expect(count(all, 2)).toBeGreaterThanOrEqual(1);
      expect(count(all, 4)).toBeLessThanOrEqual(1);
      expect(count(fromJournal, 0)).toBe(2);
      expect(count(fromJournal, 1)).toBeGreaterThanOrEqual(1);
      expect(count(fromJournal, 2)).toBeGreaterThanOrEqual(1);
      expect(events.filter((e) => e.type === 'codeact.replayed' && e.data.key === undefined)).toHaveLength(2);
      // The gateway ran each key once.
      const started = events.filter((e) => e.type === 'tool.started').map((e) => e.data.key);
      expect(new Set(started).size).toBe(started.length);
      expect(started).toHaveLength(5);
      process.stdout.write(
        `[chaos] codeact: 2 kills; replayed from the journal: ${fromJournal.length} calls; resent to the gateway: ${replays.length - fromJournal.length}\n`,
      );
    },
    180_000,
  );

  it('the gateway killed mid-call: that call is in doubt, the script sees it, and it is not repeated', async () => {
    const script = [
      'const seen = [];',
      'for (let i = 1; i <= 3; i++) {',
      `  try { call_tool("demo__restart_pod", { service: "checkout", pod: "${POD}", reason: "codeact-gw-" + i }); seen.push(i + " ok"); }`,
      '  catch (e) { seen.push(i + " " + e.message); }',
      '}',
      'return { final_result: { summary: seen.join("; "), findings: [], evidence: seen } };',
    ].join('\n');
    const { job, runId } = await client.publish({
      id: 'codeact-gw-1',
      source: 'chaos',
      reason: 'PodCrashLooping',
      summary: 'restart three times',
      labels: { service: 'checkout' },
      payload: { fake: { route: ['coder'], scripts: { coder: [script] } } },
    });
    const reasons = () => toolLog.calls('restart_pod').map((c) => String(c.args.reason));
    await waitUntil(() => reasons().includes('codeact-gw-2'), 30_000, 'the MCP server received call 2', 10);
    const call = await client.events.waitFor((e) => e.runId === runId && e.type === 'tool.started', 10_000, 'a call started');
    // Co-located, the gateway running the call is the one in the process that holds the task.
    const victim = cluster.layout === 'split' ? cluster.host('gateway') : await holder(String(call.data.key).replace(/-s\d+-c\d+$/, ''));
    expect(victim, 'the process of the gateway running the call').toBeDefined();
    victim!.kill('SIGKILL');
    await victim!.exited;
    const gateway = cluster.replace('gateway');
    await gateway.ready();

    const result = await client.result(job, 120_000);
    const summary = String((result.specialists[0]?.output as { summary?: unknown }).summary);
    expect(summary).toMatch(/^1 ok; 2 .*IN DOUBT.*; 3 ok$/);
    expect(result.status).toBe('partial');
    expect(result.inDoubt?.calls.map((c) => c.key.replace(/^.*-s/, 's'))).toEqual(['s1-c1']);
    // Not repeated: each call reached the server once.
    expect(
      reasons()
        .filter((r) => r.startsWith('codeact-gw-'))
        .sort(),
    ).toEqual(['codeact-gw-1', 'codeact-gw-2', 'codeact-gw-3']);
    // Not `events.complete`: the killed gateway may have taken a `seq` for an event that was still in
    // its NATS client's buffer (events never hold a call up, docs/protocol.md), so that one never
    // arrives. The in-doubt event comes from the processes that lived.
    await client.events.waitFor((e) => e.runId === runId && e.type === 'run.completed', 15_000, `end of run ${runId}`);
    await client.events.waitFor((e) => e.runId === runId && e.type === 'tool.in_doubt', 15_000, 'tool.in_doubt');
    expect(client.events.forRun(runId).filter((e) => e.type === 'tool.in_doubt')).toHaveLength(1);
  }, 180_000);

  splitOnly(
    'a script whose arguments depend on Math.random() and Date.now() replays to the same calls after a kill',
    async () => {
      const script = [
        'const token = Math.floor(Math.random() * 1e9) + "-" + Date.now() + "-" + new Date().getTime();',
        'for (let i = 1; i <= 3; i++) call_tool("demo__restart_pod", { service: "checkout", pod: "' +
          POD +
          '", reason: "codeact-det-" + i + "-" + token });',
        'return { final_result: { summary: token, findings: [], evidence: [] } };',
      ].join('\n');
      const { job, runId } = await client.publish({
        id: 'codeact-det-1',
        source: 'chaos',
        reason: 'PodCrashLooping',
        summary: 'restart with a random token',
        labels: { service: 'checkout' },
        payload: { fake: { route: ['coder'], scripts: { coder: [script] } } },
      });
      await killAfterCall(runId, 0, 'specialist-k3');
      const result = await client.result(job, 120_000);
      expect(result.status).toBe('completed');
      const token = String((result.specialists[0]?.output as { summary?: unknown }).summary);
      expect(token).toMatch(/^\d+-\d+-\d+$/);
      // Every call, before and after the kill, carried the token the first run drew: one per position, once.
      const applied = toolLog
        .calls('restart_pod')
        .map((c) => String(c.args.reason))
        .filter((r) => r.startsWith('codeact-det-'));
      expect(applied.sort()).toEqual([1, 2, 3].map((i) => `codeact-det-${i}-${token}`));
      const events = (await client.events.complete(runId)).filter((e) => e.agent === 'coder');
      expect(events.filter((e) => e.type === 'codeact.replayed' && e.data.key === undefined)).toHaveLength(1);
      expect(events.filter((e) => e.type === 'agent.failed')).toHaveLength(0);
    },
    180_000,
  );
});
