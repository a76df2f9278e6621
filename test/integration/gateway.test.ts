import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue } from 'bullmq';
import { DEAD_LETTER_QUEUE, type ToolCallJob, type ToolCallResult } from '@bosun/contract';
import { createLogger, parseClusterConfig } from '@bosun/config';
import { DeadLetters, EventPublisher, keys } from '@bosun/transport';
import { ToolGateway } from '@bosun/tool-gateway';
import { EventCollector, ENTRY, demoConfig, freePort, openContext, reap, waitUntil, type TestContext } from '../helpers/index.js';

const require = createRequire(import.meta.url);
const everythingBin = join(require.resolve('@modelcontextprotocol/server-everything/package.json'), '..', 'dist/index.js');
const memoryBin = join(require.resolve('@modelcontextprotocol/server-memory/package.json'), '..', 'dist/index.js');

let ctx: TestContext;
let gateway: ToolGateway;
let events: EventPublisher;
let deadLetters: DeadLetters;
let collector: EventCollector;
let httpServer: ChildProcess;
let callLog: string;
let httpPort = 0;

function call(key: string, tool: string, args: Record<string, unknown>, agent = 'ops'): Promise<ToolCallResult> {
  const data: ToolCallJob = { v: 1, key, runId: 'r-gw', incidentId: 'inc-gw', agent, tool, args };
  return gateway.execute(data);
}

/** The statuses of the audit entries written for one call key, oldest first. */
async function audited(key: string): Promise<string[]> {
  const entries = (await ctx.redis.xrange(keys.audit(ctx.prefix), '-', '+')) as [string, string[]][];
  const statuses: string[] = [];
  for (const [, flat] of entries) {
    const fields = new Map<string, string>();
    for (let i = 0; i + 1 < flat.length; i += 2) fields.set(flat[i]!, flat[i + 1]!);
    if (fields.get('key') === key) statuses.push(fields.get('status') ?? '');
  }
  return statuses;
}

function logged(tool: string): number {
  if (!existsSync(callLog)) return 0;
  return readFileSync(callLog, 'utf8')
    .split('\n')
    .filter((l) => l && (JSON.parse(l) as { tool: string }).tool === tool).length;
}

beforeAll(async () => {
  ctx = await openContext('gateway');
  callLog = join(ctx.dir, 'calls.jsonl');
  httpPort = await freePort();
  httpServer = reap(
    spawn(process.execPath, [everythingBin, 'streamableHttp'], {
      env: { ...process.env, PORT: String(httpPort) },
      stdio: ['ignore', 'ignore', 'pipe'],
    }),
  );
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('server-everything (HTTP) did not start')), 20_000);
    httpServer.stderr?.on('data', (b: Buffer) => {
      if (b.toString().includes('listening')) {
        clearTimeout(t);
        resolve();
      }
    });
  });
  const raw = demoConfig();
  raw.mcpServers = {
    demo: { transport: 'stdio', command: process.execPath, args: [ENTRY.demoMcp], env: { DEMO_MCP_CALL_LOG: callLog } },
    everything: { transport: 'stdio', command: process.execPath, args: [everythingBin, 'stdio'] },
    memory: { transport: 'stdio', command: process.execPath, args: [memoryBin], env: { MEMORY_FILE_PATH: join(ctx.dir, 'memory.jsonl') } },
    hang: {
      transport: 'stdio',
      command: process.execPath,
      args: [ENTRY.demoMcp],
      env: { DEMO_MCP_HANG_TOOLS: 'restart_pod,get_pods', DEMO_MCP_CALL_LOG: join(ctx.dir, 'hang-calls.jsonl') },
    },
    web: {
      transport: 'http',
      url: `http://127.0.0.1:${httpPort}/mcp`,
      headers: { Authorization: 'Bearer ${GW_TEST_TOKEN:-not-a-secret}' },
    },
  };
  raw.specialists = {
    ops: { ...raw.specialists.kubernetes, tools: ['demo__*', 'everything__*', 'memory__*', 'web__*', 'hang__*'] },
    reader: { ...raw.specialists.kubernetes, tools: ['demo__get_pods'] },
  };
  raw.coordinator.routes = {};
  raw.coordinator.defaultRoute = ['ops'];
  raw.gateway = { concurrency: 8, callTimeoutMs: 2_000, maxResultChars: 5_000 };
  const config = parseClusterConfig(raw, { file: join(ctx.dir, 'inline.json') });
  const log = createLogger({ service: 'gateway-test', level: 'silent' });
  events = new EventPublisher({ prefix: ctx.prefix, redis: ctx.redis, nats: ctx.nats, log });
  deadLetters = new DeadLetters({ redis: ctx.redis, prefix: ctx.prefix });
  collector = new EventCollector(ctx.nats, ctx.prefix);
  gateway = new ToolGateway({ redis: ctx.redis, prefix: ctx.prefix, config, events, deadLetters, log });
  await gateway.start();
});

afterAll(async () => {
  await gateway?.close();
  await events?.flush();
  collector?.close();
  await deadLetters?.close();
  httpServer?.kill();
  await ctx?.close();
});

describe('tool gateway against real MCP servers', () => {
  it('publishes a namespaced catalog with annotations from every server, stdio and HTTP', async () => {
    const catalog = gateway.catalog();
    const names = catalog.tools.map((t) => t.name);
    expect(catalog.unavailable).toEqual({});
    expect(names).toContain('demo__get_pods');
    expect(names).toContain('demo__restart_pod');
    expect(names).toContain('everything__echo');
    expect(names).toContain('memory__create_entities');
    expect(names).toContain('web__echo');
    expect(catalog.tools.find((t) => t.name === 'demo__get_pods')?.annotations.readOnlyHint).toBe(true);
    expect(catalog.tools.find((t) => t.name === 'demo__restart_pod')?.annotations.readOnlyHint).toBe(false);
    const stored = JSON.parse((await ctx.redis.get(keys.catalog(ctx.prefix))) ?? '{}') as { tools: unknown[] };
    expect(stored.tools).toHaveLength(catalog.tools.length);
  });

  it('executes calls on servers we did not write (server-everything over stdio and HTTP, server-memory)', async () => {
    const echo = await call('k-echo', 'everything__echo', { message: 'hello bosun' });
    expect(echo.status).toBe('ok');
    expect(echo.text).toContain('hello bosun');
    const httpEcho = await call('k-web-echo', 'web__echo', { message: 'over http' });
    expect(httpEcho.status).toBe('ok');
    expect(httpEcho.text).toContain('over http');
    const created = await call('k-mem', 'memory__create_entities', {
      entities: [{ name: 'checkout', entityType: 'service', observations: ['crashlooping'] }],
    });
    expect(created.status).toBe('ok');
    const graph = await call('k-mem-read', 'memory__read_graph', {});
    expect(graph.text).toContain('crashlooping');
  });

  it('answers a repeated idempotency key from its record without calling the server again', async () => {
    const args = { service: 'checkout', pod: 'checkout-7c9d6f8b4-9mz4q' };
    const first = await call('k-restart-1', 'demo__restart_pod', args);
    const again = await call('k-restart-1', 'demo__restart_pod', args);
    expect(first.status).toBe('ok');
    expect(again).toEqual(first);
    expect(logged('restart_pod')).toBe(1);
    const other = await call('k-restart-2', 'demo__restart_pod', args);
    expect(other.status).toBe('ok');
    expect(logged('restart_pod')).toBe(2);
  });

  it("passes a tool's own error back as a result, and refuses tools outside the agent's policy", async () => {
    const bad = await call('k-bad-svc', 'demo__get_pods', { service: 'nope' });
    expect(bad.status).toBe('ok');
    expect(bad.isError).toBe(true);
    expect(bad.code).toBe('tool_error');
    expect(bad.text).toContain('nope');
    const refused = await call('k-refused', 'demo__restart_pod', { service: 'checkout', pod: 'x' }, 'reader');
    expect(refused.status).toBe('error');
    expect(refused.code).toBe('refused');
    expect(refused.error).toMatch(/not allowed for agent "reader"/);
    const unknown = await call('k-unknown', 'demo__drop_database', {});
    expect(unknown.error).toMatch(/unknown tool "demo__drop_database"/);
    expect(unknown.code).toBe('unknown_tool');
    await collector.waitFor((e) => e.type === 'tool.failed' && e.data.key === 'k-refused', 10_000);
  });

  it('declares a mutating call found in flight (the gateway died mid-call) in doubt and never re-sends it', async () => {
    const key = 'k-in-doubt';
    await ctx.redis.hset(keys.toolCall(ctx.prefix, key), { state: 'inflight', tool: 'demo__rollback_deployment' });
    const before = logged('rollback_deployment');
    const result = await call(key, 'demo__rollback_deployment', { service: 'checkout', toVersion: 'v41' });
    expect(result.status).toBe('error');
    expect(result.error).toMatch(/^IN DOUBT/);
    expect(result.inDoubt).toBe(true);
    expect(result.code).toBe('in_doubt');
    expect(logged('rollback_deployment')).toBe(before);
    const dlq = new Queue(DEAD_LETTER_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
    const entries = (await dlq.getWaiting()).map((j) => j.data as { kind: string; input?: { key?: string } });
    await dlq.close();
    expect(entries.some((e) => e.kind === 'in-doubt' && e.input?.key === key)).toBe(true);
    await collector.waitFor((e) => e.type === 'tool.in_doubt' && e.data.key === key, 10_000);
    // Audited once as in doubt (docs/durability.md), and not again when the call is asked again.
    expect(await audited(key)).toEqual(['in-doubt']);
    const again = await call(key, 'demo__rollback_deployment', { service: 'checkout', toVersion: 'v41' });
    expect(again.error).toMatch(/^IN DOUBT/);
    expect(await audited(key)).toEqual(['in-doubt']);
    expect(logged('rollback_deployment')).toBe(before);
    // A read-only call found in flight is simply run again.
    await ctx.redis.hset(keys.toolCall(ctx.prefix, 'k-ro-inflight'), { state: 'inflight' });
    const ro = await call('k-ro-inflight', 'demo__get_pods', { service: 'search' });
    expect(ro.status).toBe('ok');
  });

  it('ends a call that outlasts the per-call timeout with a clear error', async () => {
    // trigger-long-running-operation runs for `duration` seconds; the gateway's timeout is 2 s.
    const slow = await call('k-slow', 'everything__trigger-long-running-operation', { duration: 5, steps: 5 });
    expect(slow.status).toBe('error');
    expect(slow.code).toBe('timeout');
    expect(slow.error).toMatch(/timed out/i);
    expect(slow.error).not.toMatch(/IN DOUBT/);
  });

  it('declares a mutating call that timed out in doubt, and a read-only one merely failed', async () => {
    const ro = await call('k-hang-ro', 'hang__get_pods', { service: 'checkout' });
    expect(ro.error).toMatch(/timed out/);
    expect(ro.error).not.toMatch(/IN DOUBT/);
    expect(ro.inDoubt).toBeUndefined();
    expect(ro.code).toBe('timeout');
    const rw = await call('k-hang-rw', 'hang__restart_pod', { service: 'checkout', pod: 'checkout-7c9d6f8b4-9mz4q' });
    expect(rw.error).toMatch(/^IN DOUBT/);
    expect(rw.inDoubt).toBe(true);
    expect(rw.code).toBe('in_doubt');
    // Asked again (a retry after a crash), it stays in doubt and is not sent again.
    const again = await call('k-hang-rw', 'hang__restart_pod', { service: 'checkout', pod: 'checkout-7c9d6f8b4-9mz4q' });
    expect(again.error).toMatch(/^IN DOUBT/);
    expect(again.inDoubt).toBe(true);
  });

  it('declares a mutating call in doubt when its server dies before answering', async () => {
    const hang = gateway.servers.find((s) => s.name === 'hang')!;
    await hang.connect();
    const pending = call('k-died-mid-call', 'hang__restart_pod', { service: 'checkout', pod: 'checkout-7c9d6f8b4-2xk8p' });
    // Killed once the server has the call (its call log says so), not after a guessed delay.
    const hangLog = join(ctx.dir, 'hang-calls.jsonl');
    await waitUntil(
      () => existsSync(hangLog) && readFileSync(hangLog, 'utf8').includes('checkout-7c9d6f8b4-2xk8p'),
      10_000,
      'the hang server received the call',
    );
    process.kill(hang.pid!, 'SIGKILL');
    const result = await pending;
    expect(result.error).toMatch(/^IN DOUBT: .*its connection failed before the answer came/);
    expect(result.inDoubt).toBe(true);
    await collector.waitFor((e) => e.type === 'tool.in_doubt' && e.data.key === 'k-died-mid-call', 10_000);
    // In doubt, not an ordinary error: the record, the audit and the dead letter say so.
    expect(await ctx.redis.hget(keys.toolCall(ctx.prefix, 'k-died-mid-call'), 'state')).toBe('in-doubt');
    expect(await audited('k-died-mid-call')).toEqual(['in-doubt']);
    const dlq = new Queue(DEAD_LETTER_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
    const entry = await dlq.getJob('in-doubt-k-died-mid-call');
    await dlq.close();
    expect(entry?.data).toMatchObject({ kind: 'in-doubt', input: { key: 'k-died-mid-call', tool: 'hang__restart_pod' } });
  });

  it('reconnects to a stdio server that died, on the next call', async () => {
    const demo = gateway.servers.find((s) => s.name === 'demo')!;
    const pid = demo.pid;
    expect(pid).toBeTypeOf('number');
    process.kill(pid!, 'SIGKILL');
    await waitUntil(() => demo.pid === undefined, 10_000, 'the gateway saw its MCP server die', 50);
    expect(demo.pid).toBeUndefined();
    const after = await call('k-after-restart', 'demo__list_services', {});
    expect(after.status).toBe('ok');
    expect(demo.pid).toBeTypeOf('number');
    expect(demo.pid).not.toBe(pid);
  });
});
