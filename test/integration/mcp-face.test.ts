import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ApprovalStore, keys, type Approval } from '@bosun/transport';
import { EventCollector, demoConfig, freePort, openContext, startService, writeConfig, type ServiceProcess, type TestContext } from '../helpers/index.js';

// The gateway's own MCP face, served by a real gateway process and used with the MCP SDK's own
// client: authentication, the policy-filtered tool list, calls, and the approval paths of `ask`
// tools (not waiting, waiting then approved / denied / timed out, cancelled, coming back later).

const TOKEN = 'face-token-xyz';
const APPROVAL_TIMEOUT_MS = 5_000;

let ctx: TestContext;
let callLog: string;
let gateway: ServiceProcess;
let readOnlyGateway: ServiceProcess;
let store: ApprovalStore;
let collector: EventCollector;
let port: number;
let readOnlyPort: number;
let pod: string;
const clients: Client[] = [];

async function connect(p = port, token = TOKEN): Promise<Client> {
  const client = new Client({ name: 'face-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${p}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  clients.push(client);
  return client;
}

/** Calls of a demo tool that reached the demo server, optionally only those with this `reason` argument. */
function logged(tool: string, reason?: string): number {
  if (!existsSync(callLog)) return 0;
  return readFileSync(callLog, 'utf8')
    .split('\n')
    .filter((l) => l)
    .map((l) => JSON.parse(l) as { tool: string; args: { reason?: string } })
    .filter((c) => c.tool === tool && (reason === undefined || c.args.reason === reason)).length;
}

function text(r: CallToolResult): string {
  return r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
}

/** Polls the pending approvals until one proposes `tool` with this `reason` argument. */
async function pendingFor(tool: string, reason: string, timeoutMs = 4_000): Promise<Approval> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    const found = (await store.pending()).find((a) => a.calls.some((c) => c.tool === tool && c.args.reason === reason));
    if (found) return found;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`no pending approval for ${tool} (${reason}) within ${timeoutMs} ms`);
}

function restartArgs(reason: string): Record<string, unknown> {
  return { service: 'checkout', pod, reason };
}

beforeAll(async () => {
  ctx = await openContext('mcpface');
  callLog = join(ctx.dir, 'calls.jsonl');
  port = await freePort();
  do readOnlyPort = await freePort();
  while (readOnlyPort === port);

  const cfg = demoConfig();
  cfg.mcpServers.demo.env = { DEMO_MCP_CALL_LOG: callLog };
  // restart_pod stays `ask` (demo config); rollback_deployment is switched off.
  cfg.mcpServers.demo.tools.rollback_deployment = 'off';
  cfg.gateway.mcpServer = { port, token: '${BOSUN_FACE_TOKEN}', tools: ['demo__*'], mode: 'read-write', approvalTimeoutMs: APPROVAL_TIMEOUT_MS };
  const env = { ...ctx.env, BOSUN_FACE_TOKEN: TOKEN };
  gateway = startService('gateway', { ...env, BOSUN_CONFIG: writeConfig(ctx, cfg) });

  const ro = demoConfig();
  ro.mcpServers.demo.env = { DEMO_MCP_CALL_LOG: callLog };
  ro.gateway.mcpServer = { port: readOnlyPort, token: '${BOSUN_FACE_TOKEN}', tools: ['demo__*'], mode: 'read-only', approvalTimeoutMs: APPROVAL_TIMEOUT_MS };
  readOnlyGateway = startService('gateway', { ...env, BOSUN_CONFIG: writeConfig(ctx, ro, 'read-only.json') }, { name: 'gateway-read-only' });

  store = new ApprovalStore({ redis: ctx.redis, prefix: ctx.prefix });
  collector = new EventCollector(ctx.nats, ctx.prefix);
  await Promise.all([gateway.ready(), readOnlyGateway.ready()]);

  const client = await connect();
  const pods = await client.callTool({ name: 'demo__get_pods', arguments: { service: 'checkout' } });
  pod = (pods.structuredContent as { pods: { name: string }[] }).pods[0]!.name;
});

afterAll(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await Promise.allSettled([gateway?.stop(), readOnlyGateway?.stop()]);
  collector?.close();
  await store?.close();
  await ctx?.close();
});

describe('the gateway as an MCP server', () => {
  it('refuses clients without the right bearer token (401) before any MCP handling', async () => {
    await expect(connect(port, 'wrong-token')).rejects.toThrow(/401|Unauthorized/i);
    const bare = await fetch(`http://127.0.0.1:${port}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(bare.status).toBe(401);
    expect(bare.headers.get('www-authenticate')).toMatch(/^Bearer/);
  });

  it('logs its port and never its token', async () => {
    const line = await gateway.waitForLine(/gateway MCP face listening/);
    expect(JSON.parse(line).port).toBe(port);
    expect(gateway.lines.join('\n')).not.toContain(TOKEN);
  });

  it('lists the tools its policy offers, namespaced, with descriptions, schemas and annotations unchanged', async () => {
    const client = await connect();
    const { tools } = await client.listTools();
    const byName = new Map(tools.map((t) => [t.name, t]));
    expect([...byName.keys()].sort()).toEqual(['demo__get_deployments', 'demo__get_logs', 'demo__get_metrics', 'demo__get_pods', 'demo__list_services', 'demo__restart_pod']);
    expect(byName.get('demo__get_pods')?.annotations?.readOnlyHint).toBe(true);
    expect(byName.get('demo__get_pods')?.description).toMatch(/List the pods of a service/);
    expect(byName.get('demo__get_pods')?.inputSchema.properties).toHaveProperty('service');
    expect(byName.get('demo__restart_pod')?.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true });
    // `off` tools are not offered.
    expect(byName.has('demo__rollback_deployment')).toBe(false);
  });

  it('runs a read-only call through the gateway', async () => {
    const client = await connect();
    const r = (await client.callTool({ name: 'demo__get_pods', arguments: { service: 'checkout' } })) as CallToolResult;
    expect(r.isError).toBe(false);
    expect(text(r)).toContain(pod);
    expect((r.structuredContent as { pods: unknown[] }).pods.length).toBeGreaterThan(0);
    expect(String(r._meta?.['bosun/key'])).toMatch(/^mcp-/);
  });

  it('refuses an off tool and an unknown tool', async () => {
    const client = await connect();
    const off = (await client.callTool({ name: 'demo__rollback_deployment', arguments: { service: 'checkout', toVersion: 'v41' } })) as CallToolResult;
    expect(off.isError).toBe(true);
    expect(text(off)).toMatch(/off by policy/);
    expect(logged('rollback_deployment')).toBe(0);
    const unknown = (await client.callTool({ name: 'demo__nope', arguments: {} })) as CallToolResult;
    expect(unknown.isError).toBe(true);
    expect(text(unknown)).toMatch(/unknown tool/);
  });

  it('an ask tool called without waiting returns "approval pending" at once; once approved, the client comes back and it runs exactly once', async () => {
    const client = await connect();
    const args = restartArgs('no-wait');
    const r = (await client.callTool({ name: 'demo__restart_pod', arguments: args, _meta: { 'bosun/wait': false, 'bosun/reason': 'checkout is crashlooping' } })) as CallToolResult;
    expect(r.isError).toBe(true);
    const id = String(r._meta?.['bosun/approvalId']);
    expect(id).toMatch(/^ap-mcp-/);
    expect(text(r)).toContain(`approval pending: ${id} — decide with bosun approve ${id}`);
    const pending = await store.pending();
    const a = pending.find((x) => x.id === id);
    expect(a).toMatchObject({ status: 'pending', runId: 'mcp', agent: 'mcp-client', reason: 'checkout is crashlooping' });
    // The call as proposed, and the key it runs under: the approval authorises that key only.
    expect(a?.calls).toEqual([{ index: 0, tool: 'demo__restart_pod', args, needsApproval: true, key: a?.taskId, digest: expect.stringMatching(/^[0-9a-f]{64}$/) }]);
    const requested = await collector.waitFor((e) => e.type === 'approval.requested' && e.data.approvalId === id, 5_000, 'approval.requested');
    expect(requested).toMatchObject({ runId: 'mcp', agent: 'mcp-client' });
    expect(logged('restart_pod', 'no-wait')).toBe(0);

    // Coming back before a decision, still without waiting: still pending, nothing ran.
    const again = (await client.callTool({ name: 'demo__restart_pod', arguments: args, _meta: { 'bosun/wait': false, 'bosun/approvalId': id } })) as CallToolResult;
    expect(text(again)).toContain(`approval pending: ${id}`);

    await store.decide(id, { approve: true, by: 'tester' });
    const ran = (await client.callTool({ name: 'demo__restart_pod', arguments: args, _meta: { 'bosun/approvalId': id } })) as CallToolResult;
    expect(ran.isError).toBe(false);
    expect(text(ran)).toContain(pod);
    expect(logged('restart_pod', 'no-wait')).toBe(1);
    // The approval covers one effect: presenting it again answers from the record.
    const twice = (await client.callTool({ name: 'demo__restart_pod', arguments: args, _meta: { 'bosun/approvalId': id } })) as CallToolResult;
    expect(text(twice)).toBe(text(ran));
    expect(logged('restart_pod', 'no-wait')).toBe(1);
    // It does not cover other arguments.
    const other = (await client.callTool({ name: 'demo__restart_pod', arguments: restartArgs('other'), _meta: { 'bosun/approvalId': id } })) as CallToolResult;
    expect(other.isError).toBe(true);
    expect(text(other)).toMatch(/does not cover/);
    expect(logged('restart_pod', 'other')).toBe(0);
  });

  it('an ask tool called with waiting blocks until an operator approves, then runs once (audited with the approver)', async () => {
    const client = await connect();
    const progress: string[] = [];
    const call = client.callTool({ name: 'demo__restart_pod', arguments: restartArgs('wait-approve') }, undefined, {
      onprogress: (p) => progress.push(p.message ?? ''),
    }) as Promise<CallToolResult>;
    const a = await pendingFor('demo__restart_pod', 'wait-approve');
    expect(logged('restart_pod', 'wait-approve')).toBe(0);
    await store.decide(a.id, { approve: true, by: 'tester' });
    const r = await call;
    expect(r.isError).toBe(false);
    expect(r._meta?.['bosun/approvalId']).toBe(a.id);
    expect(logged('restart_pod', 'wait-approve')).toBe(1);
    expect(progress.some((m) => m.includes(a.id))).toBe(true);
    const audit = await ctx.redis.xrange(keys.audit(ctx.prefix), '-', '+');
    const entries = audit.map(([, f]) => Object.fromEntries(Array.from({ length: f.length / 2 }, (_, i) => [f[2 * i], f[2 * i + 1]])) as Record<string, string>);
    expect(entries.find((e) => e.approvalId === a.id)).toMatchObject({ agent: 'mcp-client', tool: 'demo__restart_pod', approver: 'tester', status: 'ok' });
  });

  it('an ask tool denied while the client waits returns an error with the reason and never runs', async () => {
    const client = await connect();
    const call = client.callTool({ name: 'demo__restart_pod', arguments: restartArgs('wait-deny') }) as Promise<CallToolResult>;
    const a = await pendingFor('demo__restart_pod', 'wait-deny');
    await store.decide(a.id, { approve: false, reason: 'not during peak hours', by: 'tester' });
    const r = await call;
    expect(r.isError).toBe(true);
    expect(text(r)).toContain('not during peak hours');
    expect(logged('restart_pod', 'wait-deny')).toBe(0);
  });

  it('an approval nobody decides in time is denied with reason timeout', async () => {
    const client = await connect();
    const started = Date.now();
    const r = (await client.callTool({ name: 'demo__restart_pod', arguments: restartArgs('wait-timeout') })) as CallToolResult;
    expect(Date.now() - started).toBeGreaterThanOrEqual(APPROVAL_TIMEOUT_MS - 500);
    expect(r.isError).toBe(true);
    expect(text(r)).toMatch(/timeout/);
    const id = String(r._meta?.['bosun/approvalId']);
    expect(await store.get(id)).toMatchObject({ status: 'denied', denyReason: 'timeout', decidedBy: 'bosun (approval timeout)' });
    await collector.waitFor((e) => e.type === 'approval.resolved' && e.data.approvalId === id, 5_000, 'approval.resolved');
    expect(logged('restart_pod', 'wait-timeout')).toBe(0);
  });

  it('stops waiting when the MCP request is cancelled or the HTTP request closes; the approval stays pending', async () => {
    // MCP cancellation (notifications/cancelled).
    const client = await connect();
    const abort = new AbortController();
    const call = client.callTool({ name: 'demo__restart_pod', arguments: restartArgs('cancel-mcp') }, undefined, { signal: abort.signal });
    const a = await pendingFor('demo__restart_pod', 'cancel-mcp');
    abort.abort();
    await expect(call).rejects.toThrow();
    await gateway.waitForLine(new RegExp(`"approvalId":"${a.id}".*approval wait cancelled`), 3_000);
    expect((await store.get(a.id))?.status).toBe('pending');

    // The HTTP request closes (the client goes away).
    const leaving = await connect();
    const call2 = leaving.callTool({ name: 'demo__restart_pod', arguments: restartArgs('cancel-http') });
    const b = await pendingFor('demo__restart_pod', 'cancel-http');
    await leaving.close();
    await expect(call2).rejects.toThrow();
    await gateway.waitForLine(new RegExp(`"approvalId":"${b.id}".*approval wait cancelled`), 3_000);
    expect((await store.get(b.id))?.status).toBe('pending');
    expect(logged('restart_pod', 'cancel-mcp') + logged('restart_pod', 'cancel-http')).toBe(0);

    // Nobody waits for them any more: once their time is up, the face's sweep denies them.
    const end = Date.parse(b.timeoutAt) + 10_000;
    while (Date.now() < end && ((await store.get(a.id))?.status === 'pending' || (await store.get(b.id))?.status === 'pending')) {
      await new Promise((r) => setTimeout(r, 200));
    }
    for (const id of [a.id, b.id]) expect(await store.get(id)).toMatchObject({ status: 'denied', denyReason: 'timeout', decidedBy: 'bosun (approval timeout)' });
    expect(logged('restart_pod', 'cancel-mcp') + logged('restart_pod', 'cancel-http')).toBe(0);
  });

  it('under a read-only policy offers only read-only tools and refuses mutating calls', async () => {
    const client = await connect(readOnlyPort);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).not.toContain('demo__restart_pod');
    expect(tools.every((t) => t.annotations?.readOnlyHint === true)).toBe(true);
    const r = (await client.callTool({ name: 'demo__restart_pod', arguments: restartArgs('read-only') })) as CallToolResult;
    expect(r.isError).toBe(true);
    expect(text(r)).toMatch(/read-only/);
    expect(logged('restart_pod', 'read-only')).toBe(0);
    expect((await store.pending()).some((a) => a.calls.some((c) => c.args.reason === 'read-only'))).toBe(false);
    const ok = (await client.callTool({ name: 'demo__get_pods', arguments: { service: 'checkout' } })) as CallToolResult;
    expect(ok.isError).toBe(false);
  });

  it('stops cleanly on SIGTERM and never printed the token', async () => {
    const status = await readOnlyGateway.stop();
    expect(status.code).toBe(0);
    for (const p of [gateway, readOnlyGateway]) expect(p.lines.join('\n')).not.toContain(TOKEN);
  });
});
