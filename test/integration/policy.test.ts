import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ToolCallJob, ToolCallResult } from '@bosun/contract';
import { createLogger, parseClusterConfig, type ClusterConfig } from '@bosun/config';
import { offeredTools, specialistCaller } from '@bosun/policy';
import { ApprovalStore, DeadLetters, EventPublisher, keys } from '@bosun/transport';
import { ToolGateway } from '@bosun/tool-gateway';
import {
  ENTRY,
  EventCollector,
  ROOT,
  callLog,
  demoConfig,
  openContext,
  waitUntil,
  type CallLog,
  type TestContext,
} from '../helpers/index.js';

// Tool policy, enforced by the gateway at call time against real MCP servers: capability
// states, read-only mode (with unannotated tools counted as mutating), approvals, audit, and
// progress notifications forwarded as events.

const require = createRequire(import.meta.url);
const bin = (pkg: string) => join(require.resolve(`${pkg}/package.json`), '..', 'dist/index.js');

let ctx: TestContext;
let config: ClusterConfig;
let gateway: ToolGateway;
let events: EventPublisher;
let deadLetters: DeadLetters;
let approvals: ApprovalStore;
let collector: EventCollector;
let demoLog: CallLog;
let n = 0;

function call(agent: string, tool: string, args: Record<string, unknown>, approvalId?: string, key = `k-${++n}`): Promise<ToolCallResult> {
  const data: ToolCallJob = {
    v: 1,
    key,
    runId: 'r-policy',
    incidentId: 'inc-policy',
    agent,
    tool,
    args,
    ...(approvalId ? { approvalId } : {}),
  };
  return gateway.execute(data);
}

async function auditEntries(): Promise<Record<string, string>[]> {
  const raw = await ctx.redis.xrange(keys.audit(ctx.prefix), '-', '+');
  return raw.map(([, f]) => {
    const o: Record<string, string> = {};
    for (let i = 0; i < f.length; i += 2) o[f[i]!] = f[i + 1]!;
    return o;
  });
}

beforeAll(async () => {
  ctx = await openContext('policy');
  demoLog = callLog(join(ctx.dir, 'demo-calls.jsonl'));
  const raw = demoConfig();
  raw.mcpServers = {
    demo: {
      transport: 'stdio',
      command: process.execPath,
      args: [ENTRY.demoMcp],
      env: { DEMO_MCP_CALL_LOG: demoLog.path },
      tools: { get_logs: 'off', restart_pod: 'ask', rollback_deployment: 'ask' },
    },
    fs: { transport: 'stdio', command: process.execPath, args: [bin('@modelcontextprotocol/server-filesystem'), ctx.dir] },
    plain: { transport: 'stdio', command: process.execPath, args: [join(ROOT, 'test/fixtures/mcp/unannotated.mjs')] },
    everything: { transport: 'stdio', command: process.execPath, args: [bin('@modelcontextprotocol/server-everything'), 'stdio'] },
  };
  const spec = raw.specialists.kubernetes;
  raw.specialists = {
    reader: { ...spec, tools: ['fs__*', 'plain__*', 'demo__*', 'everything__*'], mode: 'read-only' },
    writer: { ...spec, tools: ['fs__*', 'plain__*', 'demo__*'], mode: 'read-write' },
  };
  raw.coordinator.routes = {};
  raw.coordinator.defaultRoute = ['reader'];
  raw.gateway = { concurrency: 8, callTimeoutMs: 10_000, maxResultChars: 5_000 };
  config = parseClusterConfig(raw, { file: join(ctx.dir, 'policy.json') });
  const log = createLogger({ service: 'policy-test', level: 'silent' });
  events = new EventPublisher({ prefix: ctx.prefix, redis: ctx.redis, nats: ctx.nats, log });
  deadLetters = new DeadLetters({ redis: ctx.redis, prefix: ctx.prefix });
  approvals = new ApprovalStore({ redis: ctx.redis, prefix: ctx.prefix });
  collector = new EventCollector(ctx.nats, ctx.prefix);
  gateway = new ToolGateway({ redis: ctx.redis, prefix: ctx.prefix, config, events, deadLetters, log });
  const catalog = await gateway.start();
  expect(catalog.unavailable).toEqual({});
});

afterAll(async () => {
  await gateway?.close();
  await events?.flush();
  collector?.close();
  await approvals?.close();
  await deadLetters?.close();
  await ctx?.close();
});

describe('what a specialist is offered', () => {
  it('read-only mode offers only readOnlyHint tools; off tools are never offered', () => {
    const tools = gateway.catalog().tools;
    const reader = offeredTools(config, specialistCaller(config, 'reader')!, tools).map((t) => t.name);
    const writer = offeredTools(config, specialistCaller(config, 'writer')!, tools).map((t) => t.name);
    expect(reader).toContain('fs__read_text_file');
    expect(reader).toContain('demo__get_pods');
    expect(reader).not.toContain('fs__write_file');
    expect(reader).not.toContain('plain__touch');
    expect(reader).not.toContain('demo__restart_pod');
    expect(reader).not.toContain('demo__get_logs');
    expect(writer).toContain('fs__write_file');
    expect(writer).toContain('plain__touch');
    expect(writer).toContain('demo__restart_pod');
    expect(writer).not.toContain('demo__get_logs');
  });
});

describe('the gateway enforces the policy at call time', () => {
  it('read-only: reads run; writes and unannotated tools are refused, even when a model names them', async () => {
    const file = join(ctx.dir, 'notes.txt');
    expect((await call('writer', 'fs__write_file', { path: file, content: 'hello' })).status).toBe('ok');
    expect(readFileSync(file, 'utf8')).toBe('hello');
    const read = await call('reader', 'fs__read_text_file', { path: file });
    expect(read.status).toBe('ok');
    expect(read.text).toContain('hello');
    const write = await call('reader', 'fs__write_file', { path: join(ctx.dir, 'nope.txt'), content: 'x' });
    expect(write.error).toMatch(/may change things and agent "reader" is read-only/);
    expect(existsSync(join(ctx.dir, 'nope.txt'))).toBe(false);
    const touch = await call('reader', 'plain__touch', { what: 'x' });
    expect(touch.error).toMatch(/"plain__touch" may change things/);
    expect((await call('writer', 'plain__touch', { what: 'x' })).text).toBe('touched x (1)');
  });

  it('off: refused for everyone', async () => {
    const r = await call('reader', 'demo__get_logs', { service: 'checkout' });
    expect(r.error).toBe('tool "demo__get_logs" is off by policy');
    expect(r.code).toBe('refused');
  });

  it('ask: refused without an approval that covers exactly this call; runs with one', async () => {
    const args = { service: 'checkout', pod: 'checkout-7c9d6f8b4-9mz4q' };
    const unasked = await call('writer', 'demo__restart_pod', args);
    expect(unasked).toMatchObject({ code: 'needs_approval', error: 'tool "demo__restart_pod" needs an operator\'s approval' });
    const now = Date.now();
    const base = {
      runId: 'r-policy',
      incidentId: 'inc-policy',
      agent: 'writer',
      taskId: 't',
      reason: 'fix',
      createdAt: new Date(now).toISOString(),
      timeoutAt: new Date(now + 60_000).toISOString(),
    };
    const other = { ...args, pod: 'checkout-7c9d6f8b4-2xk8p' };
    await approvals.request({
      ...base,
      id: 'ap-pending',
      calls: [
        { index: 0, tool: 'demo__restart_pod', args, needsApproval: true, key: 't-s1-c0' },
        { index: 1, tool: 'demo__restart_pod', args: other, needsApproval: true, key: 't-s1-c1' },
      ],
    });
    // (A refusal is recorded under its key like any answer: these use keys of their own.)
    const pending = await call('writer', 'demo__restart_pod', args, 'ap-pending');
    expect(pending.code).toBe('denied');
    expect(pending.error).toMatch(/approval ap-pending is pending, not approved/);
    await approvals.decide('ap-pending', { approve: true, by: 'erin' });
    // The key of the other approved call, with this call's arguments.
    expect((await call('writer', 'demo__restart_pod', args, 'ap-pending', 't-s1-c1')).error).toBe(
      'approval ap-pending does not cover this call of demo__restart_pod with these arguments',
    );
    const ok = await call('writer', 'demo__restart_pod', { pod: args.pod, service: args.service }, 'ap-pending', 't-s1-c0');
    expect(ok.status).toBe('ok');
    const audited = (await auditEntries()).find((e) => e.approvalId === 'ap-pending' && e.status === 'ok');
    expect(audited).toMatchObject({ tool: 'demo__restart_pod', approver: 'erin', agent: 'writer' });
  });

  it('an approval authorises exactly the keys of the calls it approved, each once', async () => {
    const args = { service: 'checkout', toVersion: 'v41' };
    const now = Date.now();
    const base = {
      runId: 'r-policy',
      incidentId: 'inc-policy',
      agent: 'writer',
      taskId: 't-bound',
      reason: 'roll back',
      createdAt: new Date(now).toISOString(),
      timeoutAt: new Date(now + 60_000).toISOString(),
    };
    await approvals.request({
      ...base,
      id: 'ap-t-bound-s2',
      calls: [
        { index: 0, tool: 'demo__rollback_deployment', args, needsApproval: true, key: 't-bound-s2-c0' },
        {
          index: 1,
          tool: 'demo__rollback_deployment',
          args: { service: 'search', toVersion: 'v8' },
          needsApproval: true,
          key: 't-bound-s2-c1',
        },
      ],
    });
    await approvals.decide('ap-t-bound-s2', { approve: true, only: [0], by: 'erin' });
    const before = demoLog.count('rollback_deployment');
    const ok = await call('writer', 'demo__rollback_deployment', args, 'ap-t-bound-s2', 't-bound-s2-c0');
    expect(ok.status).toBe('ok');
    // The same key again: answered from its record, not run again.
    expect(await call('writer', 'demo__rollback_deployment', args, 'ap-t-bound-s2', 't-bound-s2-c0')).toEqual(ok);
    // A new key with the same approval, tool and arguments: refused, audited, reported.
    const replay = await call('writer', 'demo__rollback_deployment', args, 'ap-t-bound-s2', 't-bound-s7-c0');
    expect(replay.error).toBe(
      'approval ap-t-bound-s2 does not cover this call (key t-bound-s7-c0): it approved t-bound-s2-c0, each once, under its own key',
    );
    // The key of a call the operator left out of the approval: refused too.
    const left = await call(
      'writer',
      'demo__rollback_deployment',
      { service: 'search', toVersion: 'v8' },
      'ap-t-bound-s2',
      't-bound-s2-c1',
    );
    expect(left.error).toMatch(/does not cover this call \(key t-bound-s2-c1\)/);
    expect(demoLog.count('rollback_deployment') - before).toBe(1);
    const audited = (await auditEntries()).filter((e) => e.approvalId === 'ap-t-bound-s2').map((e) => [e.key, e.status]);
    expect(audited).toEqual([
      ['t-bound-s2-c0', 'ok'],
      ['t-bound-s7-c0', 'refused'],
      ['t-bound-s2-c1', 'refused'],
    ]);
    await collector.waitFor((e) => e.type === 'tool.failed' && e.data.key === 't-bound-s7-c0', 10_000, 'tool.failed of the new key');
  });

  it('a refused call leaves no record: the same key runs once an approval covers it', async () => {
    const args = { service: 'checkout', toVersion: 'v40' };
    const now = Date.now();
    await approvals.request({
      id: 'ap-t-early-s1',
      runId: 'r-policy',
      incidentId: 'inc-policy',
      agent: 'writer',
      taskId: 't-early',
      reason: 'roll back',
      createdAt: new Date(now).toISOString(),
      timeoutAt: new Date(now + 60_000).toISOString(),
      calls: [{ index: 0, tool: 'demo__rollback_deployment', args, needsApproval: true, key: 't-early-s1-c0' }],
    });
    const before = demoLog.count('rollback_deployment');
    // Sent while the approval is still pending: refused, and nothing is written under the key.
    const early = await call('writer', 'demo__rollback_deployment', args, 'ap-t-early-s1', 't-early-s1-c0');
    expect(early.error).toMatch(/is pending, not approved/);
    expect(await ctx.redis.exists(keys.toolCall(ctx.prefix, 't-early-s1-c0'))).toBe(0);
    await approvals.decide('ap-t-early-s1', { approve: true, by: 'erin' });
    const ok = await call('writer', 'demo__rollback_deployment', args, 'ap-t-early-s1', 't-early-s1-c0');
    expect(ok.status).toBe('ok');
    expect(demoLog.count('rollback_deployment') - before).toBe(1);
  });

  it('reads approvals stored before calls had keys: the key is derived from the approval id and the index', async () => {
    const args = { service: 'checkout', pod: 'checkout-7c9d6f8b4-2xk8p' };
    const now = Date.now();
    // As a specialist stored it before this version: no key, no digest, the real arguments.
    const old = {
      id: 'ap-t-old-s3',
      status: 'pending',
      runId: 'r-policy',
      incidentId: 'inc-policy',
      agent: 'writer',
      taskId: 't-old',
      calls: [
        { index: 0, tool: 'demo__get_pods', args: { service: 'checkout' }, needsApproval: false },
        { index: 1, tool: 'demo__restart_pod', args, needsApproval: true },
      ],
      reason: 'r',
      createdAt: new Date(now).toISOString(),
      timeoutAt: new Date(now + 60_000).toISOString(),
    };
    await ctx.redis.set(keys.approval(ctx.prefix, old.id), JSON.stringify(old));
    const read = await approvals.get(old.id);
    expect(read?.calls.map((c) => c.key)).toEqual(['t-old-s3-c0', 't-old-s3-c1']);
    await approvals.decide(old.id, { approve: true, by: 'erin' });
    expect((await call('writer', 'demo__restart_pod', args, old.id, 't-old-s9-c1')).error).toMatch(
      /does not cover this call \(key t-old-s9-c1\)/,
    );
    expect((await call('writer', 'demo__restart_pod', args, old.id, 't-old-s3-c1')).status).toBe('ok');
  });

  it('refuses, audits and reports a call whose agent is named like an Object property, never crashing', async () => {
    for (const agent of Object.getOwnPropertyNames(Object.prototype)) {
      const key = `k-proto-${agent}`;
      const r = await call(agent, 'demo__restart_pod', { service: 'checkout', pod: 'checkout-7c9d6f8b4-9mz4q' }, undefined, key);
      expect(r, agent).toMatchObject({ status: 'error', error: `tool "demo__restart_pod" is not allowed for agent "${agent}"` });
      const ro = await call(agent, 'demo__get_pods', { service: 'checkout' }, undefined, `${key}-ro`);
      expect(ro.error, agent).toBe(`tool "demo__get_pods" is not allowed for agent "${agent}"`);
      // And as a tool name: unknown.
      expect((await call('writer', agent, {}, undefined, `${key}-tool`)).error, agent).toBe(`unknown tool "${agent}"`);
    }
    const audited = (await auditEntries()).filter((e) => e.key?.startsWith('k-proto-'));
    expect(audited.map((e) => [e.agent, e.status])).toEqual(Object.getOwnPropertyNames(Object.prototype).map((a) => [a, 'refused']));
    await collector.waitFor(
      (e) => e.type === 'tool.failed' && e.data.key === 'k-proto-toString',
      10_000,
      'tool.failed of the toString call',
    );
  });

  it('writes every mutating call to the audit stream, secrets redacted, refusals included', async () => {
    await call('writer', 'fs__write_file', { path: join(ctx.dir, 'cfg.txt'), content: 'x', password: 'hunter2-secret' });
    const entries = await auditEntries();
    const write = entries.filter((e) => e.tool === 'fs__write_file');
    expect(write.some((e) => e.status === 'ok')).toBe(true);
    expect(write.some((e) => e.status === 'refused' && e.agent === 'reader')).toBe(true);
    expect(JSON.stringify(entries)).not.toContain('hunter2-secret');
    expect(write.some((e) => JSON.parse(e.args!).password === '[redacted]')).toBe(true);
    // Read-only calls are not audited.
    expect(entries.some((e) => e.tool === 'fs__read_text_file')).toBe(false);
  });

  it('forwards MCP progress notifications as tool.progress events', async () => {
    const r = await call('reader', 'everything__trigger-long-running-operation', { duration: 2, steps: 4 });
    expect(r.status).toBe('ok');
    // Four notifications, 0.5 s apart, forwarded at most twice a second: at least two of the first
    // three become events. (The fourth may come in the same read as the answer, and the SDK can
    // drop a notification that arrives after its request has ended.) Their events are published
    // after the gateway saw them, so wait for them.
    const ofCall = () =>
      collector.events.filter((e) => e.type === 'tool.progress' && e.data.tool === 'everything__trigger-long-running-operation');
    await waitUntil(() => ofCall().length >= 2, 5_000, 'two tool.progress events');
    const progress = ofCall();
    expect(progress.length).toBeGreaterThanOrEqual(2);
    const values = progress.map((e) => Number(e.data.progress));
    expect(values).toEqual([...values].sort((a, b) => a - b));
    expect(progress.every((e) => e.data.total === 4 && e.agent === 'reader')).toBe(true);
  });
});
