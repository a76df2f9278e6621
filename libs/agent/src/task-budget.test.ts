import { describe, expect, it } from 'vitest';
import {
  Incident,
  STALL_MARKER,
  isStalled,
  parseWith,
  sumUsage,
  taskIdFor,
  type UsageTotals,
  type Catalog,
  type DeadLetter,
  type TaskJob,
  type ToolCallJob,
} from '@bosun/contract';
import { createLogger, type BudgetLimits, type ModelPrice } from '@bosun/config';
import { FakeModel } from '@bosun/models';
import { MemoryCheckpointStore, MemoryEventSink, type DeadLetterInput, type ToolClient } from '@bosun/transport';

import { overBudget } from './budget.js';
import { runTask, type TaskAgentDeps, type TaskAgentSpec } from './task.js';

// Budgets in the task loop: a task stops before the call that would cross a limit and ends as
// an INCOMPLETE `budget` part with a dead letter; its usage is in its result and events.

const RUN_ID = 'r0123456789abcdef0789';
const TASK_ID = taskIdFor(RUN_ID, 0, 'kubernetes');
const REPORT = { type: 'object', required: ['summary'], properties: { summary: { type: 'string' } } };
/** Ten tool calls, one per turn. */
const TEN = Array.from({ length: 10 }, (_, i) => ({ tool: 'demo__get_pods', args: { service: `s${i}` } }));

class Tools implements ToolClient {
  readonly calls: ToolCallJob[] = [];
  async catalog(): Promise<Catalog> {
    const tool = { name: 'demo__get_pods', server: 'demo', remoteName: 'get_pods', description: 'pods', inputSchema: { type: 'object' } };
    return { v: 1, updatedAt: '2026-01-01T00:00:00.000Z', tools: [{ ...tool, annotations: { readOnlyHint: true } }], unavailable: {} };
  }
  async call(call: ToolCallJob) {
    this.calls.push(call);
    return { v: 1 as const, key: call.key, tool: call.tool, status: 'ok' as const, isError: false, text: 'pods ok', durationMs: 1 };
  }
}

function job(): TaskJob {
  const incident = parseWith(Incident, { id: 'inc-b', source: 'test', reason: 'PodCrashLooping', summary: 'restarts' }, 'incident');
  return { v: 1, runId: RUN_ID, incidentId: incident.id, taskId: TASK_ID, agent: 'kubernetes', task: 'Investigate.', incident };
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

async function run(budget: BudgetLimits | undefined, price?: ModelPrice, runBudget?: TaskAgentDeps['runBudget']) {
  const tools = new Tools();
  const events = new MemoryEventSink();
  const deadLetters: { input: DeadLetterInput; id: string | undefined }[] = [];
  const checkpoints = new MemoryCheckpointStore();
  const deps: TaskAgentDeps = {
    model: new FakeModel({ plans: { kubernetes: TEN } }),
    tools,
    checkpoints,
    events,
    deadLetters: {
      add: async (input: DeadLetterInput, id?: string): Promise<DeadLetter> => {
        deadLetters.push({ input, id });
        return { v: 1, marker: STALL_MARKER, at: new Date(0).toISOString(), ...input };
      },
    },
    log: createLogger({ service: 't', level: 'silent' }),
    ...(price ? { price } : {}),
    ...(runBudget ? { runBudget } : {}),
  };
  const spec: TaskAgentSpec = {
    name: 'kubernetes',
    tools: ['demo__*'],
    outputSchema: REPORT,
    maxToolRounds: 20,
    maxInvalidOutputs: 1,
    budget,
  };
  const result = await runTask(job(), spec, deps, 1);
  return { result, tools, events, deadLetters, checkpoints };
}

describe('task budgets', () => {
  it('stops a task that would make 10 tool calls after 3 with a limit of 3: INCOMPLETE budget, a dead letter', async () => {
    const h = await run({ toolCalls: 3 });
    expect(h.tools.calls).toHaveLength(3);
    expect(h.result.status).toBe('stalled');
    expect(isStalled(h.result.output)).toBe(true);
    expect(h.result.error).toBe('stopped at its budget: 1 more tool call(s) would cross the limit of 3 tool calls (3 made)');
    expect(JSON.stringify(h.result.output)).toContain('Reason: stopped at its budget');
    expect(h.result.usage).toMatchObject({ toolCalls: 3, modelCalls: 4 });
    expect(h.result.usage!.inputTokens).toBeGreaterThan(0);
    expect(h.deadLetters).toEqual([
      {
        id: `budget-${TASK_ID}`,
        input: expect.objectContaining({
          kind: 'budget',
          taskId: TASK_ID,
          reason: expect.stringContaining('kubernetes stopped at its budget'),
        }),
      },
    ]);
    const stalled = h.events.events.find((e) => e.type === 'agent.stalled');
    expect(stalled?.data).toMatchObject({ kind: 'budget', marker: STALL_MARKER, usage: { toolCalls: 3, modelCalls: 4 } });
    // The result and its usage are in the checkpoint: a task run again returns them as they are.
    expect(((await h.checkpoints.load(`task:${TASK_ID}`)) as { usage: unknown }).usage).toEqual(h.result.usage);
  });

  it('stops before the model call that would cross a model-call limit', async () => {
    const h = await run({ modelCalls: 2 });
    expect(h.result.status).toBe('stalled');
    expect(h.result.error).toMatch(/another model call would cross the limit of 2 model calls \(2 made\)/);
    expect(h.tools.calls).toHaveLength(2);
    expect(h.result.usage).toMatchObject({ modelCalls: 2, toolCalls: 2 });
  });

  it('estimates the cost from the price table and stops once the cost limit is used up', async () => {
    const price = { inputPerMTok: 1_000, outputPerMTok: 4_000 };
    const h = await run({ costUsd: 0.5 }, price);
    expect(h.result.status).toBe('stalled');
    const usage = h.result.usage!;
    expect(usage.costUsd).toBeGreaterThanOrEqual(0.5);
    expect(usage.costUsd).toBeCloseTo((usage.inputTokens * 1_000 + usage.outputTokens * 4_000) / 1e6, 5);
    expect(h.result.error).toMatch(/limit of \$0.5 \(estimated \$[\d.]+ spent\)/);
  });

  it('reports usage in a completed task without limits', async () => {
    const h = await run(undefined);
    expect(h.result.status).toBe('completed');
    expect(h.result.usage).toMatchObject({ toolCalls: 10, modelCalls: 11, costUsd: 0 });
    const completed = h.events.events.find((e) => e.type === 'agent.completed');
    expect(completed?.data.usage).toEqual(h.result.usage);
  });
});

describe('run budgets', () => {
  it("stops a task when the run's parts together would cross the run's limit, and leaves its total in the ledger", async () => {
    const ledger = new MemoryLedger();
    ledger.parts.set('other-task', { inputTokens: 10, outputTokens: 5, modelCalls: 3, toolCalls: 2, costUsd: 0 });
    const h = await run({ toolCalls: 5 }, undefined, { limits: { toolCalls: 3 }, ledger });
    expect(h.tools.calls).toHaveLength(1);
    expect(h.result.status).toBe('stalled');
    expect(h.result.error).toBe("stopped at the run's budget: 1 more tool call(s) would cross the limit of 3 tool calls (3 made)");
    expect(h.deadLetters[0]?.input.kind).toBe('budget');
    expect(ledger.parts.get(TASK_ID)).toEqual(h.result.usage);
  });
});

describe('overBudget', () => {
  const spent = { inputTokens: 100, outputTokens: 10, modelCalls: 2, toolCalls: 3, costUsd: 0.01 };
  it('lets through what fits and names the limit that would be crossed', () => {
    expect(overBudget(spent, undefined, { modelCall: true })).toBeUndefined();
    expect(overBudget(spent, { toolCalls: 5 }, { toolCalls: 2 })).toBeUndefined();
    expect(overBudget(spent, { toolCalls: 4 }, { toolCalls: 2 })).toMatch(/2 more tool call\(s\) would cross the limit of 4/);
    expect(overBudget(spent, { inputTokens: 100 }, { modelCall: true })).toMatch(/limit of 100 input tokens \(100 used\)/);
    expect(overBudget(spent, { outputTokens: 11 }, { modelCall: true })).toBeUndefined();
    expect(overBudget(spent, { costUsd: 0.01 }, { modelCall: true })).toMatch(/\$0.01/);
  });
});
