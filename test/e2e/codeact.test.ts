import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callLog, startClusterTest, type CallLog, type ClusterTest, type Client, type TestCluster } from '../helpers/index.js';

// A CodeAct specialist end to end: gateway, coordinator and a specialist process, real Redis,
// NATS and the demo MCP server over stdio, the fake model writing the script of each turn.

let t: ClusterTest;
let cluster: TestCluster;
let client: Client;
let toolLog: CallLog;

const CHAIN = [
  'const pods = call_tool("demo__get_pods", { service: "checkout" });',
  'const deployments = call_tool("demo__get_deployments", { service: "checkout" });',
  'const metrics = call_tool("demo__get_metrics", { service: "checkout", window: "1h" });',
  'console.log("pods", pods.pods.length);',
  'const summary = "checkout: " + pods.pods.length + " pods, version " + deployments.currentVersion + ", error rate " + metrics.errorRatePercent;',
  'return { final_result: { summary, findings: [{ title: "version", detail: deployments.currentVersion }], evidence: [JSON.stringify(pods.pods.map((p) => p.name))] } };',
].join('\n');

beforeAll(async () => {
  t = await startClusterTest('codeact', (config, c) => {
    toolLog = callLog(join(c.dir, 'calls.jsonl'));
    config.mcpServers.demo.env = { DEMO_MCP_CALL_LOG: toolLog.path };
    config.specialists.coder = {
      ...config.specialists.database,
      description: 'CodeAct specialist of the test.',
      loop: 'codeact',
      fakePlan: [],
    };
  });
  ({ cluster, client } = t);
});

afterAll(async () => {
  await Promise.all(cluster?.processes.map((p) => p.stop()) ?? []);
  await t?.close();
});

describe('CodeAct, end to end', () => {
  it('chains three tools in one model turn: three tool calls, the correct final result', async () => {
    const { job, runId } = await client.publish({
      id: 'codeact-chain-1',
      source: 'test',
      reason: 'Anything',
      summary: 'checkout looks odd',
      labels: { service: 'checkout' },
      payload: { fake: { route: ['coder'], scripts: { coder: [CHAIN] } } },
    });
    const result = await client.result(job);
    expect(result.status).toBe('completed');
    const part = result.specialists.find((s) => s.name === 'coder');
    expect(part?.status).toBe('completed');
    const output = part?.output as { summary: string; findings: { detail: string }[] };
    const events = (await client.events.complete(runId)).filter((e) => e.agent === 'coder');
    const type = (x: string) => events.filter((e) => e.type === x);
    expect(type('model.called')).toHaveLength(1);
    expect(type('tool.completed').map((e) => e.data.tool)).toEqual(['demo__get_pods', 'demo__get_deployments', 'demo__get_metrics']);
    expect(type('tool.started').map((e) => String(e.data.key).replace(/^.*-s/, 's'))).toEqual(['s1-c0', 's1-c1', 's1-c2']);
    expect(type('codeact.script')).toHaveLength(1);
    expect(type('codeact.result')[0]?.data).toMatchObject({ tag: 'final_result', toolCalls: 3 });
    expect(String(type('codeact.output')[0]?.data.console)).toMatch(/^pods \d+\n$/);
    // The result is computed from what the tools answered.
    const pods = toolLog.calls('get_pods');
    expect(pods).toHaveLength(1);
    expect(output.summary).toMatch(/^checkout: \d+ pods, version v\d+, error rate [\d.]+$/);
    expect(output.summary).toContain(`version ${output.findings[0]!.detail}`);
  });

  it('transfer_to_agent: route mode delegates to the named specialist in one more round', async () => {
    const { job, runId } = await client.publish({
      id: 'codeact-transfer-1',
      source: 'test',
      reason: 'Anything',
      summary: 'pods restarting',
      labels: { service: 'checkout' },
      payload: {
        fake: {
          route: ['coder'],
          scripts: { coder: ['return { transfer_to_agent: { agent: "kubernetes", reason: "this is about pods" } };'] },
        },
      },
    });
    const result = await client.result(job);
    expect(result.status).toBe('completed');
    // The transferred part is superseded by the one it handed over to.
    expect(result.specialists.map((s) => [s.name, s.status])).toEqual([['kubernetes', 'completed']]);
    const events = await client.events.complete(runId);
    const delegated = events.filter((e) => e.type === 'agent.delegated').map((e) => [e.agent, e.data.round]);
    expect(delegated).toEqual([
      ['coder', 0],
      ['kubernetes', 1],
    ]);
    expect(String(events.find((e) => e.type === 'agent.delegated' && e.agent === 'kubernetes')?.data.task)).toContain(
      'coder handed this incident over to you: this is about pods',
    );
    expect(events.find((e) => e.type === 'agent.stalled' && e.agent === 'coder')?.data).toMatchObject({ kind: 'transfer' });
  });
});
