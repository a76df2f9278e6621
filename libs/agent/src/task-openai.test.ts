import { afterEach, describe, expect, it } from 'vitest';
import {
  Incident,
  STALL_MARKER,
  parseWith,
  taskIdFor,
  type Catalog,
  type DeadLetter,
  type TaskJob,
  type ToolCallJob,
} from '@bosun/contract';
import { createLogger } from '@bosun/config';
import { OpenAiModel, ResilientModel } from '@bosun/models';
import { MemoryCheckpointStore, MemoryEventSink, type DeadLetterInput, type ToolClient } from '@bosun/transport';

import { openAiFixture, startOpenAiServer, type OpenAiServer, type Recording } from '../../../test/helpers/openai-server.js';
import { runTask, type TaskAgentDeps, type TaskAgentSpec } from './task.js';

/**
 * The task loop on the OpenAI adapter, against a local server replaying recorded responses: what
 * a malformed tool call, a refusal and a cut-off answer do to a task (a correction turn or an
 * INCOMPLETE part with a dead letter, never a crash).
 */

const RUN_ID = 'r0123456789abcdef0456';
const TASK_ID = taskIdFor(RUN_ID, 0, 'checkout');
const REPORT = { type: 'object', required: ['summary'], properties: { summary: { type: 'string' }, severity: { type: 'string' } } };

let server: OpenAiServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

class Tools implements ToolClient {
  readonly calls: ToolCallJob[] = [];
  async catalog(): Promise<Catalog> {
    const tool = (remoteName: string) => ({
      name: `ops__${remoteName}`,
      server: 'ops',
      remoteName,
      description: remoteName,
      inputSchema: { type: 'object' },
      annotations: { readOnlyHint: true },
    });
    return { v: 1, updatedAt: '2026-01-01T00:00:00.000Z', tools: [tool('get_service_status'), tool('search_logs')], unavailable: {} };
  }
  async call(call: ToolCallJob) {
    this.calls.push(call);
    return { v: 1 as const, key: call.key, tool: call.tool, status: 'ok' as const, isError: false, text: 'ok', durationMs: 1 };
  }
}

/** Renames the recorded calls to the catalog's tool names (`ops__…`); finish_task stays. */
function recorded(name: string): Recording {
  const text = JSON.stringify(openAiFixture(name)).replace(/"name":"(get_service_status|search_logs)"/g, '"name":"ops__$1"');
  return JSON.parse(text) as Recording;
}

function job(): TaskJob {
  const incident = parseWith(Incident, { id: 'inc-9', source: 'test', reason: 'HighErrorRate', summary: 'checkout errors' }, 'incident');
  return { v: 1, runId: RUN_ID, incidentId: incident.id, taskId: TASK_ID, agent: 'checkout', task: 'Investigate.', incident };
}

const spec: TaskAgentSpec = { name: 'checkout', tools: ['ops__*'], outputSchema: REPORT, maxToolRounds: 5, maxInvalidOutputs: 1 };

async function run(sequence: string[], resilient = false) {
  server = await startOpenAiServer((_req, i) => recorded(sequence[Math.min(i, sequence.length - 1)]!));
  const tools = new Tools();
  const events = new MemoryEventSink();
  const deadLetters: DeadLetterInput[] = [];
  const adapter = new OpenAiModel({ apiKey: 'sk-test', model: 'gpt-4.1-mini', baseUrl: server.baseUrl });
  const deps: TaskAgentDeps = {
    model: resilient ? new ResilientModel({ primary: adapter, retry: { attempts: 3, baseDelayMs: 10 } }) : adapter,
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
  };
  const result = await runTask(job(), spec, deps, 1);
  return { result, tools, events, deadLetters, requests: server.requests };
}

describe('task loop on the OpenAI adapter', () => {
  it('runs parallel tool calls, then completes with finish_task; usage is in model.called', async () => {
    const h = await run(['parallel-tool-calls', 'finish-task']);
    expect(h.result.status).toBe('completed');
    expect(h.result.output).toEqual({ summary: 'checkout error rate back to normal', severity: 'low' });
    expect(h.tools.calls.map((c) => c.tool)).toEqual(['ops__get_service_status', 'ops__search_logs']);
    const called = h.events.events.filter((e) => e.type === 'model.called');
    expect(called[0]?.data.usage).toEqual({ inputTokens: 233, outputTokens: 61, totalTokens: 294 });
    const second = h.requests[1]!.body.messages;
    expect(second.filter((m) => m.role === 'tool').map((m) => m.tool_call_id)).toEqual(['call_8Hk2Lp0sVb1Nq4Rt', 'call_Z9yW4cE7uJ2mK6Pd']);
  });

  it('answers malformed tool-call JSON with a correction turn, runs nothing, and goes on', async () => {
    const h = await run(['malformed-args', 'tool-call', 'finish-task']);
    expect(h.result.status).toBe('completed');
    expect(h.tools.calls.map((c) => c.args)).toEqual([{ service: 'checkout', window_minutes: 15 }]);
    const correction = h.requests[1]!.body.messages.find((m) => m.role === 'tool');
    expect(correction?.tool_call_id).toBe('call_Bd4Jx8Rr2Ty6Gh0K');
    expect(correction?.content).toMatch(/Not executed: the arguments are not valid JSON/);
  });

  it('fails the task once malformed arguments come back more often than maxInvalidOutputs', async () => {
    const h = await run(['malformed-args']);
    expect(h.result.status).toBe('failed');
    expect(h.result.error).toMatch(/malformed tool-call arguments 2 times: ops__get_service_status: the arguments are not valid JSON/);
    expect(h.tools.calls).toEqual([]);
    expect(h.deadLetters.map((d) => d.kind)).toEqual(['failure']);
  });

  it('ends a task whose model call keeps failing (HTTP 500 on every try) as INCOMPLETE failure with the provider’s error', async () => {
    const h = await run(['error-500'], true);
    expect(h.requests).toHaveLength(3);
    expect(h.result.status).toBe('failed');
    expect(h.result.error).toBe(
      'model call failed: openai:gpt-4.1-mini failed 3 times, the last: OpenAI API error: HTTP 500 server_error: The server had an error while processing your request. Sorry about that!',
    );
    expect(h.deadLetters.map((d) => d.kind)).toEqual(['failure']);
  });

  it('retries a 429 and goes on', async () => {
    const h = await run(['error-429', 'finish-task'], true);
    expect(h.result.status).toBe('completed');
    expect(h.requests).toHaveLength(2);
  });

  it.each([
    ['refusal', /model call failed: the model refused: I'm sorry/],
    ['finish-length', /finish_reason length/],
    ['content-filter', /finish_reason content_filter/],
  ])('ends a task whose model answers %s as INCOMPLETE with a dead letter', async (fixture, reason) => {
    const h = await run([fixture]);
    expect(h.result.status).toBe('failed');
    expect(h.result.error).toMatch(reason);
    expect(JSON.stringify(h.result.output)).toContain(STALL_MARKER);
    expect(h.deadLetters).toHaveLength(1);
    expect(h.deadLetters[0]).toMatchObject({ kind: 'failure', taskId: TASK_ID });
    expect(h.events.events.map((e) => e.type)).toContain('agent.failed');
  });
});
