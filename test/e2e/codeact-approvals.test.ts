import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue } from 'bullmq';
import { specialistQueue } from '@bosun/contract';
import { ApprovalStore, type Approval } from '@bosun/transport';
import {
  callLog,
  startClusterTest,
  startService,
  waitUntil,
  type CallLog,
  type Client,
  type ClusterTest,
  type TestCluster,
  type TestContext,
} from '../helpers/index.js';

// Approvals inside CodeAct scripts, with the services as separate processes: a script reaches an
// `ask` tool and the task parks; every process is killed and restarted; the decision then lets
// the script replay up to that call and go on — with the call run once, or with a denial the
// script catches.

let t: ClusterTest;
let ctx: TestContext;
let cluster: TestCluster;
let env: Record<string, string>;
let client: Client;
let approvals: ApprovalStore;
let toolLog: CallLog;

const reasons = (tool: string) => toolLog.calls(tool).map((c) => String(c.args.reason ?? c.args.service));

function script(reason: string): string {
  return [
    'const pods = call_tool("demo__get_pods", { service: "checkout" });',
    'let outcome;',
    `try { call_tool("demo__restart_pod", { service: "checkout", pod: "checkout-7c9d6f8b4-9mz4q", reason: "${reason}" }); outcome = "restarted"; }`,
    'catch (e) { outcome = "not restarted: " + e.message; }',
    'return { final_result: { summary: outcome, findings: [], evidence: [String(pods.pods.length)] } };',
  ].join('\n');
}

async function parkedApproval(runId: string): Promise<Approval> {
  const e = await client.events.waitFor((x) => x.runId === runId && x.type === 'approval.requested', 30_000, 'approval.requested');
  const a = (await approvals.get(String(e.data.approvalId)))!;
  expect(a).toMatchObject({ status: 'pending', calls: [{ index: 1, tool: 'demo__restart_pod', needsApproval: true }] });
  expect(a.id).toBe(`ap-${a.taskId}-s1-c1`);
  // The run so far: the script's earlier call, with what came back.
  expect(a.steps).toEqual([{ tool: 'demo__get_pods', args: { service: 'checkout' }, result: expect.stringContaining('pods') }]);
  const q = new Queue(specialistQueue('coder'), { connection: ctx.redis, prefix: ctx.prefix });
  try {
    await waitUntil(async () => (await (await q.getJob(a.taskId))?.getState()) === 'delayed', 15_000, `task ${a.taskId} parked`, 50);
  } finally {
    await q.close();
  }
  return a;
}

async function restartEverything(suffix: string): Promise<void> {
  for (const p of cluster.processes) if (p.running) p.kill('SIGKILL');
  await Promise.all(cluster.processes.map((p) => p.exited));
  await cluster.add(startService('gateway', env, { name: `gateway-${suffix}` })).ready();
  await Promise.all([
    cluster.add(startService('coordinator', env, { name: `coordinator-${suffix}` })).ready(),
    cluster.add(startService('specialist', env, { name: `specialist-${suffix}` })).ready(),
  ]);
}

beforeAll(async () => {
  t = await startClusterTest('codeact-approvals', (config, c) => {
    toolLog = callLog(join(c.dir, 'calls.jsonl'));
    config.mcpServers.demo.env = { DEMO_MCP_CALL_LOG: toolLog.path };
    config.mcpServers.demo.tools = { restart_pod: 'ask' };
    config.workers = { lockDurationMs: 3_000, stalledIntervalMs: 1_000, maxStalledCount: 2 };
    config.specialists.coder = {
      ...config.specialists.kubernetes,
      description: 'CodeAct specialist of the test.',
      loop: 'codeact',
      fakePlan: [],
    };
  });
  ({ ctx, cluster, client, env } = t);
  approvals = new ApprovalStore({ redis: ctx.redis, prefix: ctx.prefix });
});

afterAll(async () => {
  await approvals?.close();
  await t?.close();
});

describe('approvals inside CodeAct scripts', () => {
  it('survives a restart of every process; approved, the call runs once and the script finishes', async () => {
    const podsBefore = toolLog.count('get_pods');
    const { job, runId } = await client.publish({
      id: 'codeact-ap-1',
      source: 'test',
      reason: 'PodCrashLooping',
      summary: 'x',
      payload: { fake: { route: ['coder'], scripts: { coder: [script('codeact-ap-1')] } } },
    });
    const a = await parkedApproval(runId);
    expect(reasons('restart_pod')).not.toContain('codeact-ap-1');
    await restartEverything('r1');
    await approvals.decide(a.id, { approve: true, by: 'alice' });
    const result = await client.result(job, 60_000);
    expect(result.status).toBe('completed');
    expect(result.specialists[0]?.output).toMatchObject({ summary: 'restarted' });
    expect(reasons('restart_pod').filter((r) => r === 'codeact-ap-1')).toHaveLength(1);
    // The replay answered get_pods from the journal: it ran once.
    expect(toolLog.count('get_pods') - podsBefore).toBe(1);
    const replayed = (await client.events.complete(runId)).filter((e) => e.type === 'codeact.replayed' && e.data.key !== undefined);
    expect(replayed.map((e) => [e.data.index, e.data.source])).toEqual([[0, 'journal']]);
  }, 120_000);

  it('denied: the script catches the denial and the run result says so', async () => {
    const { job, runId } = await client.publish({
      id: 'codeact-ap-2',
      source: 'test',
      reason: 'PodCrashLooping',
      summary: 'x',
      payload: { fake: { route: ['coder'], scripts: { coder: [script('codeact-ap-2')] } } },
    });
    const a = await parkedApproval(runId);
    await approvals.decide(a.id, { approve: false, reason: 'not during the sale', by: 'bob' });
    const result = await client.result(job, 60_000);
    expect(result.status).toBe('completed');
    expect((result.specialists[0]?.output as { summary: string }).summary).toBe(
      'not restarted: not executed: the operator denied it: not during the sale',
    );
    expect(result.answer).toContain('not during the sale');
    expect(reasons('restart_pod')).not.toContain('codeact-ap-2');
  }, 120_000);
});
