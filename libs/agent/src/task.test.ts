import { describe, expect, it } from 'vitest';
import {
  BadCheckpointError,
  FINISH_TASK_TOOL,
  Incident,
  STALL_MARKER,
  isStalled,
  parseWith,
  taskIdFor,
  type Catalog,
  type CatalogTool,
  type DeadLetter,
  type TaskJob,
  type ToolCallJob,
  type ToolCallResult,
} from '@bosun/contract';
import { createLogger, validateAgainstSchema } from '@bosun/config';
import { FakeModel, ModelError, renderIncident, type Message, type Model, type ModelRequest, type ModelResponse } from '@bosun/models';
import { MemoryCheckpointStore, MemoryEventSink, type DeadLetterInput, type ToolClient } from '@bosun/transport';

import { DEFAULT_TASK_INSTRUCTION, RetryableTaskError, runTask, taskDeadline, type TaskAgentDeps, type TaskAgentSpec } from './task.js';

const REPORT: Record<string, unknown> = {
  type: 'object',
  required: ['summary', 'findings', 'evidence'],
  properties: {
    summary: { type: 'string' },
    findings: {
      type: 'array',
      items: { type: 'object', required: ['title', 'detail'], properties: { title: { type: 'string' }, detail: { type: 'string' } } },
    },
    evidence: { type: 'array', items: { type: 'string' } },
  },
};

const PLAN = [
  { tool: 'demo__get_pods', args: { service: '${labels.service}' } },
  { tool: 'demo__get_logs', args: { service: '${labels.service}', lines: 10 } },
  { tool: 'demo__get_deployments', args: { service: '${labels.service}' } },
];

const RUN_ID = 'r0123456789abcdef0123';
const TASK_ID = taskIdFor(RUN_ID, 0, 'kubernetes');
const CKPT = `task:${TASK_ID}`;

function catalogTool(name: string): CatalogTool {
  const [server, remoteName] = name.split('__') as [string, string];
  return {
    name,
    server,
    remoteName,
    description: `${remoteName} of a service`,
    inputSchema: { type: 'object', properties: { service: { type: 'string' } } },
    annotations: { readOnlyHint: true },
  };
}

/** A ToolClient that records calls; `fail` maps a tool to how it fails; `refuse` says why a gateway would refuse a call. */
class FakeTools implements ToolClient {
  readonly calls: ToolCallJob[] = [];
  constructor(
    private readonly fail: Record<string, 'throw' | 'error' | 'in-doubt'> = {},
    private readonly refuse: (call: ToolCallJob) => string | undefined = () => undefined,
  ) {}

  async catalog(): Promise<Catalog> {
    return {
      v: 1,
      updatedAt: '2025-01-01T00:00:00.000Z',
      tools: ['demo__get_pods', 'demo__get_logs', 'demo__get_deployments', 'admin__delete_pod'].map(catalogTool),
      unavailable: {},
    };
  }

  async call(call: ToolCallJob): Promise<ToolCallResult> {
    this.calls.push(call);
    const refused = this.refuse(call);
    if (refused) return { v: 1, key: call.key, tool: call.tool, status: 'error', isError: true, text: '', error: refused, durationMs: 0 };
    const how = this.fail[call.tool];
    if (how === 'throw') throw new Error('gateway unreachable');
    if (how === 'error')
      return { v: 1, key: call.key, tool: call.tool, status: 'error', isError: false, text: '', error: 'server crashed', durationMs: 1 };
    if (how === 'in-doubt')
      return {
        v: 1,
        key: call.key,
        tool: call.tool,
        status: 'error',
        isError: true,
        text: '',
        error: `IN DOUBT: ${call.tool} timed out`,
        durationMs: 0,
        inDoubt: true,
      };
    return {
      v: 1,
      key: call.key,
      tool: call.tool,
      status: 'ok',
      isError: false,
      text: `${call.tool}: ${String(call.args.service)} ok`,
      durationMs: 1,
    };
  }
}

/** Wraps a model, recording every request (deep-copied) it sees. */
class Recording implements Model {
  readonly name: string;
  readonly requests: ModelRequest[] = [];
  constructor(private readonly inner: Model) {
    this.name = inner.name;
  }
  async generate(request: ModelRequest): Promise<ModelResponse> {
    this.requests.push(structuredClone(request));
    return this.inner.generate(request);
  }
}

/** A model that answers every request with `respond`. */
function scripted(respond: (request: ModelRequest) => ModelResponse | Promise<ModelResponse>): Model {
  return { name: 'scripted', generate: async (request) => respond(request) };
}

function job(payload?: unknown): TaskJob {
  const incident = parseWith(
    Incident,
    {
      id: 'inc-7',
      source: 'test',
      reason: 'PodCrashLooping',
      summary: 'checkout restarts',
      labels: { service: 'checkout' },
      ...(payload === undefined ? {} : { payload }),
    },
    'incident',
  );
  return { v: 1, runId: RUN_ID, incidentId: incident.id, taskId: TASK_ID, agent: 'kubernetes', task: 'Investigate the pods.', incident };
}

function spec(overrides: Partial<TaskAgentSpec> = {}): TaskAgentSpec {
  return { name: 'kubernetes', tools: ['demo__*'], outputSchema: REPORT, maxToolRounds: 8, maxInvalidOutputs: 2, ...overrides };
}

function harness(model: Model, options: { tools?: FakeTools; checkpoints?: MemoryCheckpointStore } = {}) {
  const tools = options.tools ?? new FakeTools();
  const checkpoints = options.checkpoints ?? new MemoryCheckpointStore();
  const events = new MemoryEventSink();
  const deadLetters: { input: DeadLetterInput; id: string | undefined }[] = [];
  const deps: TaskAgentDeps = {
    model,
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
  };
  return { deps, tools, checkpoints, events, deadLetters, types: () => events.events.map((e) => e.type) };
}

const fake = () => new FakeModel({ plans: { kubernetes: PLAN } });

describe('runTask', () => {
  it('completes a planned investigation', async () => {
    const h = harness(fake());
    const result = await runTask(job(), spec(), h.deps, 1);
    expect(result).toMatchObject({ v: 1, taskId: TASK_ID, agent: 'kubernetes', status: 'completed', attempts: 1 });
    expect(validateAgainstSchema(REPORT, result.output)).toBeNull();
    const output = result.output as { findings: { title: string; detail: string }[] };
    expect(output.findings.map((f) => f.title)).toEqual(['demo__get_pods', 'demo__get_logs', 'demo__get_deployments']);
    expect(output.findings[0]!.detail).toContain('demo__get_pods: checkout ok');

    expect(h.tools.calls.map((c) => [c.key, c.tool, c.args])).toEqual([
      [`${TASK_ID}-s1-c0`, 'demo__get_pods', { service: 'checkout' }],
      [`${TASK_ID}-s2-c0`, 'demo__get_logs', { service: 'checkout', lines: 10 }],
      [`${TASK_ID}-s3-c0`, 'demo__get_deployments', { service: 'checkout' }],
    ]);
    for (const c of h.tools.calls) expect(c).toMatchObject({ v: 1, runId: RUN_ID, incidentId: 'inc-7', agent: 'kubernetes' });

    expect(h.types()).toEqual(['agent.started', 'model.called', 'model.called', 'model.called', 'model.called', 'agent.completed']);
    const seqs = h.events.events.map((e) => e.seq);
    expect(seqs).toEqual([1, 2, 3, 4, 5, 6]);
    const called = h.events.events.filter((e) => e.type === 'model.called');
    expect(called.map((e) => e.data.calls)).toEqual([
      ['demo__get_pods'],
      ['demo__get_logs'],
      ['demo__get_deployments'],
      [FINISH_TASK_TOOL],
    ]);
    expect(called.map((e) => e.data.step)).toEqual([1, 2, 3, 4]);
    expect(called[0]!.data.model).toBe('fake');
    expect(h.events.events.every((e) => e.runId === RUN_ID && e.agent === 'kubernetes')).toBe(true);
    expect(h.deadLetters).toEqual([]);

    // The result is checkpointed.
    const saved = (await h.checkpoints.load(CKPT)) as { result?: unknown; step: number };
    expect(saved.result).toEqual(result);
    expect(saved.step).toBe(4);
  });

  it('offers the allowed catalog tools and finish_task, with the default instruction', async () => {
    const model = new Recording(fake());
    const h = harness(model);
    await runTask(job(), spec({ tools: ['demo__get_pods', 'demo__get_logs'] }), h.deps, 1);
    const first = model.requests[0]!;
    expect(first.mode).toBe('task');
    expect(first.agent).toBe('kubernetes');
    expect(first.system).toBe(DEFAULT_TASK_INSTRUCTION);
    expect(first.tools.map((t) => t.name)).toEqual(['demo__get_pods', 'demo__get_logs', FINISH_TASK_TOOL]);
    expect(first.tools.find((t) => t.name === FINISH_TASK_TOOL)?.parameters).toEqual(REPORT);
    const opening = first.messages[0];
    expect(opening).toEqual({ role: 'user', text: `Investigate the pods.\n\n${renderIncident(job().incident)}` });
  });

  it('stalls when the model ends its turn without finish_task', async () => {
    const h = harness(fake());
    const result = await runTask(job({ fake: { stall: ['kubernetes'] } }), spec(), h.deps, 2);
    expect(result.status).toBe('stalled');
    expect(result.attempts).toBe(2);
    const output = result.output as { summary: string; findings: unknown[]; evidence: unknown[] };
    expect(output.summary.startsWith(STALL_MARKER)).toBe(true);
    expect(output.summary).toContain('kubernetes');
    expect(output.summary).toContain(result.lastWords!);
    expect(result.lastWords).toMatch(/which cluster/);
    expect(output.findings).toEqual([]);
    expect(isStalled(result.output)).toBe(true);
    expect(validateAgainstSchema(REPORT, result.output)).toBeNull();
    expect(h.tools.calls).toEqual([]);

    expect(h.deadLetters).toHaveLength(1);
    expect(h.deadLetters[0]!.input).toMatchObject({
      kind: 'stall',
      runId: RUN_ID,
      incidentId: 'inc-7',
      agent: 'kubernetes',
      lastWords: result.lastWords,
      attempts: 2,
    });
    expect(h.deadLetters[0]!.id).toBe(`stall-${TASK_ID}`);
    const stalled = h.events.events.find((e) => e.type === 'agent.stalled');
    expect(stalled?.data).toMatchObject({ taskId: TASK_ID, marker: STALL_MARKER, lastWords: result.lastWords });
    expect(h.types()).not.toContain('agent.completed');
  });

  it('feeds an invalid output back and completes with the corrected one', async () => {
    const model = new Recording(fake());
    const h = harness(model);
    const result = await runTask(job({ fake: { invalid: ['kubernetes'] } }), spec(), h.deps, 1);
    expect(result.status).toBe('completed');
    expect(validateAgainstSchema(REPORT, result.output)).toBeNull();
    expect(model.requests).toHaveLength(5);
    const feedback = model.requests[4]!.messages.at(-1);
    expect(feedback?.role).toBe('tool');
    if (feedback?.role !== 'tool') throw new Error('unreachable');
    expect(feedback.responses).toHaveLength(1);
    expect(feedback.responses[0]).toMatchObject({ name: FINISH_TASK_TOOL, isError: true });
    expect(String(feedback.responses[0]!.output)).toContain("must have required property 'summary'");
    expect(h.deadLetters).toEqual([]);
  });

  it('fails after more than maxInvalidOutputs invalid outputs', async () => {
    let n = 0;
    const model = scripted(() => ({ text: `attempt ${++n}`, calls: [{ id: `c${n}`, name: FINISH_TASK_TOOL, args: { summary: 42 } }] }));
    const h = harness(model);
    const result = await runTask(job(), spec({ maxInvalidOutputs: 2 }), h.deps, 1);
    expect(n).toBe(3);
    expect(result.status).toBe('failed');
    expect(result.error).toMatch(/did not match the output schema 3 times/);
    expect(result.error).toContain('/summary');
    expect(result.lastWords).toBe('attempt 3');
    expect(isStalled(result.output)).toBe(true);
    expect(validateAgainstSchema(REPORT, result.output)).toBeNull();
    expect(h.deadLetters.map((d) => [d.input.kind, d.id])).toEqual([['failure', `failure-${TASK_ID}`]]);
    expect(h.types().at(-1)).toBe('agent.failed');
  });

  it('sends a call to a tool it was not offered (or that does not exist) to the gateway, which refuses it; the model hears why', async () => {
    const calls = [
      { tool: 'admin__delete_pod', args: { service: 'checkout' } },
      { tool: 'demo__get_logs', args: { service: 'checkout' } },
      { tool: 'demo__get_pods', args: { service: 'checkout' } },
      { tool: 'nosuch__tool', args: {} },
      // A name every JavaScript object has is just an unknown tool.
      { tool: 'constructor', args: {} },
    ];
    const model = new Recording(new FakeModel());
    const known = ['demo__get_pods', 'demo__get_logs', 'demo__get_deployments', 'admin__delete_pod'];
    // A gateway deciding as the real one does: unknown tools, and the agent's patterns.
    const tools = new FakeTools({}, (call) =>
      !known.includes(call.tool)
        ? `unknown tool "${call.tool}"`
        : call.tool === 'demo__get_pods'
          ? undefined
          : `tool "${call.tool}" is not allowed for agent "kubernetes"`,
    );
    const h = harness(model, { tools });
    const result = await runTask(job({ fake: { calls: { kubernetes: calls } } }), spec({ tools: ['demo__get_pods'] }), h.deps, 1);
    expect(result.status).toBe('completed');
    expect(model.requests[0]!.tools.map((t) => t.name)).toEqual(['demo__get_pods', FINISH_TASK_TOOL]);
    // Every call reached the gateway under its key: the refusals are decided, audited and
    // reported (tool.failed) there, not swallowed by the specialist.
    expect(h.tools.calls.map((c) => [c.key, c.tool])).toEqual([
      [`${TASK_ID}-s1-c0`, 'admin__delete_pod'],
      [`${TASK_ID}-s2-c0`, 'demo__get_logs'],
      [`${TASK_ID}-s3-c0`, 'demo__get_pods'],
      [`${TASK_ID}-s4-c0`, 'nosuch__tool'],
      [`${TASK_ID}-s5-c0`, 'constructor'],
    ]);
    const responses = model.requests
      .flatMap((r) => r.messages)
      .filter((m): m is Extract<Message, { role: 'tool' }> => m.role === 'tool')
      .flatMap((m) => m.responses);
    const denied = [...new Map(responses.filter((r) => r.name !== 'demo__get_pods').map((r) => [r.id, r])).values()];
    expect(denied.map((r) => r.name)).toEqual(['admin__delete_pod', 'demo__get_logs', 'nosuch__tool', 'constructor']);
    for (const r of denied) {
      expect(r.isError).toBe(true);
      expect(String(r.output)).toMatch(
        new RegExp(`^Tool "${r.name}" is not available to this agent: .*${r.name}.*\\. Use only the tools you were given\\.$`),
      );
    }
    expect(String(denied[0]!.output)).toContain('is not allowed for agent "kubernetes"');
    expect(String(denied[2]!.output)).toContain('unknown tool "nosuch__tool"');
    expect(String(denied[3]!.output)).toContain('unknown tool "constructor"');
  });

  it('feeds tool failures back as error results', async () => {
    const tools = new FakeTools({ demo__get_pods: 'throw', demo__get_logs: 'error' });
    const model = new Recording(fake());
    const h = harness(model, { tools });
    const result = await runTask(job(), spec(), h.deps, 1);
    expect(result.status).toBe('completed');
    expect(tools.calls).toHaveLength(3);
    const responses = model.requests.at(-1)!.messages.flatMap((m) => (m.role === 'tool' ? m.responses : []));
    expect(responses.map((r) => [r.name, r.isError ?? false])).toEqual([
      ['demo__get_pods', true],
      ['demo__get_logs', true],
      ['demo__get_deployments', false],
    ]);
    expect(String(responses[0]!.output)).toContain('could not be completed: gateway unreachable');
    expect(String(responses[1]!.output)).toContain('failed: server crashed');
  });

  it('puts a call that came back in doubt into the checkpoint and the completed result', async () => {
    const tools = new FakeTools({ demo__get_logs: 'in-doubt' });
    const h = harness(fake(), { tools });
    const result = await runTask(job(), spec(), h.deps, 1);
    expect(result.status).toBe('completed');
    expect(result.inDoubt).toEqual([{ key: `${TASK_ID}-s2-c0`, tool: 'demo__get_logs' }]);
    const saved = (await h.checkpoints.load(CKPT)) as { inDoubt?: unknown; result?: unknown };
    expect(saved.inDoubt).toEqual(result.inDoubt);
    expect(saved.result).toEqual(result);
  });

  it('puts the calls in doubt of a round redone after a crash into the result of a task that then stalls', async () => {
    const tools = new FakeTools({ demo__get_pods: 'in-doubt' });
    const checkpoints = new MemoryCheckpointStore();
    let turn = 0;
    // Turn 1 proposes a call, and the process "dies" before the next model call.
    const dies = scripted(() => {
      if (++turn === 1) return { calls: [{ id: 'a', name: 'demo__get_pods', args: { service: 'checkout' } }] };
      throw new ModelError('the process died', { retryable: true });
    });
    await expect(runTask(job(), spec(), harness(dies, { tools, checkpoints }).deps, 1)).rejects.toThrow(RetryableTaskError);
    // Resumed: the saved round runs again under the same key, then the model stops without reporting.
    const stalls = scripted(() => ({ text: 'I give up.', calls: [] }));
    const h = harness(stalls, { tools, checkpoints });
    const result = await runTask(job(), spec(), h.deps, 2);
    expect(result.status).toBe('stalled');
    expect(tools.calls.map((c) => c.key)).toEqual([`${TASK_ID}-s1-c0`, `${TASK_ID}-s1-c0`]);
    expect(result.inDoubt).toEqual([{ key: `${TASK_ID}-s1-c0`, tool: 'demo__get_pods' }]);
  });

  it('asks once to finish when maxToolRounds is reached, offering only finish_task', async () => {
    const model = new Recording(fake());
    const h = harness(model);
    const result = await runTask(job(), spec({ maxToolRounds: 2 }), h.deps, 1);
    expect(result.status).toBe('completed');
    expect(h.tools.calls.map((c) => c.tool)).toEqual(['demo__get_pods', 'demo__get_logs']);
    expect(model.requests).toHaveLength(3);
    expect(model.requests[1]!.tools.length).toBeGreaterThan(1);
    const last = model.requests[2]!;
    expect(last.tools.map((t) => t.name)).toEqual([FINISH_TASK_TOOL]);
    const asked = last.messages.at(-1);
    expect(asked?.role).toBe('user');
    expect(asked?.role === 'user' && asked.text).toMatch(/Call finish_task now/);
    expect(last.messages.filter((m) => m.role === 'user')).toHaveLength(2);
    expect((result.output as { findings: unknown[] }).findings).toHaveLength(2);
  });

  it('stalls when the model keeps calling tools after being asked to finish', async () => {
    let n = 0;
    const model = scripted(() => ({
      text: `looking ${++n}`,
      calls: [{ id: `c${n}`, name: 'demo__get_pods', args: { service: `s${n}` } }],
    }));
    const h = harness(model);
    const result = await runTask(job(), spec({ maxToolRounds: 1 }), h.deps, 1);
    expect(result.status).toBe('stalled');
    expect(result.lastWords).toBe('looking 2');
    expect(h.deadLetters[0]?.input.reason).toContain('did not call finish_task after the last of its 1 tool rounds');
  });

  it('does not execute a tool call made after being asked to finish', async () => {
    let n = 0;
    const model = scripted(() => ({
      text: `looking ${++n}`,
      calls: [{ id: `c${n}`, name: 'demo__get_pods', args: { service: `s${n}` } }],
    }));
    const h = harness(model);
    await runTask(job(), spec({ maxToolRounds: 1 }), h.deps, 1);
    expect(h.tools.calls.map((c) => c.args.service)).toEqual(['s1']);
  });

  it('feeds an invalid output back even after being asked to finish', async () => {
    const model = new Recording(fake());
    const h = harness(model);
    const result = await runTask(job({ fake: { invalid: ['kubernetes'] } }), spec({ maxToolRounds: 2 }), h.deps, 1);
    expect(result.status).toBe('completed');
    expect(model.requests).toHaveLength(4);
    expect(model.requests[3]!.tools.map((t) => t.name)).toEqual([FINISH_TASK_TOOL]);
  });

  it('returns the saved result on a re-run without calling the model', async () => {
    const checkpoints = new MemoryCheckpointStore();
    const first = await runTask(job(), spec(), harness(fake(), { checkpoints }).deps, 1);
    expect(first.status).toBe('completed');
    const throwing = scripted(() => {
      throw new Error('the model must not be called');
    });
    const h = harness(throwing, { checkpoints });
    const again = await runTask(job(), spec(), h.deps, 2);
    expect(again).toEqual(first);
    expect(h.tools.calls).toEqual([]);
    expect(h.events.events).toEqual([]);
  });

  it('resumes mid-way: executes the saved model turn with the same key, without asking the model again', async () => {
    const j = job();
    const checkpoints = new MemoryCheckpointStore();
    const savedCall = { id: 'fake-0-0', name: 'demo__get_pods', args: { service: 'checkout' } };
    await checkpoints.save(CKPT, {
      v: 1,
      taskId: TASK_ID,
      step: 1,
      toolRounds: 0,
      invalidOutputs: 0,
      askedToFinish: false,
      messages: [
        { role: 'user', text: `${j.task}\n\n${renderIncident(j.incident)}` },
        { role: 'model', calls: [savedCall] },
      ],
    });
    const model = new Recording(fake());
    const h = harness(model, { checkpoints });
    const result = await runTask(j, spec(), h.deps, 2);
    expect(result.status).toBe('completed');
    expect(h.tools.calls[0]).toMatchObject({ key: `${TASK_ID}-s1-c0`, tool: 'demo__get_pods', args: { service: 'checkout' } });
    expect(h.tools.calls.map((c) => c.key)).toEqual([`${TASK_ID}-s1-c0`, `${TASK_ID}-s2-c0`, `${TASK_ID}-s3-c0`]);
    // The model is asked for steps 2, 3 and 4 only; the first request already carries the answer to the saved call.
    expect(model.requests).toHaveLength(3);
    const firstMessages = model.requests[0]!.messages;
    expect(firstMessages).toHaveLength(3);
    expect(firstMessages[1]).toEqual({ role: 'model', calls: [savedCall] });
    expect(firstMessages[2]).toMatchObject({ role: 'tool', responses: [{ id: 'fake-0-0', name: 'demo__get_pods' }] });
    expect(h.types()).not.toContain('agent.started');
    expect(h.events.events.filter((e) => e.type === 'model.called').map((e) => e.data.step)).toEqual([2, 3, 4]);
  });

  it('throws RetryableTaskError on a retryable model error; the tool round before it is on record as pending', async () => {
    let n = 0;
    const model = scripted(() => {
      n++;
      if (n === 1) return { text: 'pods first', calls: [{ id: 'c1', name: 'demo__get_pods', args: { service: 'checkout' } }] };
      throw new ModelError('rate limited', { retryable: true, status: 429 });
    });
    const checkpoints = new MemoryCheckpointStore();
    const h = harness(model, { checkpoints });
    const err = await runTask(job(), spec(), h.deps, 1).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RetryableTaskError);
    expect((err as RetryableTaskError).cause).toBeInstanceOf(ModelError);
    expect(h.deadLetters).toEqual([]);
    // Saved before the call went out, not after each model call or tool round.
    const saved = (await checkpoints.load(CKPT)) as {
      result?: unknown;
      messages: { role: string }[];
      pending?: { kind: string; keys: string[] };
    };
    expect(saved.result).toBeUndefined();
    expect(saved.messages.map((m) => m.role)).toEqual(['user', 'model']);
    expect(saved.pending).toMatchObject({ kind: 'tools', keys: [`${TASK_ID}-s1-c0`] });

    // The retry re-sends the round under the same key (the gateway answers it from its record)
    // and does not ask the model for that turn again.
    const again = new Recording(fake());
    const h2 = harness(again, { checkpoints });
    const result = await runTask(job(), spec(), h2.deps, 2);
    expect(result.status).toBe('completed');
    expect(h2.tools.calls[0]).toMatchObject({ key: `${TASK_ID}-s1-c0`, tool: 'demo__get_pods' });
    expect(again.requests[0]!.messages.map((m) => m.role)).toEqual(['user', 'model', 'tool']);
    expect((await checkpoints.load(CKPT)) as { toolRounds: number }).toMatchObject({ toolRounds: 3 });
  });

  it('writes nothing when the first model call fails retryably: the task starts again from its job', async () => {
    const model = scripted(() => {
      throw new ModelError('rate limited', { retryable: true, status: 429 });
    });
    const h = harness(model);
    const err = await runTask(job(), spec(), h.deps, 1).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RetryableTaskError);
    expect(await h.checkpoints.load(CKPT)).toBeNull();
  });

  it('saves before each effect only: three writes for a task of two tool rounds', async () => {
    const checkpoints = new MemoryCheckpointStore();
    const writes: string[] = [];
    const counting = Object.assign(Object.create(checkpoints) as MemoryCheckpointStore, {
      save: async (id: string, value: unknown) => {
        const v = value as { pending?: { kind: string }; result?: unknown };
        writes.push(v.result ? 'result' : (v.pending?.kind ?? 'state'));
        return checkpoints.save(id, value);
      },
    });
    const h = harness(fake(), { checkpoints: counting });
    const result = await runTask(job({ fake: { calls: { kubernetes: [PLAN[0]!, PLAN[2]!] } } }), spec(), h.deps, 1);
    expect(result.status).toBe('completed');
    expect(writes).toEqual(['tools', 'tools', 'result']);
  });

  it('stops before the effects of a task the coordinator cancelled: no tool call, a stalled result', async () => {
    let checks = 0;
    let cancelled = false;
    const model = new Recording(fake());
    const h = harness(model);
    h.deps.isCancelled = async () => {
      checks++;
      return cancelled;
    };
    const tools = h.tools;
    const realCall = tools.call.bind(tools);
    // The coordinator gives up while the first call runs.
    tools.call = async (call) => {
      const r = await realCall(call);
      cancelled = true;
      return r;
    };
    const result = await runTask(job(), spec(), h.deps, 1);
    expect(result).toMatchObject({ status: 'stalled', error: 'cancelled' });
    expect(tools.calls.map((c) => c.tool)).toEqual(['demo__get_pods']);
    // Checked before each tool round, not before model calls: the second model turn was made,
    // and its call was not.
    expect(model.requests).toHaveLength(2);
    expect(checks).toBe(2);
    expect(h.deadLetters).toEqual([]);
  });

  it('asks about its run as well as itself, so an operator who cancels the run stops it before any tool call', async () => {
    const h = harness(fake());
    const j = job();
    const asked: [string, string][] = [];
    h.deps.isCancelled = async (taskId, runId) => {
      asked.push([taskId, runId]);
      // The run is cancelled (its key), not this task (its own key is not set).
      return runId === j.runId;
    };
    const result = await runTask(j, spec(), h.deps, 1);
    expect(result).toMatchObject({ status: 'stalled', error: 'cancelled' });
    expect(h.tools.calls).toEqual([]);
    expect(asked).toEqual([[j.taskId, j.runId]]);
  });

  it('fails the task on a non-retryable model error', async () => {
    const h = harness(fake());
    const result = await runTask(job({ fake: { fail: ['kubernetes'] } }), spec(), h.deps, 1);
    expect(result.status).toBe('failed');
    expect(result.error).toMatch(/^model call failed: /);
    expect(isStalled(result.output)).toBe(true);
    expect(h.deadLetters.map((d) => d.input.kind)).toEqual(['failure']);
  });

  it('rejects a corrupt checkpoint with BadCheckpointError', async () => {
    const checkpoints = new MemoryCheckpointStore();
    await checkpoints.save(CKPT, { v: 2 });
    const h = harness(fake(), { checkpoints });
    const err = await runTask(job(), spec(), h.deps, 1).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BadCheckpointError);
    expect((err as BadCheckpointError).message).toContain(CKPT);
    expect((err as BadCheckpointError).code).toBe('bad_checkpoint');
    expect(h.tools.calls).toEqual([]);
  });
});

describe('taskDeadline', () => {
  const at = '2026-01-01T00:10:00.000Z';
  const t = Date.parse(at);
  it('is the job deadline, moved by decided approval waits and by the wait under way', () => {
    expect(taskDeadline(undefined, null)).toBe(Number.POSITIVE_INFINITY);
    expect(taskDeadline(at, null)).toBe(t);
    expect(taskDeadline(at, { approvalWaitMs: 90_000 })).toBe(t + 90_000);
    const parkedAt = '2026-01-01T00:09:00.000Z';
    const pending = { kind: 'approval' as const, step: 1, approvalId: 'ap-1', at: parkedAt };
    // Parked one minute before the deadline: however long the wait, one minute is left after it.
    expect(taskDeadline(at, { approvalWaitMs: 1_000, pending }, t + 3_600_000)).toBe(t + 1_000 + 3_600_000 + 60_000);
    expect(taskDeadline(at, { pending: { kind: 'tools', step: 1, keys: ['k-1'], at: parkedAt } }, t + 5_000)).toBe(t);
  });
});
