import { describe, expect, it } from 'vitest';
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
import { FakeModel, ModelError, extractFoldedCalls, type Message, type Model, type ModelRequest, type ModelResponse } from '@bosun/models';
import { MemoryCheckpointStore, MemoryEventSink, type DeadLetterInput, type ToolClient } from '@bosun/transport';

import { runCodeActTask } from './codeact.js';
import { budgetOf, fitContext, requestTokens } from './context-budget.js';
import { runTask, type TaskAgentDeps, type TaskAgentSpec } from './task.js';

// The context budget in the task loop and in CodeAct, with in-memory ports and the fake model
// given a context window: it answers an over-limit request with the provider's recorded error.

const RUN_ID = 'r0123456789abcdef0c7b';
const TASK_ID = taskIdFor(RUN_ID, 0, 'logs');
const REPORT = {
  type: 'object',
  required: ['summary', 'findings'],
  properties: {
    summary: { type: 'string' },
    findings: {
      type: 'array',
      items: { type: 'object', required: ['title', 'detail'], properties: { title: { type: 'string' }, detail: { type: 'string' } } },
    },
  },
};
const PAGES = 10;
const PAGE_CHARS = 200_000; // ten pages: a 2 MB log

/** One page of a service log: ordinary lines, and the line that matters at the end of the page. */
function logPage(page: number, chars = PAGE_CHARS): string {
  const line = (i: number) => `2026-03-07T05:${String(i % 60).padStart(2, '0')}:00Z INFO checkout request handled in 12ms page=${page}\n`;
  let text = '';
  for (let i = 0; text.length < chars - 120; i++) text += line(i);
  return `${text}2026-03-07T05:59:59Z ERROR checkout pool exhausted (50/50 connections) page=${page}\n`;
}

class LogTools implements ToolClient {
  readonly calls: ToolCallJob[] = [];
  constructor(private readonly pageChars = PAGE_CHARS) {}
  async catalog(): Promise<Catalog> {
    const tool = {
      name: 'demo__read_log',
      server: 'demo',
      remoteName: 'read_log',
      description: 'A page of the service log',
      inputSchema: { type: 'object', properties: { page: { type: 'number' } } },
      annotations: { readOnlyHint: true },
    };
    return { v: 1, updatedAt: '2026-01-01T00:00:00.000Z', tools: [tool], unavailable: {} };
  }
  async call(call: ToolCallJob) {
    this.calls.push(call);
    const text = logPage(Number(call.args.page), this.pageChars);
    return { v: 1 as const, key: call.key, tool: call.tool, status: 'ok' as const, isError: false, text, durationMs: 1 };
  }
}

function job(payload?: Record<string, unknown>): TaskJob {
  const incident = parseWith(
    Incident,
    { id: 'inc-log', source: 'test', reason: 'ErrorRateHigh', summary: 'checkout errors', ...(payload ? { payload } : {}) },
    'incident',
  );
  return { v: 1, runId: RUN_ID, incidentId: incident.id, taskId: TASK_ID, agent: 'logs', task: 'Read the log.', incident };
}

const plan = (pages = PAGES) => Array.from({ length: pages }, (_, i) => ({ tool: 'demo__read_log', args: { page: i + 1 } }));

function setup(model: Model, tools: ToolClient, loop: 'task' | 'codeact' = 'task') {
  const events = new MemoryEventSink();
  const deadLetters: DeadLetterInput[] = [];
  const checkpoints = new MemoryCheckpointStore();
  const deps: TaskAgentDeps = {
    model,
    tools,
    checkpoints,
    events,
    deadLetters: {
      add: async (input: DeadLetterInput): Promise<DeadLetter> => {
        deadLetters.push(input);
        return { v: 1, marker: STALL_MARKER, at: new Date(0).toISOString(), ...input };
      },
    },
    log: createLogger({ service: 't', level: 'silent' }),
  };
  const spec: TaskAgentSpec = {
    name: 'logs',
    tools: ['demo__*'],
    outputSchema: loop === 'codeact' ? { type: 'object', required: ['summary'], properties: { summary: { type: 'string' } } } : REPORT,
    maxToolRounds: 12,
    maxInvalidOutputs: 1,
    loop,
  };
  const trimmed = () => events.events.filter((e) => e.type === 'model.context_trimmed');
  return { deps, spec, events, deadLetters, checkpoints, trimmed };
}

/** A model that records what it was sent: the largest request must fit the window. */
class Recording implements Model {
  readonly requests: ModelRequest[] = [];
  constructor(private readonly inner: Model) {}
  get name() {
    return this.inner.name;
  }
  get contextTokens() {
    return this.inner.contextTokens;
  }
  generate(request: ModelRequest): Promise<ModelResponse> {
    this.requests.push({ ...request, messages: structuredClone(request.messages) });
    return this.inner.generate(request);
  }
}

describe('the context budget', () => {
  it('a specialist reading a 2 MB log across 10 rounds completes with its findings; the events name what was cut', async () => {
    const model = new Recording(new FakeModel({ plans: { logs: plan() }, contextTokens: 128_000 }));
    const tools = new LogTools();
    const { deps, spec, trimmed, checkpoints } = setup(model, tools);
    const result = await runTask(job(), spec, deps, 1);
    expect(result.status).toBe('completed');
    expect(tools.calls).toHaveLength(PAGES);
    const output = result.output as { findings: { title: string; detail: string }[] };
    expect(output.findings).toHaveLength(PAGES);
    // Every request fitted the window (the fake would have refused one that did not).
    expect(Math.max(...model.requests.map((r) => requestTokens(r, r.messages)))).toBeLessThanOrEqual(budgetOf(128_000));
    const steps = trimmed();
    expect(steps.length).toBeGreaterThan(0);
    expect(steps.every((e) => e.data.action === 'shorten' && e.data.cause === 'estimate')).toBe(true);
    const results = steps.flatMap((e) => e.data.results as { key: string; tool: string; cutChars: number }[]);
    expect(results[0]).toMatchObject({ key: `${TASK_ID}-s1-c0`, tool: 'demo__read_log' });
    expect(results.every((r) => r.cutChars > 190_000)).toBe(true);
    expect(result.usage?.contextTrims).toBe(steps.length);
    // The shortened result keeps its head and its tail (where the error line is), and names its call record.
    const stored = (await checkpoints.load(`task:${TASK_ID}`)) as { messages: Message[] };
    const first = stored.messages.find((m) => m.role === 'tool');
    const kept = first?.role === 'tool' ? String(first.responses[0]?.output) : '';
    expect(kept).toContain(`the whole result is in the call record ${TASK_ID}-s1-c0`);
    expect(kept).toContain('ERROR checkout pool exhausted (50/50 connections) page=1');
    expect(kept.length).toBeLessThan(4_000);
  });

  it('folds earlier rounds into a summary turn when shortening is not enough: no call is made twice', async () => {
    const model = new Recording(new FakeModel({ plans: { logs: plan() }, contextTokens: 8_000 }));
    const tools = new LogTools(20_000);
    const { deps, spec, trimmed } = setup(model, tools);
    const result = await runTask(job(), spec, deps, 1);
    expect(result.status).toBe('completed');
    expect(tools.calls.map((c) => c.args.page)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect((result.output as { findings: unknown[] }).findings).toHaveLength(PAGES);
    const folds = trimmed().filter((e) => e.data.action === 'fold');
    expect(folds.length).toBeGreaterThan(0);
    const last = model.requests.at(-1)!;
    // The task and the incident stay first; the summary names the folded calls and their keys.
    expect(last.messages[0]).toEqual({ role: 'user', text: expect.stringContaining('Read the log.') });
    const summary = last.messages.find((m) => m.role === 'user' && extractFoldedCalls(m.text).length > 0);
    const folded = summary?.role === 'user' ? extractFoldedCalls(summary.text) : [];
    expect(folded[0]).toMatchObject({ tool: 'demo__read_log', args: { page: 1 }, key: `${TASK_ID}-s1-c0` });
    expect(Math.max(...model.requests.map((r) => requestTokens(r, r.messages)))).toBeLessThanOrEqual(budgetOf(8_000));
  });

  it.each(['openai', 'gemini', 'anthropic'] as const)(
    "the fake answers an over-limit request with %s's recorded context-length error",
    async (provider) => {
      const fake = new FakeModel({ contextTokens: 1_000, contextError: provider });
      const request: ModelRequest = { agent: 'logs', mode: 'task', messages: [{ role: 'user', text: 'x'.repeat(8_000) }], tools: [] };
      const error = await fake.generate(request).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ModelError);
      expect(error).toMatchObject({ retryable: false, status: 400, reason: 'context_length' });
      const words = {
        openai: 'maximum context length is 1000 tokens',
        gemini: 'exceeds the maximum number of tokens allowed (1000)',
        anthropic: 'prompt is too long',
      };
      expect((error as Error).message).toContain(words[provider]);
    },
  );

  it("a provider's context-length error is answered by trimming once and asking again", async () => {
    // The provider's window is smaller than the one the loop was told: its first refusal is trimmed for.
    const inner = new FakeModel({ plans: { logs: plan(3) }, contextTokens: 40_000, contextError: 'anthropic' });
    const model: Model = { name: 'fake', contextTokens: 200_000, generate: (request) => inner.generate(request) };
    const tools = new LogTools(100_000);
    const { deps, spec, trimmed } = setup(model, tools);
    const result = await runTask(job(), spec, deps, 1);
    expect(result.status).toBe('completed');
    expect(trimmed().some((e) => e.data.cause === 'provider')).toBe(true);
  });

  it('a second context-length error at the same step ends the task INCOMPLETE with that reason', async () => {
    let calls = 0;
    const model: Model = {
      name: 'tiny',
      contextTokens: 1_000_000,
      async generate(request: ModelRequest): Promise<ModelResponse> {
        calls++;
        if (!request.messages.some((m) => m.role === 'tool')) return { calls: [{ id: 'c1', name: 'demo__read_log', args: { page: 1 } }] };
        throw new ModelError('Anthropic API error: HTTP 400 invalid_request_error: prompt is too long: 208310 tokens > 200000 maximum', {
          retryable: false,
          status: 400,
          reason: 'context_length',
        });
      },
    };
    const { deps, spec, deadLetters, trimmed } = setup(model, new LogTools());
    const result = await runTask(job(), spec, deps, 1);
    expect(result.status).toBe('failed');
    expect(result.error).toMatch(/^the request does not fit the model's context window, even trimmed: .*prompt is too long/);
    expect(calls).toBe(3);
    expect(deadLetters).toEqual([expect.objectContaining({ kind: 'failure', reason: result.error })]);
    expect(trimmed().map((e) => e.data.cause)).toEqual(['provider']);
  });

  it('CodeAct: the outcomes of earlier scripts are shortened, named by their step and call keys', async () => {
    const read = (page: number) => `const r = call_tool("demo__read_log", { page: ${page} }); return { observation: r };`;
    const scripts = [read(1), read(2), read(3), read(4), 'return { final_result: { summary: "pool exhausted on every page" } };'];
    const model = new Recording(new FakeModel({ contextTokens: 30_000 }));
    const { deps, spec, trimmed } = setup(model, new LogTools(60_000), 'codeact');
    const result = await runCodeActTask(job({ fake: { scripts: { logs: scripts } } }), spec, deps, 1);
    expect(result).toMatchObject({ status: 'completed', output: { summary: 'pool exhausted on every page' } });
    const results = trimmed().flatMap((e) => e.data.results as { key: string; tool: string }[]);
    expect(results[0]).toEqual(expect.objectContaining({ key: `${TASK_ID}-s1-c*`, tool: 'script step 1' }));
    expect(Math.max(...model.requests.map((r) => requestTokens(r, r.messages)))).toBeLessThanOrEqual(budgetOf(30_000));
  });
});

describe('fitContext', () => {
  const request = { system: 'S', tools: [] };
  const big = 'y'.repeat(50_000);
  const history = (rounds: number): Message[] => [
    { role: 'user', text: 'task and incident' },
    ...Array.from({ length: rounds }, (_, i): Message[] => [
      { role: 'model', calls: [{ id: `c${i}`, name: 't', args: { i } }] },
      { role: 'tool', responses: [{ id: `c${i}`, name: 't', output: big, key: `k${i}` }] },
    ]).flat(),
  ];

  it('takes no step when the request fits', () => {
    expect(
      fitContext({ request, messages: history(2), budgetTokens: 1_000_000, cause: 'estimate', loop: 'task', taskId: 't' }).steps,
    ).toEqual([]);
  });

  it('never drops the first message or the last round', () => {
    const { messages, steps } = fitContext({
      request,
      messages: history(6),
      budgetTokens: 16_000,
      cause: 'estimate',
      loop: 'task',
      taskId: 't',
    });
    expect(steps.map((s) => s.action)).toEqual(['shorten', 'fold']);
    expect(messages[0]).toEqual({ role: 'user', text: 'task and incident' });
    expect(messages.slice(-2)).toEqual(history(6).slice(-2));
    expect(requestTokens(request, messages)).toBeLessThanOrEqual(16_000);
  });
});
