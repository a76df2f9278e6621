/**
 * Spawns the compiled demo MCP server (`mcp-servers/demo/dist/bundle/main.js`, so run `npm run build`
 * first) over stdio with the SDK's client, and checks its tool list, a read, a mutation,
 * tool errors, the call log, and the test behaviours driven by environment variables.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

const SERVER_MAIN = fileURLToPath(new URL('../../mcp-servers/demo/dist/bundle/main.js', import.meta.url));
const CRASH_POD = 'checkout-7c9d6f8b4-9mz4q';

const READ_ONLY_TOOLS = ['get_deployments', 'get_logs', 'get_metrics', 'get_pods', 'list_services'];
const MUTATING_TOOLS = ['restart_pod', 'rollback_deployment'];

interface CallLogLine {
  tool: string;
  args: Record<string, unknown>;
  pid: number;
  at: string;
}

interface Connection {
  client: Client;
  transport: StdioClientTransport;
  /** Everything the server wrote to stderr so far. */
  stderr: () => string;
}

async function connect(extraEnv: Record<string, string>): Promise<Connection> {
  if (!existsSync(SERVER_MAIN)) {
    throw new Error(`${SERVER_MAIN} does not exist; build it first with \`npm run build\``);
  }
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [SERVER_MAIN],
    env: { ...getDefaultEnvironment(), ...extraEnv },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  const client = new Client({ name: 'demo-mcp-integration-test', version: '0.0.0' });
  await client.connect(transport);
  return { client, transport, stderr: () => stderr };
}

function readCallLog(path: string): CallLogLine[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.length > 0)
    .map((line) => JSON.parse(line) as CallLogLine);
}

function textOf(result: CallToolResult): string {
  const first = result.content[0];
  return first?.type === 'text' ? first.text : '';
}

describe('demo MCP server over stdio', () => {
  let dir: string;
  let callLog: string;
  let conn: Connection;
  /** Tool calls this suite made, in order, to compare with the call log. */
  const calls: string[] = [];

  async function call(name: string, args: Record<string, unknown>): Promise<CallToolResult> {
    calls.push(name);
    return (await conn.client.callTool({ name, arguments: args })) as CallToolResult;
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'demo-mcp-'));
    callLog = join(dir, 'calls.jsonl');
    conn = await connect({ DEMO_MCP_CALL_LOG: callLog });
  }, 20_000);

  afterAll(async () => {
    await conn?.client.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('lists the seven tools with their read-only hints', async () => {
    const { tools } = await conn.client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([...READ_ONLY_TOOLS, ...MUTATING_TOOLS].sort());
    for (const tool of tools) {
      expect(tool.description?.length ?? 0).toBeGreaterThan(20);
      if (READ_ONLY_TOOLS.includes(tool.name)) {
        expect(tool.annotations).toMatchObject({ readOnlyHint: true, openWorldHint: false });
      } else {
        expect(tool.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true });
      }
      expect(tool.outputSchema?.type).toBe('object');
    }
    const getLogs = tools.find((t) => t.name === 'get_logs');
    expect(getLogs?.inputSchema.required).toEqual(['service']);
  });

  it('answers a read-only tool with matching text and structured content', async () => {
    const result = await call('get_metrics', { service: 'payments', window: '5m' });
    expect(result.isError).toBeFalsy();
    const metrics = result.structuredContent as Record<string, unknown>;
    expect(metrics).toMatchObject({ service: 'payments', window: '5m' });
    expect(metrics['latencyP99Ms']).toBeGreaterThan(2000);
    expect(JSON.parse(textOf(result))).toEqual(metrics);
  });

  it('restart_pod changes the pod state for later calls', async () => {
    const before = await call('get_pods', { service: 'checkout' });
    const podsBefore = (before.structuredContent as { pods: Array<{ name: string; status: string; restarts: number }> }).pods;
    expect(podsBefore.find((p) => p.name === CRASH_POD)).toMatchObject({ status: 'CrashLoopBackOff', restarts: 7 });

    const restarted = await call('restart_pod', { service: 'checkout', pod: CRASH_POD });
    expect(restarted.isError).toBeFalsy();
    expect(restarted.structuredContent).toMatchObject({ previousStatus: 'CrashLoopBackOff', pod: { status: 'Running', restarts: 0 } });

    const after = await call('get_pods', { service: 'checkout' });
    const podsAfter = (after.structuredContent as { pods: Array<{ name: string; status: string; restarts: number }> }).pods;
    expect(podsAfter.find((p) => p.name === CRASH_POD)).toMatchObject({ status: 'Running', restarts: 0 });
  });

  it('answers an unknown service or pod with a tool error naming it', async () => {
    const badService = await call('get_logs', { service: 'no-such-service' });
    expect(badService.isError).toBe(true);
    expect(textOf(badService)).toContain('no-such-service');
    expect(textOf(badService)).toContain('service');

    const badPod = await call('restart_pod', { service: 'checkout', pod: 'no-such-pod' });
    expect(badPod.isError).toBe(true);
    expect(textOf(badPod)).toContain('no-such-pod');
  });

  it('records exactly one call-log line per tool call', () => {
    const lines = readCallLog(callLog);
    expect(lines.map((l) => l.tool)).toEqual(calls);
    expect(lines.every((l) => l.pid === conn.transport.pid && !Number.isNaN(Date.parse(l.at)))).toBe(true);
    const restarts = lines.filter((l) => l.tool === 'restart_pod' && l.args['pod'] === CRASH_POD);
    expect(restarts).toHaveLength(1);
    expect(restarts[0]?.args).toEqual({ service: 'checkout', pod: CRASH_POD });
  });
});

describe('demo MCP server test behaviours', () => {
  const SLOW_MS = 300;
  let dir: string;
  let callLog: string;
  let conn: Connection;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'demo-mcp-'));
    callLog = join(dir, 'calls.jsonl');
    conn = await connect({
      DEMO_MCP_CALL_LOG: callLog,
      DEMO_MCP_SLOW_MS: String(SLOW_MS),
      DEMO_MCP_HANG_TOOLS: 'restart_pod',
    });
  }, 20_000);

  afterAll(async () => {
    await conn?.client.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('delays every answer by DEMO_MCP_SLOW_MS', async () => {
    const started = performance.now();
    const result = (await conn.client.callTool({ name: 'list_services', arguments: {} })) as CallToolResult;
    expect(performance.now() - started).toBeGreaterThanOrEqual(SLOW_MS - 20);
    expect(result.isError).toBeFalsy();
  });

  it('never answers a DEMO_MCP_HANG_TOOLS tool, and the call changes nothing', async () => {
    const controller = new AbortController();
    const pending = conn.client.callTool({ name: 'restart_pod', arguments: { service: 'checkout', pod: CRASH_POD } }, undefined, {
      signal: controller.signal,
    });
    setTimeout(() => controller.abort(new Error('test gave up')), SLOW_MS * 3);
    await expect(pending).rejects.toThrow();

    const pods = (await conn.client.callTool({ name: 'get_pods', arguments: { service: 'checkout' } })) as CallToolResult;
    const crashing = (pods.structuredContent as { pods: Array<{ name: string; status: string }> }).pods.find((p) => p.name === CRASH_POD);
    expect(crashing?.status).toBe('CrashLoopBackOff');
    // The hung call was still received, and logged.
    expect(readCallLog(callLog).filter((l) => l.tool === 'restart_pod')).toHaveLength(1);
  });

  it('a mutation cancelled during the delay changes nothing', async () => {
    const controller = new AbortController();
    const pending = conn.client.callTool({ name: 'rollback_deployment', arguments: { service: 'checkout', toVersion: 'v41' } }, undefined, {
      signal: controller.signal,
    });
    setTimeout(() => controller.abort(new Error('test gave up')), SLOW_MS / 3);
    await expect(pending).rejects.toThrow();
    // Wait past the delay, so a rollback that ignored the cancellation would have happened by now.
    await new Promise((resolve) => setTimeout(resolve, SLOW_MS));
    const deployments = (await conn.client.callTool({ name: 'get_deployments', arguments: { service: 'checkout' } })) as CallToolResult;
    expect((deployments.structuredContent as { currentVersion: string }).currentVersion).toBe('v42');
  });

  it('exits on its own when its stdin closes', async () => {
    await conn.client.close();
    expect(conn.stderr()).toContain('stopping: stdin closed');
  });
});
