import { existsSync, readFileSync } from 'node:fs';
import { request, type IncomingHttpHeaders } from 'node:http';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  StreamableHTTPClientTransport,
  type StreamableHTTPClientTransportOptions,
} from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError, type CallToolResult, type Progress } from '@modelcontextprotocol/sdk/types.js';
import { ApprovalStore, keys, type Approval } from '@bosun/transport';
import {
  EventCollector,
  demoConfig,
  freePort,
  openContext,
  startService,
  waitUntil,
  wholeOutput,
  writeConfig,
  type ServiceProcess,
  type TestContext,
} from '../helpers/index.js';

// The gateway's own MCP face, served by a real gateway process and used with the MCP SDK's own
// client: HTTP checks (Host/Origin, paths, token, headers), the policy-filtered tool list, calls,
// and the approval paths of `ask` tools (pending at once, waiting then approved / denied / timed
// out, cancelled, coming back later, reconnecting after a broken stream).

/**
 * The approval a progress notification names. The SDK hands `onprogress` the notification's
 * params whole, `_meta` included, though its `Progress` type leaves `_meta` out.
 */
function progressApprovalId(p: Progress & { _meta?: Record<string, unknown> }): unknown {
  return p._meta?.['bosun/approvalId'];
}

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
let proxy: CutProxy;
let proxyPort: number;
let pod: string;
const clients: Client[] = [];

async function connect(p = port, token = TOKEN, options: StreamableHTTPClientTransportOptions = {}): Promise<Client> {
  const client = new Client({ name: 'face-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${p}/mcp`), {
    ...options,
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  clients.push(client);
  return client;
}

function sessionOf(client: Client): string {
  return String((client.transport as StreamableHTTPClientTransport).sessionId);
}

/** One HTTP request with exactly these headers (fetch would not send a `Host` of our choosing). */
function raw(
  p: number,
  init: { method?: string; path?: string; headers?: Record<string, string>; body?: string },
): Promise<{ status: number; headers: IncomingHttpHeaders; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: p,
        method: init.method ?? 'POST',
        path: init.path ?? '/mcp',
        headers: { host: `127.0.0.1:${p}`, ...init.headers },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(init.body);
  });
}

const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});
const MCP_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${TOKEN}` };

/** A TCP proxy to a port whose connections a test can cut, and that can refuse new ones for a while. */
class CutProxy {
  /** Everything clients sent through it, as text (request heads included). */
  sent = '';
  blocked = false;
  private readonly sockets = new Set<Socket>();
  private readonly server: Server;

  constructor(private readonly target: () => number) {
    this.server = createServer((client) => {
      if (this.blocked) return void client.destroy();
      const upstream = createConnection({ host: '127.0.0.1', port: this.target() });
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => undefined);
      }
      client.on('data', (chunk: Buffer) => (this.sent += chunk.toString('latin1')));
      client.pipe(upstream).pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
  }

  listen(p: number): Promise<void> {
    return new Promise((resolve) => this.server.listen(p, '127.0.0.1', resolve));
  }

  /** Breaks every open connection, as a network failure would. */
  cut(): void {
    for (const s of this.sockets) s.destroy();
  }

  close(): Promise<void> {
    this.cut();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
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
  let found: Approval | undefined;
  await waitUntil(
    async () => {
      found = (await store.pending()).find((a) => a.calls.some((c) => c.tool === tool && c.args.reason === reason));
      return found !== undefined;
    },
    timeoutMs,
    `a pending approval for ${tool} (${reason})`,
    50,
  );
  return found!;
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
  do proxyPort = await freePort();
  while (proxyPort === port || proxyPort === readOnlyPort);
  proxy = new CutProxy(() => port);
  await proxy.listen(proxyPort);

  const cfg = demoConfig();
  cfg.mcpServers.demo.env = { DEMO_MCP_CALL_LOG: callLog };
  // restart_pod stays `ask` (demo config); rollback_deployment is switched off.
  cfg.mcpServers.demo.tools.rollback_deployment = 'off';
  // Configured Host values (they replace the loopback defaults): the face's and the proxy's.
  cfg.gateway.mcpServer = {
    port,
    token: '${BOSUN_FACE_TOKEN}',
    tools: ['demo__*'],
    mode: 'read-write',
    approvalTimeoutMs: APPROVAL_TIMEOUT_MS,
    allowedHosts: [`127.0.0.1:${port}`, `127.0.0.1:${proxyPort}`],
  };
  const env = { ...ctx.env, BOSUN_FACE_TOKEN: TOKEN };
  gateway = startService('gateway', { ...env, BOSUN_CONFIG: writeConfig(ctx, cfg) });

  const ro = demoConfig();
  ro.mcpServers.demo.env = { DEMO_MCP_CALL_LOG: callLog };
  ro.gateway.mcpServer = {
    port: readOnlyPort,
    token: '${BOSUN_FACE_TOKEN}',
    tools: ['demo__*'],
    mode: 'read-only',
    approvalTimeoutMs: APPROVAL_TIMEOUT_MS,
  };
  readOnlyGateway = startService(
    'gateway',
    { ...env, BOSUN_CONFIG: writeConfig(ctx, ro, 'read-only.json') },
    { name: 'gateway-read-only' },
  );

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
  await proxy?.close();
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
    // No token: a bare challenge (RFC 6750: no error code when no credentials were sent).
    expect(bare.headers.get('www-authenticate')).toBe('Bearer realm="bosun-gateway"');
    const wrong = await raw(port, { headers: { ...MCP_HEADERS, authorization: 'Bearer wrong-token' }, body: INITIALIZE });
    expect(wrong.status).toBe(401);
    expect(wrong.headers['www-authenticate']).toMatch(/^Bearer realm="bosun-gateway", error="invalid_token"/);
  });

  it('answers other paths with a plain 404 before the token check (so no OAuth discovery); only an unknown session is -32001', async () => {
    for (const path of [
      '/.well-known/oauth-protected-resource/mcp',
      '/.well-known/oauth-protected-resource',
      '/.well-known/oauth-authorization-server',
    ]) {
      const r = await raw(port, { method: 'GET', path });
      expect(r.status, path).toBe(404);
      expect(r.headers['www-authenticate']).toBeUndefined();
      expect(JSON.parse(r.text)).toMatchObject({ error: 'not_found' });
    }
    const wrongPath = await raw(port, { path: '/other', headers: MCP_HEADERS, body: INITIALIZE });
    expect(wrongPath.status).toBe(404);
    expect(wrongPath.text).not.toContain('-32001');
    const unknownSession = await raw(port, {
      headers: { ...MCP_HEADERS, 'mcp-session-id': 'no-such-session' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
    });
    expect(unknownSession.status).toBe(404);
    expect(JSON.parse(unknownSession.text)).toMatchObject({ error: { code: -32001, message: 'Session not found' } });
  });

  it('refuses a Host or Origin that is not allowed with 403 (DNS rebinding), before the token check; loopback names pass by default', async () => {
    // The read-only face keeps the defaults: localhost, 127.0.0.1, [::1] with its port.
    const evil = await raw(readOnlyPort, {
      headers: { ...MCP_HEADERS, host: 'evil.example.com', origin: 'http://evil.example.com' },
      body: INITIALIZE,
    });
    expect(evil.status).toBe(403);
    expect(JSON.parse(evil.text)).toMatchObject({ error: { message: expect.stringMatching(/Host "evil.example.com" is not allowed/) } });
    const noToken = await raw(readOnlyPort, {
      method: 'GET',
      path: '/.well-known/oauth-protected-resource',
      headers: { host: `evil.example.com:${readOnlyPort}` },
    });
    expect(noToken.status).toBe(403);
    const evilOrigin = await raw(readOnlyPort, {
      headers: { ...MCP_HEADERS, host: `localhost:${readOnlyPort}`, origin: 'http://evil.example.com' },
      body: INITIALIZE,
    });
    expect(evilOrigin.status).toBe(403);
    expect(JSON.parse(evilOrigin.text)).toMatchObject({
      error: { message: expect.stringMatching(/Origin "http:\/\/evil.example.com" is not allowed/) },
    });
    const local = await raw(readOnlyPort, {
      headers: { ...MCP_HEADERS, host: `localhost:${readOnlyPort}`, origin: `http://localhost:${readOnlyPort}` },
      body: INITIALIZE,
    });
    expect(local.status).toBe(200);
    expect(local.text).toContain('"serverInfo"');
    // Configured values replace the defaults: the read-write face allows 127.0.0.1 (and the proxy) only.
    const notListed = await raw(port, { headers: { ...MCP_HEADERS, host: `localhost:${port}` }, body: INITIALIZE });
    expect(notListed.status).toBe(403);
  });

  it('checks Content-Type and Accept before reading the body (415, 406), with or without a session', async () => {
    const client = await connect();
    const session = { 'mcp-session-id': sessionOf(client), 'mcp-protocol-version': '2025-11-25' };
    for (const headers of [{ ...MCP_HEADERS, ...session }, MCP_HEADERS]) {
      const plain = await raw(port, { headers: { ...headers, 'content-type': 'text/plain' }, body: 'this is not JSON' });
      expect(plain.status).toBe(415);
      expect(JSON.parse(plain.text)).toMatchObject({ error: { message: expect.stringMatching(/Unsupported Media Type/) } });
      const accept = await raw(port, { headers: { ...headers, accept: 'application/json' }, body: 'this is not JSON' });
      expect(accept.status).toBe(406);
    }
    // The session is unharmed.
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
  });

  it('logs its port and never its token', async () => {
    const line = await gateway.waitForLine(/gateway MCP face listening/);
    expect(JSON.parse(line).port).toBe(port);
    expect(wholeOutput(gateway).join('\n')).not.toContain(TOKEN);
  });

  it('lists the tools its policy offers, namespaced, with descriptions, schemas and annotations unchanged', async () => {
    const client = await connect();
    const { tools, nextCursor } = await client.listTools();
    // One page: fewer tools than a page holds.
    expect(nextCursor).toBeUndefined();
    const byName = new Map(tools.map((t) => [t.name, t]));
    expect([...byName.keys()].sort()).toEqual([
      'demo__get_deployments',
      'demo__get_logs',
      'demo__get_metrics',
      'demo__get_pods',
      'demo__list_services',
      'demo__restart_pod',
    ]);
    expect(byName.get('demo__get_pods')?.annotations?.readOnlyHint).toBe(true);
    expect(byName.get('demo__get_pods')?.description).toMatch(/List the pods of a service/);
    expect(byName.get('demo__get_pods')?.inputSchema.properties).toHaveProperty('service');
    expect(byName.get('demo__restart_pod')?.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true });
    // `off` tools are not offered.
    expect(byName.has('demo__rollback_deployment')).toBe(false);
  });

  it('answers a tools/list cursor it did not issue with the JSON-RPC error -32602', async () => {
    const client = await connect();
    const err = await client.listTools({ cursor: 'not-a-cursor' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(McpError);
    expect((err as McpError).code).toBe(ErrorCode.InvalidParams);
  });

  it('runs a read-only call through the gateway', async () => {
    const client = await connect();
    const r = (await client.callTool({ name: 'demo__get_pods', arguments: { service: 'checkout' } })) as CallToolResult;
    expect(r.isError).toBe(false);
    expect(text(r)).toContain(pod);
    expect((r.structuredContent as { pods: unknown[] }).pods.length).toBeGreaterThan(0);
    expect(String(r._meta?.['bosun/key'])).toMatch(/^mcp-/);
  });

  it('refuses an off tool (a tool result, audited by the gateway) and answers an unknown tool with the JSON-RPC error -32602', async () => {
    const client = await connect();
    const off = (await client.callTool({
      name: 'demo__rollback_deployment',
      arguments: { service: 'checkout', toVersion: 'v41' },
    })) as CallToolResult;
    expect(off.isError).toBe(true);
    expect(text(off)).toMatch(/off by policy/);
    expect(logged('rollback_deployment')).toBe(0);
    const unknown = await client.callTool({ name: 'demo__nope', arguments: {} }).catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(McpError);
    expect((unknown as McpError).code).toBe(ErrorCode.InvalidParams);
    expect((unknown as McpError).message).toMatch(/Unknown tool: "demo__nope"/);
  });

  it('an ask tool called without waiting returns "approval pending" at once; once approved, the client comes back and it runs exactly once', async () => {
    const client = await connect();
    const args = restartArgs('no-wait');
    const r = (await client.callTool({
      name: 'demo__restart_pod',
      arguments: args,
      _meta: { 'bosun/wait': false, 'bosun/reason': 'checkout is crashlooping' },
    })) as CallToolResult;
    expect(r.isError).toBe(true);
    const id = String(r._meta?.['bosun/approvalId']);
    expect(id).toMatch(/^ap-mcp-/);
    expect(text(r)).toContain(`approval pending: ${id} — decide with bosun approve ${id}`);
    const pending = await store.pending();
    const a = pending.find((x) => x.id === id);
    expect(a).toMatchObject({ status: 'pending', runId: 'mcp', agent: 'mcp-client', reason: 'checkout is crashlooping' });
    // The call as proposed, and the key it runs under: the approval authorises that key only.
    expect(a?.calls).toEqual([
      { index: 0, tool: 'demo__restart_pod', args, needsApproval: true, key: a?.taskId, digest: expect.stringMatching(/^[0-9a-f]{64}$/) },
    ]);
    const requested = await collector.waitFor(
      (e) => e.type === 'approval.requested' && e.data.approvalId === id,
      5_000,
      'approval.requested',
    );
    expect(requested).toMatchObject({ runId: 'mcp', agent: 'mcp-client' });
    expect(logged('restart_pod', 'no-wait')).toBe(0);

    // Coming back before a decision, still without waiting: still pending, nothing ran.
    const again = (await client.callTool({
      name: 'demo__restart_pod',
      arguments: args,
      _meta: { 'bosun/wait': false, 'bosun/approvalId': id },
    })) as CallToolResult;
    expect(text(again)).toContain(`approval pending: ${id}`);

    await store.decide(id, { approve: true, by: 'tester' });
    const ran = (await client.callTool({
      name: 'demo__restart_pod',
      arguments: args,
      _meta: { 'bosun/approvalId': id },
    })) as CallToolResult;
    expect(ran.isError).toBe(false);
    expect(text(ran)).toContain(pod);
    expect(logged('restart_pod', 'no-wait')).toBe(1);
    // The approval covers one effect: presenting it again answers from the record.
    const twice = (await client.callTool({
      name: 'demo__restart_pod',
      arguments: args,
      _meta: { 'bosun/approvalId': id },
    })) as CallToolResult;
    expect(text(twice)).toBe(text(ran));
    expect(logged('restart_pod', 'no-wait')).toBe(1);
    // It does not cover other arguments.
    const other = (await client.callTool({
      name: 'demo__restart_pod',
      arguments: restartArgs('other'),
      _meta: { 'bosun/approvalId': id },
    })) as CallToolResult;
    expect(other.isError).toBe(true);
    expect(text(other)).toMatch(/does not cover/);
    expect(logged('restart_pod', 'other')).toBe(0);
  });

  it('an ask tool called without a progress token answers "approval pending" with the id at once (a client timeout would come first)', async () => {
    const client = await connect();
    const started = Date.now();
    const r = (await client.callTool({ name: 'demo__restart_pod', arguments: restartArgs('no-token') })) as CallToolResult;
    expect(Date.now() - started).toBeLessThan(APPROVAL_TIMEOUT_MS);
    expect(r.isError).toBe(true);
    const id = String(r._meta?.['bosun/approvalId']);
    expect(id).toMatch(/^ap-mcp-/);
    expect(r._meta?.['bosun/approvalStatus']).toBe('pending');
    expect(text(r)).toContain(`approval pending: ${id}`);
    expect((await store.get(id))?.status).toBe('pending');
    expect(logged('restart_pod', 'no-token')).toBe(0);
  });

  it('an ask tool called with a progress token waits, names the approval in its first progress notification, and runs once when approved (audited with the approver)', async () => {
    const client = await connect();
    const progress: { message?: string; approvalId?: unknown }[] = [];
    const call = client.callTool({ name: 'demo__restart_pod', arguments: restartArgs('wait-approve') }, undefined, {
      onprogress: (p) => progress.push({ message: p.message, approvalId: progressApprovalId(p) }),
    }) as Promise<CallToolResult>;
    const a = await pendingFor('demo__restart_pod', 'wait-approve');
    await waitUntil(() => progress.length > 0, 5_000, 'the first progress notification');
    expect(progress[0]).toEqual({ message: expect.stringContaining(a.id), approvalId: a.id });
    expect(logged('restart_pod', 'wait-approve')).toBe(0);
    await store.decide(a.id, { approve: true, by: 'tester' });
    const r = await call;
    expect(r.isError).toBe(false);
    expect(r._meta?.['bosun/approvalId']).toBe(a.id);
    expect(logged('restart_pod', 'wait-approve')).toBe(1);
    const audit = await ctx.redis.xrange(keys.audit(ctx.prefix), '-', '+');
    const entries = audit.map(
      ([, f]) => Object.fromEntries(Array.from({ length: f.length / 2 }, (_, i) => [f[2 * i], f[2 * i + 1]])) as Record<string, string>,
    );
    expect(entries.find((e) => e.approvalId === a.id)).toMatchObject({
      agent: 'mcp-client',
      tool: 'demo__restart_pod',
      approver: 'tester',
      status: 'ok',
    });
  });

  it('an ask tool denied while the client waits returns an error with the reason and never runs', async () => {
    const client = await connect();
    const call = client.callTool({ name: 'demo__restart_pod', arguments: restartArgs('wait-deny') }, undefined, {
      onprogress: () => undefined,
    }) as Promise<CallToolResult>;
    const a = await pendingFor('demo__restart_pod', 'wait-deny');
    await store.decide(a.id, { approve: false, reason: 'not during peak hours', by: 'tester' });
    const r = await call;
    expect(r.isError).toBe(true);
    expect(text(r)).toContain('not during peak hours');
    expect(logged('restart_pod', 'wait-deny')).toBe(0);
  });

  it('an approval nobody decides in time is denied with reason timeout (waiting on request, without a progress token)', async () => {
    const client = await connect();
    const started = Date.now();
    const r = (await client.callTool({
      name: 'demo__restart_pod',
      arguments: restartArgs('wait-timeout'),
      _meta: { 'bosun/wait': true },
    })) as CallToolResult;
    expect(Date.now() - started).toBeGreaterThanOrEqual(APPROVAL_TIMEOUT_MS - 500);
    expect(r.isError).toBe(true);
    expect(text(r)).toMatch(/timeout/);
    const id = String(r._meta?.['bosun/approvalId']);
    expect(await store.get(id)).toMatchObject({ status: 'denied', denyReason: 'timeout', decidedBy: 'bosun (approval timeout)' });
    await collector.waitFor((e) => e.type === 'approval.resolved' && e.data.approvalId === id, 5_000, 'approval.resolved');
    expect(logged('restart_pod', 'wait-timeout')).toBe(0);
  });

  it('stops waiting when the MCP request is cancelled or the session ends; the approval stays pending', async () => {
    // MCP cancellation (notifications/cancelled).
    const client = await connect();
    const abort = new AbortController();
    const call = client.callTool({ name: 'demo__restart_pod', arguments: restartArgs('cancel-mcp') }, undefined, {
      signal: abort.signal,
      onprogress: () => undefined,
    });
    const a = await pendingFor('demo__restart_pod', 'cancel-mcp');
    abort.abort();
    await expect(call).rejects.toThrow();
    await gateway.waitForLine(new RegExp(`"approvalId":"${a.id}".*approval wait cancelled`), 3_000);
    expect((await store.get(a.id))?.status).toBe('pending');

    // The client ends its session (DELETE) while the call waits.
    const leaving = await connect();
    const call2 = leaving.callTool({ name: 'demo__restart_pod', arguments: restartArgs('cancel-session') }, undefined, {
      onprogress: () => undefined,
    });
    const b = await pendingFor('demo__restart_pod', 'cancel-session');
    await (leaving.transport as StreamableHTTPClientTransport).terminateSession();
    await gateway.waitForLine(new RegExp(`"approvalId":"${b.id}".*approval wait cancelled`), 3_000);
    await leaving.close();
    await expect(call2).rejects.toThrow();
    expect((await store.get(b.id))?.status).toBe('pending');
    expect(logged('restart_pod', 'cancel-mcp') + logged('restart_pod', 'cancel-session')).toBe(0);

    // Nobody waits for them any more: once their time is up, the face's sweep denies them.
    await waitUntil(
      async () => (await store.get(a.id))?.status !== 'pending' && (await store.get(b.id))?.status !== 'pending',
      Date.parse(b.timeoutAt) + 10_000 - Date.now(),
      "the face's sweep decided both approvals",
      200,
    );
    for (const id of [a.id, b.id])
      expect(await store.get(id)).toMatchObject({ status: 'denied', denyReason: 'timeout', decidedBy: 'bosun (approval timeout)' });
    expect(logged('restart_pod', 'cancel-mcp') + logged('restart_pod', 'cancel-session')).toBe(0);
  });

  it('a client whose stream breaks while it waits reconnects with Last-Event-ID and gets the outcome, which took effect once', async () => {
    // Through the proxy, so that the test can break the connection as a network would.
    const client = await connect(proxyPort, TOKEN, {
      reconnectionOptions: { maxRetries: 30, initialReconnectionDelay: 200, maxReconnectionDelay: 1_000, reconnectionDelayGrowFactor: 1.5 },
    });
    const progress: unknown[] = [];
    const call = client.callTool({ name: 'demo__restart_pod', arguments: restartArgs('resume') }, undefined, {
      onprogress: (p) => progress.push(progressApprovalId(p)),
    }) as Promise<CallToolResult>;
    const a = await pendingFor('demo__restart_pod', 'resume');
    await waitUntil(() => progress.length > 0, 5_000, 'the first progress notification');
    expect(progress[0]).toBe(a.id);

    // The network fails, and stays down while the operator approves and the call runs.
    proxy.blocked = true;
    proxy.cut();
    await store.decide(a.id, { approve: true, by: 'tester' });
    await waitUntil(() => logged('restart_pod', 'resume') === 1, 10_000, 'the approved restart ran while the client was away');
    proxy.blocked = false;

    const r = await call;
    expect(r.isError).toBe(false);
    expect(r._meta).toMatchObject({ 'bosun/approvalId': a.id, 'bosun/approvalStatus': 'approved' });
    expect(text(r)).toContain(pod);
    // It came back on a GET carrying the last event id it had seen.
    expect(proxy.sent).toMatch(/GET \/mcp HTTP\/1\.1\r\n(?:[^\r\n]+\r\n)*last-event-id: \S+/i);
    expect(logged('restart_pod', 'resume')).toBe(1);
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
    for (const p of [gateway, readOnlyGateway]) expect(wholeOutput(p).join('\n')).not.toContain(TOKEN);
  });
});
