import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STALL_MARKER } from '@bosun/contract';
import { callLog, startClusterTest, type CallLog, type ClusterTest, type ServiceProcess } from '../helpers/index.js';

// A task budget holds in the CodeAct loop across a SIGKILL: a script that would make 10 mutating
// calls, with a budget of 3 tool calls, is killed while its second call is at the MCP server.
// Another specialist process replays the script from its journal and checkpoint (which carry what
// was spent): the first call from the journal, the second from the gateway's record, the third
// new, and the fourth is never sent. The task ends INCOMPLETE `budget` with its dead letter, and
// the MCP server applied exactly 3 calls.

let t: ClusterTest;
let toolLog: CallLog;

const POD = 'checkout-7c9d6f8b4-9mz4q';
const TEN = [
  'let made = 0;',
  'for (let i = 1; i <= 10; i++) {',
  `  try { call_tool("demo__restart_pod", { service: "checkout", pod: "${POD}", reason: "codeact-budget-" + i }); made++; }`,
  '  catch (e) { console.log("caught", e.message); }',
  '}',
  'return { final_result: { summary: "restarted " + made + " times", findings: [], evidence: [] } };',
].join('\n');

beforeAll(async () => {
  t = await startClusterTest(
    'codeact-budget-kill',
    (config, c) => {
      toolLog = callLog(join(c.dir, 'calls.jsonl'));
      config.mcpServers.demo.tools = {};
      config.mcpServers.demo.env = { DEMO_MCP_CALL_LOG: toolLog.path, DEMO_MCP_SLOW_MS: '800' };
      config.workers = { lockDurationMs: 3_000, stalledIntervalMs: 1_000, maxStalledCount: 10 };
      config.specialists.coder = {
        ...config.specialists.kubernetes,
        description: 'CodeAct specialist of the test.',
        loop: 'codeact',
        fakePlan: [],
        budget: { toolCalls: 3 },
      };
    },
    { specialists: 2 },
  );
});

afterAll(async () => {
  await t?.close();
});

/** The process running task `taskId` now (its job's worker, or the serve process of a local task). */
function specialistHolding(taskId: string): Promise<ServiceProcess | undefined> {
  return t.cluster.taskHolder(t.ctx.redis, t.ctx.prefix, 'coder', taskId);
}

describe('a CodeAct budget across a SIGKILL', () => {
  it('stops the script at its 4th of 10 calls in all, with exactly 3 real applications, although it was replayed elsewhere', async () => {
    const started = Date.now();
    const { job, runId } = await t.client.publish({
      id: 'codeact-budget-kill-1',
      source: 'chaos',
      reason: 'PodCrashLooping',
      summary: 'restart ten times',
      labels: { service: 'checkout' },
      payload: { fake: { route: ['coder'], scripts: { coder: [TEN] } } },
    });
    const second = await t.client.events.waitFor(
      (e) => e.runId === runId && e.type === 'tool.started' && /-s1-c1$/.test(String(e.data.key)),
      60_000,
      'the second call of the script',
    );
    const taskId = String(second.data.key).replace(/-s\d+-c\d+$/, '');
    const holder = await specialistHolding(taskId);
    expect(holder, `a specialist holds ${taskId}`).toBeDefined();
    holder!.kill('SIGKILL');

    const result = await t.client.result(job, 120_000);
    expect(result.status).toBe('partial');
    const part = result.specialists[0]!;
    expect(part).toMatchObject({ name: 'coder', status: 'stalled' });
    expect(JSON.stringify(part.output)).toContain(STALL_MARKER);
    expect(JSON.stringify(part.output)).toContain(
      'stopped at its budget: 1 more tool call(s) would cross the limit of 3 tool calls (3 made)',
    );
    expect(part.usage).toMatchObject({ toolCalls: 3, modelCalls: 1 });
    const applied = toolLog
      .calls('restart_pod')
      .map((c) => String(c.args.reason))
      .filter((r) => r.startsWith('codeact-budget-'));
    if (t.cluster.layout === 'split') {
      // The MCP server applied 3 calls in all: the one in flight at the kill was answered from its record.
      expect(applied).toEqual(['codeact-budget-1', 'codeact-budget-2', 'codeact-budget-3']);
    } else {
      // Co-located, its gateway died with the script: the second call is in doubt (below), never
      // sent again; it reached the server at most once.
      expect(applied.filter((r) => r !== 'codeact-budget-2')).toEqual(['codeact-budget-1', 'codeact-budget-3']);
    }

    const events = (await t.client.events.complete(runId)).filter((e) => e.agent === 'coder');
    const keys = events.filter((e) => e.type === 'tool.started').map((e) => String(e.data.key));
    expect(new Set(keys)).toEqual(new Set([`${taskId}-s1-c0`, `${taskId}-s1-c1`, `${taskId}-s1-c2`]));
    // One model turn: the script was replayed, not written again; it was stopped, so it returned nothing.
    expect(events.filter((e) => e.type === 'model.called')).toHaveLength(1);
    expect(events.filter((e) => e.type === 'codeact.replayed' && e.data.key === undefined)).toHaveLength(1);
    expect(events.filter((e) => e.type === 'codeact.result')).toHaveLength(0);
    expect(events.find((e) => e.type === 'agent.stalled')?.data).toMatchObject({
      kind: 'budget',
      marker: STALL_MARKER,
      usage: { toolCalls: 3 },
    });
    const letters = await t.client.deadLetters(runId);
    if (t.cluster.layout === 'split') expect(letters.map((d) => [d.kind, d.taskId])).toEqual([['budget', taskId]]);
    else {
      expect(letters.map((d) => d.kind).sort()).toEqual(['budget', 'in-doubt']);
      expect(result.inDoubt?.calls.map((c) => c.key)).toEqual([`${taskId}-s1-c1`]);
    }
    // The process that resumed it was the other one.
    expect(t.cluster.hosts('specialist')).toHaveLength(1);
    process.stdout.write(`[chaos] codeact budget: 1 kill, 3 of 10 calls applied, stopped in ${Date.now() - started} ms\n`);
  }, 180_000);
});
