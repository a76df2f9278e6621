import { afterAll, describe, expect, it } from 'vitest';
import {
  Incident,
  STALL_MARKER,
  TaskCheckpoint,
  parseWith,
  taskIdFor,
  type Catalog,
  type DeadLetter,
  type TaskJob,
  type ToolCallJob,
  type ToolCallResult,
} from '@bosun/contract';
import { createLogger } from '@bosun/config';
import type { Model, ModelRequest, ModelResponse } from '@bosun/models';
import { SandboxPool } from '@bosun/sandbox';
import { MemoryCheckpointStore, MemoryEventSink, type DeadLetterInput, type ToolClient } from '@bosun/transport';
import { runCodeActTask } from './codeact.js';
import { YieldError, type TaskAgentDeps, type TaskAgentSpec } from './task.js';

// A CodeAct script stopped from outside (issue 19): the task cancelled, the process draining or
// the caller's signal stop the script where it is (computing, or waiting for a tool) instead of
// letting it run to its time limit; and a result too large to read is the output limit.

const RUN_ID = 'r0123456789abcdef0789';
const TASK_ID = taskIdFor(RUN_ID, 0, 'ops');
const OUTPUT = { type: 'object', required: ['total'], properties: { total: { type: 'number' }, note: { type: 'string' } } };

const sandbox = new SandboxPool({ threads: 1 });
afterAll(() => sandbox.close());

/** A gateway whose `add` applies once per key (a repeated key is answered from its record), after `delayMs`. */
class Gateway implements ToolClient {
  readonly applied = new Map<string, number>();
  readonly sent: string[] = [];
  private readonly records = new Map<string, ToolCallResult>();
  total = 0;
  delayMs = 0;
  onCall: () => void = () => undefined;
  catalog(): Promise<Catalog> {
    const tool = {
      name: 'calc__add',
      server: 'calc',
      remoteName: 'add',
      description: 'adds',
      inputSchema: { type: 'object', properties: { n: { type: 'number' } } },
      annotations: { readOnlyHint: false },
    };
    return Promise.resolve({ v: 1, updatedAt: new Date(0).toISOString(), tools: [tool], unavailable: {} });
  }
  async call(call: ToolCallJob): Promise<ToolCallResult> {
    this.sent.push(call.key);
    this.onCall();
    const recorded = this.records.get(call.key);
    if (recorded) return recorded;
    await new Promise((r) => setTimeout(r, this.delayMs));
    this.applied.set(call.key, (this.applied.get(call.key) ?? 0) + 1);
    this.total += call.args.n as number;
    const result: ToolCallResult = {
      v: 1,
      key: call.key,
      tool: call.tool,
      status: 'ok',
      isError: false,
      text: JSON.stringify({ total: this.total }),
      durationMs: 0,
    };
    this.records.set(call.key, result);
    return result;
  }
}

function scripts(...list: string[]): Model {
  return {
    name: 'scripted',
    generate(request: ModelRequest): Promise<ModelResponse> {
      const script = list[request.messages.filter((m) => m.role === 'model').length];
      return Promise.resolve({ text: script === undefined ? 'Done.' : `\`\`\`js\n${script}\n\`\`\``, calls: [] });
    },
  };
}

function job(): TaskJob {
  const incident = parseWith(Incident, { id: 'inc-19', source: 'test', reason: 'Drift', summary: 'counter drift' }, 'incident');
  return { v: 1, runId: RUN_ID, incidentId: incident.id, taskId: TASK_ID, agent: 'ops', task: 'Fix the counter.', incident };
}

const spec = (timeMs = 30_000): TaskAgentSpec => ({
  name: 'ops',
  tools: ['calc__*'],
  outputSchema: OUTPUT,
  maxToolRounds: 3,
  maxInvalidOutputs: 1,
  loop: 'codeact',
  stallPayload: { note: '${stallText}' },
  codeact: { timeMs, memoryMb: 64, stackKb: 128, maxToolCalls: 20, maxOutputChars: 262_144, maxConsoleChars: 65_536 },
});

function harness(model: Model, over: Partial<TaskAgentDeps> = {}, shared: { gateway?: Gateway; checkpoints?: MemoryCheckpointStore } = {}) {
  const gateway = shared.gateway ?? new Gateway();
  const checkpoints = shared.checkpoints ?? new MemoryCheckpointStore();
  const events = new MemoryEventSink();
  const deadLetters: DeadLetterInput[] = [];
  const deps: TaskAgentDeps = {
    model,
    tools: gateway,
    checkpoints,
    events,
    deadLetters: {
      add: (input: DeadLetterInput): Promise<DeadLetter> => {
        deadLetters.push(input);
        return Promise.resolve({ v: 1, marker: STALL_MARKER, at: new Date(0).toISOString(), ...input });
      },
    },
    log: createLogger({ service: 't', level: 'silent' }),
    sandbox,
    ...over,
  };
  const of = (type: string) => events.events.filter((e) => e.type === type);
  return { deps, gateway, checkpoints, of };
}

const journalOf = async (checkpoints: MemoryCheckpointStore) =>
  TaskCheckpoint.parse(await checkpoints.load(`task:${TASK_ID}`), `task:${TASK_ID}`)?.codeact;

describe('a CodeAct script stopped from outside', () => {
  it('a task cancelled while its script computes ends cancelled at once, not at its time limit', async () => {
    let cancelled = false;
    const h = harness(scripts('call_tool("calc__add", { n: 1 }); for (;;) {}'), { isCancelled: () => Promise.resolve(cancelled) });
    h.gateway.onCall = () => setTimeout(() => (cancelled = true), 200);
    const t0 = Date.now();
    const result = await runCodeActTask(job(), spec(30_000), h.deps, 1);
    expect(result).toMatchObject({ status: 'stalled', error: 'cancelled' });
    // Before: the script ran to its 30 s time limit first.
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(h.gateway.sent).toHaveLength(1);
  });

  it('a draining process: the call in flight completes into the journal, the task is handed back, and the next attempt does not send it again', async () => {
    let draining = false;
    const gateway = new Gateway();
    gateway.delayMs = 800;
    gateway.onCall = () => (draining = true);
    const checkpoints = new MemoryCheckpointStore();
    const model = scripts(
      'const a = call_tool("calc__add", { n: 2 }); const b = call_tool("calc__add", { n: 3 }); return { final_result: b };',
    );
    const first = harness(model, { shouldYield: () => draining }, { gateway, checkpoints });
    const err = await runCodeActTask(job(), spec(), first.deps, { attempt: 1, firstPickup: true }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(YieldError);
    // Stopped where it waited: the first call has its answer in the journal, the second was never made.
    const journal = await journalOf(checkpoints);
    expect(journal?.calls).toHaveLength(1);
    expect(journal?.calls[0]?.answer).toEqual({ ok: { total: 2 } });
    expect(gateway.sent).toHaveLength(1);

    const second = harness(model, { shouldYield: () => false }, { gateway, checkpoints });
    const result = await runCodeActTask(job(), spec(), second.deps, 2);
    expect(result).toMatchObject({ status: 'completed', output: { total: 5 } });
    expect([...gateway.applied.values()]).toEqual([1, 1]);
    expect(gateway.sent).toEqual([`${TASK_ID}-s1-c0`, `${TASK_ID}-s1-c1`]);
    expect(second.of('codeact.replayed').filter((e) => e.data.source === 'journal')).toHaveLength(1);
  });

  it("the caller's signal (BullMQ's, as the worker cancels the job) stops a computing script and hands the task back", async () => {
    const h = harness(scripts('for (;;) {}'));
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 300);
    const t0 = Date.now();
    const err = await runCodeActTask(job(), spec(30_000), h.deps, { attempt: 1, signal: controller.signal }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(YieldError);
    expect(Date.now() - t0).toBeLessThan(10_000);
  });
});

describe('a result too large to read (item 4)', () => {
  it('is the output-limit script error with a codeact.limit event, shown to the model', async () => {
    const h = harness(
      scripts('return { final_result: { total: 1, pad: "x".repeat(50 * 1024 * 1024) } };', 'return { final_result: { total: 2 } };'),
    );
    const result = await runCodeActTask(job(), spec(), h.deps, 1);
    expect(result).toMatchObject({ status: 'completed', output: { total: 2 } });
    expect(h.of('codeact.limit').map((e) => e.data.limit)).toEqual(['output']);
    expect(String(h.of('codeact.result')[0]?.data.message)).toMatch(/output limit/);
    expect(String(h.of('codeact.result')[0]?.data.message)).not.toMatch(/object Object/);
  });
});
