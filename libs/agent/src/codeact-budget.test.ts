import { describe, expect, it } from 'vitest';
import {
  Incident,
  STALL_MARKER,
  isStalled,
  parseWith,
  sumUsage,
  taskIdFor,
  type Catalog,
  type DeadLetter,
  type TaskJob,
  type ToolCallJob,
  type ToolCallResult,
  type UsageTotals,
} from '@bosun/contract';
import { createLogger, type BudgetLimits } from '@bosun/config';
import type { Model, ModelRequest, ModelResponse } from '@bosun/models';
import { MemoryCheckpointStore, MemoryEventSink, type DeadLetterInput, type ToolClient } from '@bosun/transport';

import { runCodeActTask } from './codeact.js';
import type { TaskAgentDeps, TaskAgentSpec } from './task.js';

// Budgets in the CodeAct loop, with the task loop's budget code: checked before each model turn
// and before each new call_tool of a script; usage in the task checkpoint with the journal, so a
// replay after a crash counts a journaled call once and a resumed task gets no fresh budget.

const RUN_ID = 'r0123456789abcdef0789';
const TASK_ID = taskIdFor(RUN_ID, 0, 'ops');
const OUTPUT = { type: 'object', required: ['total'], properties: { total: { type: 'number' }, note: { type: 'string' } } };
const USAGE = { inputTokens: 100, outputTokens: 20 };

/** The gateway: `add` adds n to a counter; each key is applied once, a repeat answered from its record. */
class Gateway implements ToolClient {
  readonly applied: string[] = [];
  private readonly records = new Map<string, ToolCallResult>();
  total = 0;
  async catalog(): Promise<Catalog> {
    const add = {
      name: 'calc__add',
      server: 'calc',
      remoteName: 'add',
      description: 'add',
      inputSchema: { type: 'object' },
      annotations: {},
    };
    return { v: 1, updatedAt: new Date(0).toISOString(), tools: [add], unavailable: {} };
  }
  async call(call: ToolCallJob): Promise<ToolCallResult> {
    const recorded = this.records.get(call.key);
    if (recorded) return recorded;
    this.applied.push(call.key);
    this.total += call.args.n as number;
    const result = { v: 1 as const, key: call.key, tool: call.tool, status: 'ok' as const, isError: false, durationMs: 0 };
    this.records.set(call.key, { ...result, text: JSON.stringify({ total: this.total }) });
    return this.records.get(call.key)!;
  }
}

/** Checkpoints that stop the process (throw) at the `dieAt`-th save from now. */
class Checkpoints extends MemoryCheckpointStore {
  saves = 0;
  dieAt: number | undefined;
  override save(id: string, value: unknown): Promise<void> {
    this.saves++;
    if (this.dieAt !== undefined && this.saves >= this.dieAt) return Promise.reject(new Error('process killed'));
    return super.save(id, value);
  }
}

/** A model that writes `list[turn]` in a fenced block (with token usage), and counts its calls. */
function scripts(...list: string[]): Model & { calls: number } {
  const model = {
    name: 'scripted',
    calls: 0,
    generate(request: ModelRequest): Promise<ModelResponse> {
      model.calls++;
      const turn = request.messages.filter((m) => m.role === 'model').length;
      return Promise.resolve({ text: `Here:\n\`\`\`js\n${list[turn] ?? 'return { observation: 1 };'}\n\`\`\``, calls: [], usage: USAGE });
    },
  };
  return model;
}

/** A run's ledger in memory: part → total. */
class MemoryLedger {
  readonly parts = new Map<string, UsageTotals>();
  async record(_runId: string, part: string, usage: UsageTotals): Promise<void> {
    this.parts.set(part, usage);
  }
  async total(): Promise<UsageTotals> {
    return sumUsage(...this.parts.values());
  }
}

function job(): TaskJob {
  const incident = parseWith(Incident, { id: 'inc-b', source: 'test', reason: 'Drift', summary: 'drift' }, 'incident');
  return { v: 1, runId: RUN_ID, incidentId: incident.id, taskId: TASK_ID, agent: 'ops', task: 'Add.', incident };
}

const spec = (budget: BudgetLimits | undefined): TaskAgentSpec => ({
  name: 'ops',
  tools: ['calc__*'],
  outputSchema: OUTPUT,
  maxToolRounds: 10,
  maxInvalidOutputs: 1,
  loop: 'codeact',
  stallPayload: { note: '${stallText}' },
  budget,
});

interface Shared {
  gateway?: Gateway;
  checkpoints?: Checkpoints;
  runBudget?: TaskAgentDeps['runBudget'];
}

function harness(model: Model, shared: Shared = {}) {
  const gateway = shared.gateway ?? new Gateway();
  const checkpoints = shared.checkpoints ?? new Checkpoints();
  const events = new MemoryEventSink();
  const deadLetters: { input: DeadLetterInput; id: string | undefined }[] = [];
  const deps: TaskAgentDeps = {
    model,
    tools: gateway,
    checkpoints,
    events,
    deadLetters: {
      add: async (input: DeadLetterInput, id?: string): Promise<DeadLetter> => {
        deadLetters.push({ input, id });
        return { v: 1, marker: STALL_MARKER, at: new Date(0).toISOString(), ...input };
      },
    },
    log: createLogger({ service: 't', level: 'silent' }),
    price: { inputPerMTok: 1, outputPerMTok: 2 },
    ...(shared.runBudget ? { runBudget: shared.runBudget } : {}),
  };
  const of = (type: string) => events.events.filter((e) => e.type === type);
  return { deps, gateway, checkpoints, events, deadLetters, of };
}

/** Ten calls in one script, catching every error (a budget stop must not be catchable). */
const TEN = [
  'let made = 0;',
  'for (let i = 1; i <= 10; i++) {',
  '  try { call_tool("calc__add", { n: i }); made++; } catch (e) { console.log("caught", e.message); }',
  '}',
  'return { final_result: { total: made } };',
].join('\n');

describe('CodeAct budgets', () => {
  it('a script making 10 calls with a tool-call limit of 3 stops at the 4th, unsent: INCOMPLETE budget, a dead letter', async () => {
    const h = harness(scripts(TEN));
    const result = await runCodeActTask(job(), spec({ toolCalls: 3 }), h.deps, 1);
    expect(h.gateway.applied).toEqual([`${TASK_ID}-s1-c0`, `${TASK_ID}-s1-c1`, `${TASK_ID}-s1-c2`]);
    expect(result.status).toBe('stalled');
    expect(isStalled(result.output)).toBe(true);
    expect(result.error).toBe('stopped at its budget: 1 more tool call(s) would cross the limit of 3 tool calls (3 made)');
    expect(result.lastWords).toContain('call_tool("calc__add"');
    expect(result.usage).toEqual({ inputTokens: 100, outputTokens: 20, modelCalls: 1, toolCalls: 3, costUsd: 0.00014 });
    expect(h.deadLetters).toEqual([
      {
        id: `budget-${TASK_ID}`,
        input: expect.objectContaining({ kind: 'budget', reason: expect.stringContaining('ops stopped at its budget') }),
      },
    ]);
    expect(h.of('agent.stalled')[0]?.data).toMatchObject({ kind: 'budget', marker: STALL_MARKER, usage: { toolCalls: 3 } });
    // The script was stopped at the call: it could not catch the stop, and it returned nothing.
    expect(h.of('codeact.result')).toHaveLength(0);
    // The fourth call is not in the journal: it was never sent.
    const ckpt = (await h.checkpoints.load(`task:${TASK_ID}`)) as { codeact: { calls: unknown[] }; usage: UsageTotals };
    expect(ckpt.codeact.calls).toHaveLength(3);
    expect(ckpt.usage).toEqual(result.usage);
  });

  it('stops before the model turn that would cross a model-call limit', async () => {
    const m = scripts(
      'return { observation: call_tool("calc__add", { n: 1 }) };',
      'return { observation: call_tool("calc__add", { n: 2 }) };',
    );
    const h = harness(m);
    const result = await runCodeActTask(job(), spec({ modelCalls: 2 }), h.deps, 1);
    expect(result.status).toBe('stalled');
    expect(result.error).toBe('stopped at its budget: another model call would cross the limit of 2 model calls (2 made)');
    expect(m.calls).toBe(2);
    expect(h.gateway.applied).toHaveLength(2);
    expect(result.usage).toMatchObject({ modelCalls: 2, toolCalls: 2, inputTokens: 200 });
    expect(h.deadLetters.map((d) => d.input.kind)).toEqual(['budget']);
  });

  it('reports usage on a completed task and its agent.completed event', async () => {
    const h = harness(scripts('call_tool("calc__add", { n: 2 });\nreturn { final_result: call_tool("calc__add", { n: 3 }) };'));
    const result = await runCodeActTask(job(), spec(undefined), h.deps, 1);
    expect(result).toMatchObject({ status: 'completed', output: { total: 5 } });
    expect(result.usage).toMatchObject({ modelCalls: 1, toolCalls: 2, inputTokens: 100, outputTokens: 20 });
    expect(h.of('agent.completed')[0]?.data.usage).toEqual(result.usage);
  });

  it('a replay after a crash counts each journaled call once, and the resumed task gets no fresh budget', async () => {
    const gateway = new Gateway();
    const checkpoints = new Checkpoints();
    // Saves: 1 before call 0, 2 before call 1, 3 before call 2 → dies after call 1 took effect.
    checkpoints.dieAt = 3;
    const first = harness(scripts(TEN), { gateway, checkpoints });
    await expect(runCodeActTask(job(), spec({ toolCalls: 3 }), first.deps, 1)).rejects.toThrow('process killed');
    expect(gateway.applied).toHaveLength(2);
    const saved = (await checkpoints.load(`task:${TASK_ID}`)) as { usage: UsageTotals };
    expect(saved.usage).toMatchObject({ toolCalls: 2, modelCalls: 1 });

    checkpoints.dieAt = undefined;
    const m = scripts(TEN);
    const second = harness(m, { gateway, checkpoints });
    const result = await runCodeActTask(job(), spec({ toolCalls: 3 }), second.deps, 2);
    // Calls 0 and 1 from the journal and the gateway's record, call 2 new: 3 in all, then the stop.
    expect(gateway.applied).toEqual([`${TASK_ID}-s1-c0`, `${TASK_ID}-s1-c1`, `${TASK_ID}-s1-c2`]);
    expect(result.status).toBe('stalled');
    expect(result.error).toMatch(/limit of 3 tool calls \(3 made\)/);
    expect(result.usage).toMatchObject({ toolCalls: 3, modelCalls: 1 });
    expect(m.calls).toBe(0);
    expect(
      second
        .of('codeact.replayed')
        .filter((e) => e.data.key)
        .map((e) => e.data.source),
    ).toEqual(['journal', 'gateway']);
  });

  it("stops at the run's budget, seen through the ledger, and leaves the task's total there", async () => {
    const ledger = new MemoryLedger();
    ledger.parts.set('other-task', { inputTokens: 0, outputTokens: 0, modelCalls: 1, toolCalls: 4, costUsd: 0 });
    const h = harness(scripts(TEN), { runBudget: { limits: { toolCalls: 5 }, ledger } });
    const result = await runCodeActTask(job(), spec(undefined), h.deps, 1);
    expect(h.gateway.applied).toHaveLength(1);
    expect(result.error).toBe("stopped at the run's budget: 1 more tool call(s) would cross the limit of 5 tool calls (5 made)");
    expect(ledger.parts.get(TASK_ID)).toEqual(result.usage);
  });
});
