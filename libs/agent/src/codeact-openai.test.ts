import { afterEach, describe, expect, it } from 'vitest';
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
import { createLogger, type BudgetLimits } from '@bosun/config';
import { OpenAiModel } from '@bosun/models';
import { MemoryCheckpointStore, MemoryEventSink, type DeadLetterInput, type ToolClient } from '@bosun/transport';

import { openAiFixture, startOpenAiServer, type OpenAiServer } from '../../../test/helpers/openai-server.js';
import { runCodeActTask } from './codeact.js';
import { DEFAULT_CODEACT_INSTRUCTION } from './codeact-prompt.js';
import type { TaskAgentDeps, TaskAgentSpec } from './task.js';

// The CodeAct loop on `model.provider: openai`, against a local server replaying responses in the
// recorded Chat Completions format (test/fixtures/openai/codeact-*.json): the system message
// explains the sandbox and lists the tools, no function is offered, the script is taken from the
// fenced block of the answer, a script error goes back as a user turn, and the usage of each
// call (tokens and estimated cost) is counted against the budget.

const RUN_ID = 'r0123456789abcdef0aa1';
const TASK_ID = taskIdFor(RUN_ID, 0, 'ops');

let server: OpenAiServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

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
      text: JSON.stringify({ total: this.total }),
      durationMs: 0,
    };
  }
}

function job(): TaskJob {
  const incident = parseWith(Incident, { id: 'inc-o', source: 'test', reason: 'Drift', summary: 'counter drift' }, 'incident');
  return { v: 1, runId: RUN_ID, incidentId: incident.id, taskId: TASK_ID, agent: 'ops', task: 'Fix the counter.', incident };
}

async function run(sequence: string[], budget?: BudgetLimits) {
  server = await startOpenAiServer((_req, i) => openAiFixture(sequence[Math.min(i, sequence.length - 1)]!));
  const tools = new Counter();
  const events = new MemoryEventSink();
  const deadLetters: DeadLetterInput[] = [];
  const deps: TaskAgentDeps = {
    model: new OpenAiModel({ apiKey: 'sk-test', model: 'gpt-4.1-mini', baseUrl: server.baseUrl }),
    tools,
    checkpoints: new MemoryCheckpointStore(),
    events,
    deadLetters: {
      add: async (input: DeadLetterInput): Promise<DeadLetter> => {
        deadLetters.push(input);
        return { v: 1, marker: STALL_MARKER, at: new Date(0).toISOString(), ...input };
      },
    },
    log: createLogger({ service: 't', level: 'silent' }),
    price: { inputPerMTok: 0.4, outputPerMTok: 1.6 },
  };
  const spec: TaskAgentSpec = {
    name: 'ops',
    tools: ['calc__*'],
    outputSchema: { type: 'object', required: ['total'], properties: { total: { type: 'number' }, note: { type: 'string' } } },
    stallPayload: { note: '${stallText}' },
    maxToolRounds: 3,
    maxInvalidOutputs: 1,
    loop: 'codeact',
    budget,
  };
  const result = await runCodeActTask(job(), spec, deps, 1);
  const of = (type: string) => events.events.filter((e) => e.type === type);
  return { result, tools, of, deadLetters, requests: server.requests };
}

describe('CodeAct on the OpenAI adapter (recorded responses)', () => {
  it('sends the CodeAct system message without tools, feeds a script error back, and runs the next fenced script', async () => {
    const h = await run(['codeact-script-error', 'codeact-script']);
    expect(h.result).toMatchObject({ status: 'completed', output: { total: 22 } });
    expect(h.tools.sent).toEqual([`${TASK_ID}-s2-c0`, `${TASK_ID}-s2-c1`, `${TASK_ID}-s2-c2`]);
    expect(h.requests).toHaveLength(2);
    const [first, second] = h.requests.map((r) => r.body);
    const system = first!.messages[0]!;
    expect(system.role).toBe('system');
    expect(system.content).toContain(DEFAULT_CODEACT_INSTRUCTION);
    expect(system.content).toContain('- call_tool("calc__add", { n: number }) — add of the counter');
    expect(first!.tools).toBeUndefined();
    expect(first!.response_format).toBeUndefined();
    // The second request carries the first script as the assistant's turn, and its error as a user turn.
    const roles = second!.messages.map((m) => m.role);
    expect(roles).toEqual(['system', 'user', 'assistant', 'user']);
    expect(second!.messages[2]!.content).toContain('call_tool("calc__total", { n: 0 })');
    expect(second!.messages[3]!.content).toMatch(/^Your script failed: .*unknown tool "calc__total"/);
    expect(h.of('model.called').map((e) => e.data.usage)).toEqual([
      { inputTokens: 540, outputTokens: 38, totalTokens: 578 },
      { inputTokens: 702, outputTokens: 91, totalTokens: 793 },
    ]);
    expect(h.of('model.called')[0]?.data.model).toBe('gpt-4.1-mini-2025-04-14');
    expect(h.of('codeact.output')[0]?.data.console).toBe('after the second add: 22\n');
    // Usage and estimated cost, each call's rounded to 6 decimals: $0.000277 + $0.000426.
    expect(h.result.usage).toEqual({ inputTokens: 1242, outputTokens: 129, modelCalls: 2, toolCalls: 3, costUsd: 0.000703 });
  });

  it('stops before the second model call at a model-call budget of 1: INCOMPLETE budget with a dead letter', async () => {
    const h = await run(['codeact-script-error', 'codeact-script'], { modelCalls: 1 });
    expect(h.requests).toHaveLength(1);
    expect(h.result.status).toBe('stalled');
    expect(h.result.error).toBe('stopped at its budget: another model call would cross the limit of 1 model calls (1 made)');
    expect(h.result.lastWords).toContain('calc__total');
    expect(h.deadLetters.map((d) => d.kind)).toEqual(['budget']);
  });

  it('ends a task whose model refuses as INCOMPLETE failure with a dead letter, not a crash', async () => {
    const h = await run(['refusal']);
    expect(h.result.status).toBe('failed');
    expect(h.result.error).toMatch(/model call failed: the model refused/);
    expect(h.deadLetters.map((d) => d.kind)).toEqual(['failure']);
    expect(h.tools.sent).toEqual([]);
  });
});
