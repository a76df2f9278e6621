import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Job } from 'bullmq';
import { trace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import type { CatalogTool, ToolCallJob } from '@bosun/contract';
import { createLogger, parseClusterConfig } from '@bosun/config';
import {
  MemoryEventSink,
  NatsToolClient,
  serveToolCalls,
  toolCallSubject,
  type ToolCallResponder,
  type ToolClient,
} from '@bosun/transport';
import { openContext, type TestContext } from '../../../test/helpers/context.js';

import { ToolGateway } from './gateway.js';
import type { McpCallOutcome } from './mcp.js';

// The gateway's `execute_tool` span names the way the call really came: a NATS request (over a
// real NATS, answered by serveToolCalls as the gateway's main does), a job of the `tools` queue,
// or the MCP face (docs/observability.md, "Traces"). Spans go to an in-memory exporter.

let ctx: TestContext;
let gateway: ToolGateway;
let responder: ToolCallResponder;
let client: NatsToolClient;
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

function tool(remoteName: string): CatalogTool {
  return { name: `demo__${remoteName}`, server: 'demo', remoteName, description: '', inputSchema: { type: 'object' }, annotations: {} };
}

function call(key: string): ToolCallJob {
  return { v: 1, key, runId: 'r-spans', incidentId: 'inc-spans', agent: 'ops', tool: 'demo__get_logs', args: { pod: 'nope' } };
}

/** The gateway's span of one call (a consumer span named `execute_tool …` with the call's key). */
function gatewaySpan(key: string): ReadableSpan {
  const found = exporter
    .getFinishedSpans()
    .filter(
      (s) => s.name === 'execute_tool demo__get_logs' && s.attributes['bosun.tool.key'] === key && s.attributes['bosun.tool.decision'],
    );
  expect(found, `the gateway's span of ${key}`).toHaveLength(1);
  return found[0]!;
}

const noQueue: ToolClient = {
  catalog: () => Promise.reject(new Error('no catalog here')),
  call: () => Promise.reject(new Error('this test sends every call over NATS')),
};

beforeAll(async () => {
  trace.setGlobalTracerProvider(provider);
  ctx = await openContext('gateway-spans');
  const config = parseClusterConfig(
    {
      coordinator: { routes: {}, defaultRoute: ['ops'] },
      specialists: {
        ops: {
          description: 'ops',
          tools: ['demo__*'],
          outputSchema: { type: 'object', required: ['summary'], properties: { summary: { type: 'string' } } },
          mode: 'read-only',
        },
      },
      mcpServers: { demo: { transport: 'stdio', command: 'node', args: ['never-started.js'] } },
    },
    { file: 'unit.json', env: {} },
  );
  const log = createLogger({ service: 'gateway-spans', level: 'silent' });
  gateway = new ToolGateway({
    redis: ctx.redis,
    prefix: ctx.prefix,
    config,
    events: new MemoryEventSink(),
    deadLetters: {
      add: (input) => Promise.resolve({ v: 1, kind: input.kind, marker: '', at: '', reason: input.reason }),
      // No in-doubt entries in this test: nothing to resolve.
      resolveInDoubt: () => Promise.resolve(false),
    },
    log,
  });
  const server = gateway.servers[0]!;
  server.tools = [{ ...tool('get_logs'), annotations: { readOnlyHint: true } }];
  // The tool's own error, as the demo server answers get_logs for a pod it does not know.
  server.call = (): Promise<McpCallOutcome> => Promise.resolve({ isError: true, text: 'no pod nope' });
  responder = serveToolCalls({ nc: ctx.nats, prefix: ctx.prefix, concurrency: 2, handle: (data) => gateway.answer(data), log });
  client = new NatsToolClient({ nats: () => ctx.nats, prefix: ctx.prefix, catalog: noQueue, fallback: noQueue, log });
});

beforeEach(() => exporter.reset());

afterAll(async () => {
  await responder?.close();
  await gateway?.close();
  await ctx?.close();
  await provider.shutdown();
  trace.disable();
});

describe("the gateway's execute_tool span", () => {
  it('names NATS and the subject for a call that came as a NATS request', async () => {
    const result = await client.call(call('s-nats'));
    expect(result).toMatchObject({ status: 'ok', isError: true });
    const span = gatewaySpan('s-nats');
    expect(span.attributes).toMatchObject({
      'bosun.tool.transport': 'nats',
      'messaging.system': 'nats',
      'messaging.destination.name': toolCallSubject(ctx.prefix),
      'bosun.tool.outcome': 'tool_error',
    });
  });

  it('names BullMQ and the tools queue for a job of the queue', async () => {
    await gateway.process({ id: 'j-1', data: call('s-queue') } as unknown as Job);
    expect(gatewaySpan('s-queue').attributes).toMatchObject({
      'bosun.tool.transport': 'queue',
      'messaging.system': 'bullmq',
      'messaging.destination.name': 'tools',
    });
  });

  it('names no messaging system for a call through the MCP face', async () => {
    await gateway.execute(call('s-face'), { via: 'mcp' });
    const span = gatewaySpan('s-face');
    expect(span.attributes['bosun.tool.transport']).toBe('mcp');
    expect(span.attributes['messaging.system']).toBeUndefined();
  });
});
