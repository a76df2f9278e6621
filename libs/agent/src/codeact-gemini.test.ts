import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Incident,
  STALL_MARKER,
  parseWith,
  taskIdFor,
  type Catalog,
  type CatalogTool,
  type DeadLetter,
  type TaskJob,
  type ToolCallJob,
  type ToolCallResult,
} from '@bosun/contract';
import { createLogger } from '@bosun/config';
import { GeminiModel } from '@bosun/models';
import { MemoryCheckpointStore, MemoryEventSink, type ToolClient } from '@bosun/transport';

import { runCodeActTask } from './codeact.js';
import { DEFAULT_CODEACT_INSTRUCTION } from './codeact-prompt.js';

// The CodeAct loop on the Gemini adapter, against a local stand-in for the Gemini REST API that
// answers with a response in the recorded format (test/fixtures/gemini/codeact-script.json): the
// system instruction explains the sandbox and lists the tools, no function is declared, and the
// script is taken from the fenced block of the answer (its thought part is not).

const FIXTURE = new URL('../../../test/fixtures/gemini/codeact-script.json', import.meta.url);
const RUN_ID = 'r0123456789abcdef0999';
const TASK_ID = taskIdFor(RUN_ID, 0, 'ops');

let server: Server;
let baseUrl: string;
const bodies: { systemInstruction?: { parts: { text?: string }[] }; tools?: unknown; contents: unknown[] }[] = [];

function tool(name: string): CatalogTool {
  const [server_, remoteName] = name.split('__') as [string, string];
  return {
    name,
    server: server_,
    remoteName,
    description: `${remoteName} of the counter`,
    inputSchema: { type: 'object', required: ['n'], properties: { n: { type: 'number' } } },
    annotations: { readOnlyHint: false },
  };
}

class Counter implements ToolClient {
  total = 0;
  readonly sent: string[] = [];
  async catalog(): Promise<Catalog> {
    return { v: 1, updatedAt: new Date(0).toISOString(), tools: [tool('calc__add'), tool('calc__read')], unavailable: {} };
  }
  async call(call: ToolCallJob): Promise<ToolCallResult> {
    this.sent.push(call.key);
    if (call.tool === 'calc__add') this.total += call.args.n as number;
    return {
      v: 1,
      key: call.key,
      tool: call.tool,
      status: 'ok',
      isError: false,
      text: '',
      structured: { total: this.total },
      durationMs: 0,
    };
  }
}

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      bodies.push(JSON.parse(Buffer.concat(chunks).toString('utf8')) as (typeof bodies)[number]);
      res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' });
      res.end(readFileSync(FIXTURE, 'utf8'));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe('CodeAct on Gemini (recorded response)', () => {
  it('sends the CodeAct system instruction without function declarations and runs the fenced script', async () => {
    const incident = parseWith(Incident, { id: 'inc-g', source: 'test', reason: 'Drift', summary: 'counter drift' }, 'incident');
    const job: TaskJob = {
      v: 1,
      runId: RUN_ID,
      incidentId: incident.id,
      taskId: TASK_ID,
      agent: 'ops',
      task: 'Fix the counter.',
      incident,
    };
    const tools = new Counter();
    const events = new MemoryEventSink();
    const result = await runCodeActTask(
      job,
      {
        name: 'ops',
        tools: ['calc__*'],
        outputSchema: { type: 'object', required: ['total'], properties: { total: { type: 'number' } } },
        stallPayload: { total: null },
        maxToolRounds: 3,
        maxInvalidOutputs: 1,
        loop: 'codeact',
      },
      {
        model: new GeminiModel({ apiKey: 'AIzaSyTEST-not-a-real-key-0123456789abcd', baseUrl }),
        tools,
        checkpoints: new MemoryCheckpointStore(),
        events,
        deadLetters: {
          add: async (input): Promise<DeadLetter> => ({ v: 1, marker: STALL_MARKER, at: new Date(0).toISOString(), ...input }),
        },
        log: createLogger({ service: 't', level: 'silent' }),
      },
      1,
    );
    expect(result).toMatchObject({ status: 'completed', output: { total: 22 } });
    expect(tools.sent).toEqual([`${TASK_ID}-s1-c0`, `${TASK_ID}-s1-c1`, `${TASK_ID}-s1-c2`]);
    expect(bodies).toHaveLength(1);
    const system = bodies[0]!.systemInstruction?.parts.map((p) => p.text).join('') ?? '';
    expect(system).toContain(DEFAULT_CODEACT_INSTRUCTION);
    expect(system).toContain('- call_tool("calc__add", { n: number }) — add of the counter');
    expect(bodies[0]!.tools).toBeUndefined();
    const called = events.events.find((e) => e.type === 'model.called');
    expect(called?.data).toMatchObject({ model: 'gemini-2.5-flash', usage: { inputTokens: 612 } });
    expect(events.events.find((e) => e.type === 'codeact.output')?.data.console).toBe('after the second add: 22\n');
  });
});
