import { describe, expect, it } from 'vitest';
import {
  FINISH_TASK_TOOL,
  Incident,
  parseWith,
  taskIdFor,
  type Catalog,
  type CatalogTool,
  type TaskJob,
  type ToolCallJob,
  type ToolCallResult,
} from '@bosun/contract';
import { createLogger } from '@bosun/config';
import { FakeModel, type Model, type ModelRequest, type ModelResponse } from '@bosun/models';
import { MemoryCheckpointStore, MemoryEventSink, type DeadLetterInput, type ToolClient } from '@bosun/transport';
import { runTask, type TaskAgentDeps, type TaskAgentSpec } from './task.js';
import { LOAD_TOOLS } from './routing.js';

// In-band tool routing (load_tools, groups, the one nudge, statistics) and the 128-tool cap.

const REPORT = { type: 'object', required: ['summary'], properties: { summary: { type: 'string' } } };
const RUN_ID = 'r00000000000000000001';
const TASK_ID = taskIdFor(RUN_ID, 0, 'ops');

function tool(name: string): CatalogTool {
  const [server, remoteName] = name.split('__') as [string, string];
  return {
    name,
    server,
    remoteName,
    description: `${remoteName}`,
    inputSchema: { type: 'object', properties: {} },
    annotations: { readOnlyHint: true },
  };
}

class Tools implements ToolClient {
  readonly calls: ToolCallJob[] = [];
  constructor(private readonly names: string[]) {}
  async catalog(): Promise<Catalog> {
    return { v: 1, updatedAt: '2025-01-01T00:00:00.000Z', tools: this.names.map(tool), unavailable: {} };
  }
  async call(call: ToolCallJob): Promise<ToolCallResult> {
    this.calls.push(call);
    return { v: 1, key: call.key, tool: call.tool, status: 'ok', isError: false, text: 'ok', durationMs: 1 };
  }
}

class Recording implements Model {
  readonly name = 'recording';
  readonly requests: ModelRequest[] = [];
  constructor(private readonly inner: Model) {}
  async generate(r: ModelRequest): Promise<ModelResponse> {
    this.requests.push(structuredClone(r));
    return this.inner.generate(r);
  }
}

function job(payload: unknown): TaskJob {
  const incident = parseWith(Incident, { id: 'inc-r', source: 't', reason: 'R', summary: 's', payload }, 'incident');
  return { v: 1, runId: RUN_ID, incidentId: 'inc-r', taskId: TASK_ID, agent: 'ops', task: 'Investigate.', incident };
}

function spec(over: Partial<TaskAgentSpec> = {}): TaskAgentSpec {
  return { name: 'ops', tools: ['demo__*', 'metrics__*'], outputSchema: REPORT, maxToolRounds: 10, maxInvalidOutputs: 1, ...over };
}

function deps(model: Model, tools: Tools) {
  const events = new MemoryEventSink();
  const dead: DeadLetterInput[] = [];
  const d: TaskAgentDeps = {
    model,
    tools,
    checkpoints: new MemoryCheckpointStore(),
    events,
    deadLetters: { add: async (e: DeadLetterInput) => (dead.push(e), { ...e, v: 1, at: '', marker: '' }) },
    log: createLogger({ service: 't', level: 'silent' }),
  };
  return { d, events, dead };
}

const routing = { enabled: true, groups: {}, alwaysOn: [] as string[] };

describe('in-band tool routing', () => {
  it('offers groups and load_tools first, loads what the model asks for, then runs it; stats in the events', async () => {
    const model = new Recording(new FakeModel());
    const tools = new Tools(['demo__get_pods', 'demo__get_logs', 'metrics__cpu']);
    const { d, events } = deps(model, tools);
    const r = await runTask(job({ fake: { calls: { ops: [{ tool: 'metrics__cpu', args: {} }] } } }), spec({ routing }), d, 1);
    expect(r.status).toBe('completed');
    const first = model.requests[0]!.tools.map((t) => t.name);
    expect(first).toEqual([LOAD_TOOLS, FINISH_TASK_TOOL]);
    expect(model.requests[0]!.tools[0]!.description).toMatch(/- demo: demo__get_pods.*\n- metrics: metrics__cpu/);
    expect(model.requests[1]!.tools.map((t) => t.name)).toEqual(['metrics__cpu', LOAD_TOOLS, FINISH_TASK_TOOL]);
    expect(tools.calls.map((c) => c.tool)).toEqual(['metrics__cpu']);
    const done = events.events.find((e) => e.type === 'agent.completed')!;
    expect(done.data.routing).toEqual({
      groupsOffered: ['demo', 'metrics'],
      groupsLoaded: [],
      reloads: 0,
      skipped: ['demo'],
      nudged: false,
    });
    expect(events.events.some((e) => e.type === 'tool.routing' && (e.data.loaded as string[]).includes('metrics__cpu'))).toBe(true);
  });

  it('keeps always-on groups loaded, counts reloads, and refuses a tool that is not loaded', async () => {
    let turn = 0;
    const scripted: Model = {
      name: 's',
      async generate(): Promise<ModelResponse> {
        turn++;
        if (turn === 1) return { calls: [{ id: 'a', name: LOAD_TOOLS, args: { groups: ['demo', 'demo'] } }] };
        if (turn === 2) return { calls: [{ id: 'b', name: 'metrics__cpu', args: {} }] };
        return { calls: [{ id: 'c', name: FINISH_TASK_TOOL, args: { summary: 'done' } }] };
      },
    };
    const tools = new Tools(['demo__get_pods', 'metrics__cpu']);
    const { d, events } = deps(scripted, tools);
    const r = await runTask(job({}), spec({ routing: { enabled: true, groups: {}, alwaysOn: ['metrics'] } }), d, 1);
    expect(r.status).toBe('completed');
    // metrics is always on, so metrics__cpu runs without loading.
    expect(tools.calls.map((c) => c.tool)).toEqual(['metrics__cpu']);
    const stats = events.events.find((e) => e.type === 'agent.completed')!.data.routing as Record<string, unknown>;
    expect(stats).toMatchObject({ groupsLoaded: ['metrics', 'demo'], reloads: 1, skipped: [] });
  });

  it('nudges once when the model tries to answer before loading anything', async () => {
    let turn = 0;
    const scripted: Model = {
      name: 's',
      async generate(): Promise<ModelResponse> {
        turn++;
        return { calls: [{ id: `f${turn}`, name: FINISH_TASK_TOOL, args: { summary: `answer ${turn}` } }] };
      },
    };
    const { d, events } = deps(scripted, new Tools(['demo__get_pods']));
    const r = await runTask(job({}), spec({ routing }), d, 1);
    expect(r.status).toBe('completed');
    expect(r.output).toEqual({ summary: 'answer 2' });
    expect(events.events.filter((e) => e.type === 'tool.routing' && e.data.action === 'nudge')).toHaveLength(1);
  });
});

describe('the 128-tool cap', () => {
  it('fails the task before calling the model, naming the count and the limit', async () => {
    const names = Array.from({ length: 130 }, (_, i) => `demo__tool_${i}`);
    let called = false;
    const model: Model = { name: 'm', generate: async () => ((called = true), { calls: [] }) };
    const { d, dead } = deps(model, new Tools(names));
    const r = await runTask(job({}), spec(), d, 1);
    expect(called).toBe(false);
    expect(r.status).toBe('failed');
    expect(r.error).toMatch(/^131 tools would be offered to the model in one request; the limit is 128/);
    expect(dead[0]?.kind).toBe('failure');
  });

  it('with routing, the same catalog stays under the cap', async () => {
    const names = Array.from({ length: 130 }, (_, i) => `demo__tool_${i}`);
    const { d } = deps(new FakeModel(), new Tools(names));
    const r = await runTask(job({}), spec({ routing }), d, 1);
    // The fake model finishes without loading; the nudge comes first, then it finishes.
    expect(r.status).toBe('completed');
  });
});
