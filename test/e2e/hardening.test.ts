import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue, QueueEvents } from 'bullmq';
import { TOOLS_QUEUE, TOOL_CALL_JOB, ToolCallResult, type ToolCallJob } from '@bosun/contract';
import { ApprovalStore, keys, type Approval } from '@bosun/transport';
import { ROOT, callLog, runCli, startClusterTest, wholeOutput, type CallLog, type ClusterTest } from '../helpers/index.js';

// Findings of issue 8, end to end with the services as separate processes: an approval is bound
// to the calls it approved; a specialist's policy refusals reach the gateway's audit; secrets
// stay out of events, stored approvals, call records, the audit stream and the logs. (Names that
// are JavaScript object properties, such as a route of "constructor", are the run loop's:
// libs/agent/src/run.test.ts, "makes unknown names, JS built-in names among them, failed parts".)

/** A tool argument that must never be shown anywhere but to the tool. */
const PASSWORD = `pw-${randomUUID()}`;
/** A configured secret of an MCP server (from the gateway's environment), which the server prints to its stderr. */
const VAULT_TOKEN = `vt-${randomUUID()}`;

let t: ClusterTest;
let toolLog: CallLog;
let vaultLog: string;
let approvals: ApprovalStore;

const restart = { tool: 'demo__restart_pod', args: { service: 'checkout', pod: 'checkout-7c9d6f8b4-9mz4q', reason: 'read-only try' } };
const rollback = { tool: 'demo__rollback_deployment', args: { service: 'checkout', toVersion: 'v41' } };

async function auditEntries(): Promise<Record<string, string>[]> {
  const raw = await t.ctx.redis.xrange(keys.audit(t.ctx.prefix), '-', '+');
  return raw.map(([, f]) => {
    const o: Record<string, string> = {};
    for (let i = 0; i < f.length; i += 2) o[f[i]!] = f[i + 1]!;
    return o;
  });
}

async function requested(runId: string): Promise<Approval> {
  const e = await t.client.events.waitFor((x) => x.runId === runId && x.type === 'approval.requested', 30_000, 'approval.requested');
  const a = await approvals.get(String(e.data.approvalId));
  expect(a).not.toBeNull();
  return a!;
}

beforeAll(async () => {
  t = await startClusterTest('hardening', (config, ctx) => {
    toolLog = callLog(join(ctx.dir, 'calls.jsonl'));
    vaultLog = join(ctx.dir, 'vault.jsonl');
    ctx.env.BOSUN_E2E_VAULT_TOKEN = VAULT_TOKEN;
    // The gateway logs an MCP server's stderr at debug: the last test reads that line.
    ctx.env.LOG_LEVEL = 'debug';
    config.mcpServers.demo.env = { DEMO_MCP_CALL_LOG: toolLog.path };
    config.mcpServers.vault = {
      transport: 'stdio',
      command: process.execPath,
      args: [join(ROOT, 'test/fixtures/mcp/vault.mjs')],
      env: { VAULT_LOG: vaultLog, VAULT_TOKEN: '${BOSUN_E2E_VAULT_TOKEN}' },
      tools: { set_credentials: 'ask' },
    };
    config.specialists.keeper = {
      ...config.specialists.kubernetes,
      description: 'Credentials of service accounts.',
      tools: ['vault__*'],
      fakePlan: [{ tool: 'vault__set_credentials', args: { user: 'svc-checkout', password: PASSWORD } }],
    };
  });
  approvals = new ApprovalStore({ redis: t.ctx.redis, prefix: t.ctx.prefix });
});

afterAll(async () => {
  await approvals?.close();
  await t?.close();
});

describe('an approval is bound to the calls it approved', () => {
  it('runs the approved rollback once; a tool-call job with a new key and the same approval is refused, audited and reported', async () => {
    const { job, runId } = await t.client.publish({
      id: 'bound-1',
      source: 'test',
      reason: 'PodCrashLooping',
      summary: 'x',
      payload: { fake: { calls: { kubernetes: [rollback] } } },
    });
    const a = await requested(runId);
    await approvals.decide(a.id, { approve: true, by: 'alice' });
    expect((await t.client.result(job, 30_000)).status).toBe('completed');
    expect(toolLog.count('rollback_deployment')).toBe(1);

    // The same run, tool, arguments and approval, under a key the approval never named.
    const replayKey = `${a.taskId}-s99-c0`;
    const replay: ToolCallJob = {
      v: 1,
      key: replayKey,
      runId,
      incidentId: 'bound-1',
      agent: 'kubernetes',
      tool: rollback.tool,
      args: rollback.args,
      approvalId: a.id,
    };
    const queue = new Queue(TOOLS_QUEUE, { connection: t.ctx.redis, prefix: t.ctx.prefix });
    const queueEvents = new QueueEvents(TOOLS_QUEUE, { connection: t.ctx.redis, prefix: t.ctx.prefix });
    try {
      await queueEvents.waitUntilReady();
      const added = await queue.add(TOOL_CALL_JOB, replay, { jobId: replayKey });
      const result = ToolCallResult.parse(await added.waitUntilFinished(queueEvents, 30_000));
      expect(result.status).toBe('error');
      expect(result.error).toMatch(new RegExp(`approval ${a.id} does not cover this call \\(key ${replayKey}\\)`));
    } finally {
      await queueEvents.close();
      await queue.close();
    }
    expect(toolLog.count('rollback_deployment')).toBe(1);
    const audited = (await auditEntries()).filter((e) => e.approvalId === a.id);
    expect(audited.map((e) => [e.key, e.status])).toEqual([
      [`${a.taskId}-s1-c0`, 'ok'],
      [replayKey, 'refused'],
    ]);
    await t.client.events.waitFor((e) => e.type === 'tool.failed' && e.data.key === replayKey, 10_000, 'tool.failed of the replayed key');
  });
});

describe('a specialist refused by policy leaves a trace', () => {
  it('a read-only specialist proposing restart_pod: refused by the gateway, tool.failed, audited as refused, pod not restarted', async () => {
    const { job, runId } = await t.client.publish({
      id: 'ro-restart',
      source: 'test',
      reason: 'HighLatency',
      summary: 'x',
      payload: { fake: { route: ['database'], calls: { database: [restart] } } },
    });
    const result = await t.client.result(job, 30_000);
    expect(result.status).toBe('completed');
    const run = await t.client.events.complete(runId);
    const failed = run.find((e) => e.type === 'tool.failed' && e.data.tool === 'demo__restart_pod');
    expect(failed?.agent).toBe('database');
    expect(String(failed?.data.error)).toMatch(/may change things and agent "database" is read-only/);
    expect(run.some((e) => e.type === 'tool.started' && e.data.tool === 'demo__restart_pod')).toBe(false);
    const audited = (await auditEntries()).filter((e) => e.runId === runId);
    expect(audited.map((e) => [e.agent, e.tool, e.status, e.key])).toEqual([
      ['database', 'demo__restart_pod', 'refused', failed?.data.key],
    ]);
    expect(toolLog.count('restart_pod')).toBe(0);
    // The model hears why, and that it must use the tools it was given.
    const taskId = String(run.find((e) => e.type === 'agent.delegated')?.data.taskId);
    const ckpt = JSON.parse((await t.ctx.redis.get(keys.checkpoint(t.ctx.prefix, `task:${taskId}`))) ?? '{}') as {
      messages: { role: string; responses?: { name: string; output: unknown; isError?: boolean }[] }[];
    };
    const answer = ckpt.messages.flatMap((m) => m.responses ?? []).find((r) => r.name === 'demo__restart_pod');
    expect(answer?.isError).toBe(true);
    expect(String(answer?.output)).toMatch(/is not available to this agent.*read-only/);
  });
});

describe('secrets', () => {
  it('a password argument reaches the tool, and never shows in events, the approval, the call record, the audit or the logs', async () => {
    const { job, runId } = await t.client.publish({
      id: 'secret-1',
      source: 'test',
      reason: 'CredentialsExpired',
      summary: 'rotate',
      payload: { fake: { route: ['keeper'] } },
    });
    const a = await requested(runId);
    expect(a.calls).toEqual([
      expect.objectContaining({
        index: 0,
        tool: 'vault__set_credentials',
        args: { user: 'svc-checkout', password: '[redacted]' },
        needsApproval: true,
      }),
    ]);
    await approvals.decide(a.id, { approve: true, by: 'alice' });
    expect((await t.client.result(job, 30_000)).status).toBe('completed');
    // The tool got the real value, exactly once.
    const received = readFileSync(vaultLog, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { password: string });
    expect(received).toEqual([{ user: 'svc-checkout', password: PASSWORD }]);

    const run = await t.client.events.complete(runId);
    const started = run.find((e) => e.type === 'tool.started' && e.data.tool === 'vault__set_credentials');
    expect(started?.data.args).toEqual({ user: 'svc-checkout', password: '[redacted]' });
    expect(JSON.stringify(t.client.events.events)).not.toContain(PASSWORD);
    const key = String(started?.data.key);
    expect(await t.ctx.redis.get(keys.approval(t.ctx.prefix, a.id))).not.toContain(PASSWORD);
    const record = await t.ctx.redis.hgetall(keys.toolCall(t.ctx.prefix, key));
    expect(record.state).toBe('done');
    expect(JSON.stringify(record)).not.toContain(PASSWORD);
    const audit = (await auditEntries()).filter((e) => e.runId === runId);
    expect(audit.map((e) => e.status)).toEqual(['ok']);
    expect(JSON.stringify(audit)).not.toContain(PASSWORD);
    const lines = t.cluster.processes.flatMap((p) => wholeOutput(p));
    expect(lines.join('\n')).not.toContain(PASSWORD);
  });

  it('bosun ack --retry re-sends an in-doubt call with its real arguments, taken from the task checkpoint', async () => {
    const { redis, prefix } = t.ctx;
    const runId = 'rsecretack00000000000';
    const taskId = `${runId}-d0-keeper`;
    const key = `${taskId}-s1-c0`;
    const args = { user: 'svc-ack', password: PASSWORD };
    const at = new Date().toISOString();
    // The task's checkpoint keeps the model's turn as proposed; the gateway's record shows it redacted.
    const ckpt = {
      v: 1,
      taskId,
      step: 1,
      toolRounds: 1,
      invalidOutputs: 0,
      askedToFinish: false,
      messages: [
        { role: 'user', text: 'rotate' },
        { role: 'model', calls: [{ id: 'c0', name: 'vault__set_credentials', args }] },
      ],
      pending: { kind: 'tools', step: 1, keys: [key], at },
    };
    await redis.set(keys.checkpoint(prefix, `task:${taskId}`), JSON.stringify(ckpt));
    const approval = await approvals.request({
      id: `ap-${taskId}-s1`,
      runId,
      incidentId: 'inc-ack',
      agent: 'keeper',
      taskId,
      calls: [{ index: 0, tool: 'vault__set_credentials', args, needsApproval: true, key }],
      reason: 'rotate',
      createdAt: at,
      timeoutAt: new Date(Date.now() + 60_000).toISOString(),
    });
    await approvals.decide(approval.id, { approve: true, by: 'alice' });
    const record = {
      state: 'in-doubt',
      tool: 'vault__set_credentials',
      runId,
      incidentId: 'inc-ack',
      agent: 'keeper',
      startedAt: at,
      readOnly: 'false',
      approvalId: approval.id,
      argsRedacted: 'true',
    };
    await redis.hset(keys.toolCall(prefix, key), { ...record, args: JSON.stringify({ user: 'svc-ack', password: '[redacted]' }) });

    const ack = await runCli(t.env, ['ack', key, '--retry', '--by', 'ops'], undefined, 60_000);
    expect(ack.code, ack.stderr).toBe(0);
    expect(JSON.parse(ack.stdout)).toMatchObject({ key, status: 'ok', isError: false });
    const received = readFileSync(vaultLog, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { user: string; password: string });
    expect(received.filter((r) => r.user === 'svc-ack')).toEqual([{ user: 'svc-ack', password: PASSWORD }]);
    expect(JSON.stringify(await redis.hgetall(keys.toolCall(prefix, key)))).not.toContain(PASSWORD);

    // A call with no task checkpoint (through the gateway's MCP face): its secrets are nowhere to
    // re-send from. Refused with what to do instead; the call stays in doubt.
    const faceKey = `mcp-${randomUUID()}`;
    await redis.hset(keys.toolCall(prefix, faceKey), {
      ...record,
      runId: 'mcp',
      incidentId: 'mcp',
      agent: 'mcp-client',
      approvalId: '',
      args: JSON.stringify({ user: 'svc-face', password: '[redacted]' }),
    });
    const refused = await runCli(t.env, ['ack', faceKey, '--retry'], undefined, 60_000);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`tool call ${faceKey} cannot be re-sent: its arguments hold secrets`);
    expect(refused.stderr).toContain('--done or --skip');
    expect(await redis.hget(keys.toolCall(prefix, faceKey), 'state')).toBe('in-doubt');
  });

  it("a configured secret in an MCP server's stderr is redacted in the gateway's debug log", async () => {
    const gateway = t.cluster.get('gateway');
    const line = await gateway.waitForLine(/vault starting with token/, 10_000);
    expect(line).toContain('server stderr');
    expect(line).toContain('[redacted]');
    expect(wholeOutput(gateway).join('\n')).not.toContain(VAULT_TOKEN);
  });
});
