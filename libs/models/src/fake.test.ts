import { describe, expect, it } from 'vitest';
import { FINISH_TASK_TOOL } from '@bosun/contract';
import { validateAgainstSchema } from '@bosun/config';

import { FakeModel, type FakeModelOptions } from './fake.js';
import { delegateToolName, renderIncident } from './prompt.js';
import { estimateTokens } from './resilient.js';
import { ModelError, type Message, type ModelRequest, type ModelResponse, type ToolDeclaration } from './types.js';

/** The demo specialists' report schema (infra/demo/bosun.yaml). */
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
    suspectedCause: { type: 'string' },
    recommendedAction: { type: 'string' },
  },
};

/** The demo config's routes and plans. */
const OPTIONS: FakeModelOptions = {
  routes: { PodCrashLooping: ['kubernetes'], HighLatency: ['database'], ErrorRateHigh: ['kubernetes', 'database'] },
  defaultRoute: ['kubernetes'],
  plans: {
    kubernetes: [
      { tool: 'demo__get_pods', args: { service: '${labels.service}' } },
      { tool: 'demo__get_logs', args: { service: '${labels.service}', lines: 10 } },
      { tool: 'demo__get_deployments', args: { service: '${labels.service}' } },
    ],
    database: [
      { tool: 'demo__get_metrics', args: { service: '${labels.service}', window: '1h' } },
      { tool: 'demo__get_logs', args: { service: '${labels.service}', lines: 10 } },
    ],
  },
};

const tool = (name: string): ToolDeclaration => ({ name, description: name, parameters: { type: 'object', properties: {} } });
const FINISH: ToolDeclaration = { name: FINISH_TASK_TOOL, description: 'report', parameters: REPORT };
const TASK_TOOLS: ToolDeclaration[] = [
  tool('demo__get_pods'),
  tool('demo__get_logs'),
  tool('demo__get_deployments'),
  tool('demo__get_metrics'),
  FINISH,
];

function incident(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: 'inc-42',
    source: 'alertmanager',
    reason: 'PodCrashLooping',
    summary: 'checkout pods restart',
    severity: 'warning',
    labels: { service: 'checkout' },
    ...extra,
  };
}

/** The first user message, as the agent loop writes it. */
function firstMessage(inc: Record<string, unknown>): Message {
  return { role: 'user', text: `Investigate this incident.\n\n${renderIncident(inc)}` };
}

function taskRequest(agent: string, messages: Message[], tools: ToolDeclaration[] = TASK_TOOLS): ModelRequest {
  return { agent, mode: 'task', system: 'be useful', messages, tools };
}

/** What each tool "returns" in the simulated loop. */
function toolOutput(name: string, args: Record<string, unknown>): unknown {
  return { tool: name, service: args.service, ok: true };
}

/**
 * The agent loop, simulated: ask, record the model turn, answer its tool calls (finish_task
 * with an error when its output does not validate), until a valid finish_task or a text-only turn.
 */
async function simulate(model: FakeModel, agent: string, inc: Record<string, unknown>, tools = TASK_TOOLS, maxTurns = 10) {
  const messages: Message[] = [firstMessage(inc)];
  const turns: ModelResponse[] = [];
  for (let i = 0; i < maxTurns; i++) {
    const response = await model.generate(taskRequest(agent, [...messages], tools));
    turns.push(response);
    messages.push({
      role: 'model',
      ...(response.text ? { text: response.text } : {}),
      ...(response.calls.length ? { calls: response.calls } : {}),
    });
    if (response.calls.length === 0) break;
    const finish = response.calls.find((c) => c.name === FINISH_TASK_TOOL);
    if (finish) {
      const problem = validateAgainstSchema(REPORT, finish.args);
      if (problem === null) break;
      messages.push({ role: 'tool', responses: [{ id: finish.id, name: finish.name, isError: true, output: `invalid: ${problem}` }] });
      continue;
    }
    messages.push({ role: 'tool', responses: response.calls.map((c) => ({ id: c.id, name: c.name, output: toolOutput(c.name, c.args) })) });
  }
  return { turns, messages };
}

describe('FakeModel: classifier (single mode)', () => {
  const classify = (inc: Record<string, unknown>) =>
    new FakeModel(OPTIONS).generate({ agent: 'coordinator', mode: 'single', messages: [firstMessage(inc)], tools: [] });

  it('picks payload.fake.route first', async () => {
    const r = await classify(incident({ payload: { fake: { route: ['database', 'nobody'] } } }));
    expect(r.calls).toEqual([]);
    expect(JSON.parse(r.text ?? '')).toEqual({ specialists: ['database', 'nobody'] });
  });

  it('takes payload.fake.slowMs[agent] per call, for that agent only', async () => {
    const inc = incident({ payload: { fake: { slowMs: { coordinator: 150, database: 60_000, kubernetes: 'x' } } } });
    const t0 = Date.now();
    await classify(inc);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(140);
    // kubernetes is not slowed ('x' is not a number); database would take a minute.
    const k = new FakeModel(OPTIONS).generate(taskRequest('kubernetes', [firstMessage(inc)]));
    const d = new FakeModel(OPTIONS).generate(taskRequest('database', [firstMessage(inc)]));
    const first = await Promise.race([k.then(() => 'kubernetes'), d.then(() => 'database')]);
    expect(first).toBe('kubernetes');
  });

  it('routes by reason', async () => {
    const r = await classify(incident({ reason: 'ErrorRateHigh' }));
    expect(JSON.parse(r.text ?? '')).toEqual({ specialists: ['kubernetes', 'database'] });
    const h = await classify(incident({ reason: 'HighLatency' }));
    expect(JSON.parse(h.text ?? '')).toEqual({ specialists: ['database'] });
  });

  it('falls back to the default route', async () => {
    const r = await classify(incident({ reason: 'DiskFull' }));
    expect(JSON.parse(r.text ?? '')).toEqual({ specialists: ['kubernetes'] });
  });

  it('reports its name and a usage estimate', async () => {
    const r = await classify(incident());
    expect(r.model).toBe('fake');
    expect(r.usage?.inputTokens).toBeGreaterThan(0);
    expect(r.usage?.totalTokens).toBe((r.usage?.inputTokens ?? 0) + (r.usage?.outputTokens ?? 0));
  });
});

describe('FakeModel: usage', () => {
  it('counts the tool declarations as input, as providers bill them: the same estimate the loops fit requests with', async () => {
    const tools: ToolDeclaration[] = [
      { name: 'demo__get_pods', description: 'List the pods of a service.'.repeat(20), parameters: { type: 'object', properties: {} } },
    ];
    const base: ModelRequest = {
      agent: 'kubernetes',
      mode: 'task',
      system: 'Investigate.',
      messages: [{ role: 'user', text: 'go' }],
      tools: [],
    };
    const without = await new FakeModel(OPTIONS).generate(base);
    const withTools = await new FakeModel(OPTIONS).generate({ ...base, tools });
    expect(withTools.usage?.inputTokens).toBe(estimateTokens({ ...base, tools }));
    expect((withTools.usage?.inputTokens ?? 0) - (without.usage?.inputTokens ?? 0)).toBeGreaterThanOrEqual(
      Math.floor(JSON.stringify(tools).length / 4),
    );
  });
});

describe('FakeModel: task mode', () => {
  it('calls the planned tools in order, once each, then finishes with a valid report', async () => {
    const { turns } = await simulate(new FakeModel(OPTIONS), 'kubernetes', incident());
    expect(turns).toHaveLength(4);
    for (const t of turns) expect(t.calls).toHaveLength(1);
    expect(turns.slice(0, 3).map((t) => [t.calls[0]!.name, t.calls[0]!.args])).toEqual([
      ['demo__get_pods', { service: 'checkout' }],
      ['demo__get_logs', { service: 'checkout', lines: 10 }],
      ['demo__get_deployments', { service: 'checkout' }],
    ]);
    // Call ids are unique within the conversation.
    expect(new Set(turns.map((t) => t.calls[0]!.id)).size).toBe(4);
    const finish = turns[3]!.calls[0]!;
    expect(finish.name).toBe(FINISH_TASK_TOOL);
    expect(validateAgainstSchema(FINISH.parameters, finish.args)).toBeNull();
    // One finding per tool result, titled with the tool.
    const findings = finish.args.findings as { title: string; detail: string }[];
    expect(findings.map((f) => f.title)).toEqual(['demo__get_pods', 'demo__get_logs', 'demo__get_deployments']);
    expect(findings[0]!.detail).toContain('checkout');
    expect(finish.args.evidence).toHaveLength(3);
    expect(String(finish.args.summary)).toContain('inc-42');
  });

  it('judges what is done from the answered calls in the history', async () => {
    const model = new FakeModel(OPTIONS);
    const asked: Message[] = [
      firstMessage(incident()),
      { role: 'model', calls: [{ id: 'x-1', name: 'demo__get_pods', args: { service: 'checkout' } }] },
    ];
    // The call was made but never answered: it is still to do.
    const unanswered = await model.generate(taskRequest('kubernetes', asked));
    expect(unanswered.calls[0]?.name).toBe('demo__get_pods');
    const answered = await model.generate(
      taskRequest('kubernetes', [...asked, { role: 'tool', responses: [{ id: 'x-1', name: 'demo__get_pods', output: 'pods' }] }]),
    );
    expect(answered.calls.map((c) => [c.name, c.args])).toEqual([['demo__get_logs', { service: 'checkout', lines: 10 }]]);
  });

  it('a call with other arguments than planned does not count as done', async () => {
    const model = new FakeModel(OPTIONS);
    const r = await model.generate(
      taskRequest('kubernetes', [
        firstMessage(incident()),
        { role: 'model', calls: [{ id: 'x-1', name: 'demo__get_pods', args: { service: 'payments' } }] },
        { role: 'tool', responses: [{ id: 'x-1', name: 'demo__get_pods', output: 'pods' }] },
      ]),
    );
    expect(r.calls[0]?.name).toBe('demo__get_pods');
    expect(r.calls[0]?.args).toEqual({ service: 'checkout' });
  });

  it('leaves a template the incident cannot fill as written', async () => {
    const { labels: _drop, ...noLabels } = incident();
    const r = await new FakeModel(OPTIONS).generate(taskRequest('kubernetes', [firstMessage(noLabels)]));
    expect(r.calls[0]?.args).toEqual({ service: '${labels.service}' });
  });

  it('follows payload.fake.calls over the configured plan', async () => {
    const inc = incident({ payload: { fake: { calls: { kubernetes: [{ tool: 'demo__get_logs', args: { service: 'svc-${id}' } }] } } } });
    const { turns } = await simulate(new FakeModel(OPTIONS), 'kubernetes', inc);
    expect(turns.map((t) => t.calls[0]?.name)).toEqual(['demo__get_logs', FINISH_TASK_TOOL]);
    expect(turns[0]!.calls[0]!.args).toEqual({ service: 'svc-inc-42' });
  });

  it('with no plan, finishes at once with a valid report that says there were no results', async () => {
    const { turns } = await simulate(new FakeModel(), 'kubernetes', incident());
    expect(turns).toHaveLength(1);
    const finish = turns[0]!.calls[0]!;
    expect(finish.name).toBe(FINISH_TASK_TOOL);
    expect(finish.args).toEqual({ summary: 'No tool results for incident inc-42.', findings: [], evidence: [] });
  });

  it('finishes at once when only finish_task is offered', async () => {
    const r = await new FakeModel(OPTIONS).generate(taskRequest('kubernetes', [firstMessage(incident())], [FINISH]));
    expect(r.calls).toHaveLength(1);
    expect(r.calls[0]!.name).toBe(FINISH_TASK_TOOL);
    expect(validateAgainstSchema(REPORT, r.calls[0]!.args)).toBeNull();
  });

  it('stalls (text, no calls) when told to by payload.fake.stall', async () => {
    const inc = incident({ payload: { fake: { stall: ['kubernetes'] } } });
    const r = await new FakeModel(OPTIONS).generate(taskRequest('kubernetes', [firstMessage(inc)]));
    expect(r.calls).toEqual([]);
    expect(r.text).toMatch(/\?$/);
    // Only the named agent stalls.
    const other = await new FakeModel(OPTIONS).generate(taskRequest('database', [firstMessage(inc)]));
    expect(other.calls[0]?.name).toBe('demo__get_metrics');
  });

  it('throws a non-retryable ModelError when told to by payload.fake.fail', async () => {
    const inc = incident({ payload: { fake: { fail: ['kubernetes'] } } });
    const model = new FakeModel(OPTIONS);
    const err = await model.generate(taskRequest('kubernetes', [firstMessage(inc)])).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelError);
    expect((err as ModelError).retryable).toBe(false);
    await expect(model.generate(taskRequest('database', [firstMessage(inc)]))).resolves.toBeDefined();
  });

  it('gives an invalid finish_task output first when told to by payload.fake.invalid, then a valid one', async () => {
    const inc = incident({ payload: { fake: { invalid: ['kubernetes'] } } });
    const { turns, messages } = await simulate(new FakeModel(), 'kubernetes', inc);
    expect(turns).toHaveLength(2);
    expect(turns[0]!.calls[0]!.name).toBe(FINISH_TASK_TOOL);
    expect(validateAgainstSchema(REPORT, turns[0]!.calls[0]!.args)).not.toBeNull();
    expect(messages[2]).toMatchObject({ role: 'tool', responses: [{ name: FINISH_TASK_TOOL, isError: true }] });
    expect(turns[1]!.calls[0]!.name).toBe(FINISH_TASK_TOOL);
    expect(validateAgainstSchema(REPORT, turns[1]!.calls[0]!.args)).toBeNull();
  });

  it('answers the same request identically, across instances', async () => {
    const inc = incident({ reason: 'ErrorRateHigh' });
    const messages: Message[] = [
      firstMessage(inc),
      { role: 'model', calls: [{ id: 'fake-0-0', name: 'demo__get_pods', args: { service: 'checkout' } }] },
      { role: 'tool', responses: [{ id: 'fake-0-0', name: 'demo__get_pods', output: { pods: 3 } }] },
    ];
    const a = await new FakeModel(OPTIONS).generate(taskRequest('kubernetes', messages));
    const b = await new FakeModel(OPTIONS).generate(taskRequest('kubernetes', structuredClone(messages)));
    expect(b).toEqual(a);
    expect(a.calls[0]!.name).toBe('demo__get_logs');
    // And a whole simulated run is identical too.
    const r1 = await simulate(new FakeModel(OPTIONS), 'database', inc);
    const r2 = await simulate(new FakeModel(OPTIONS), 'database', inc);
    expect(r2.turns).toEqual(r1.turns);
  });
});

describe('FakeModel: chat mode (delegating coordinator)', () => {
  const delegates = ['kubernetes', 'database'].map((n) => tool(delegateToolName(n)));
  const chat = (model: FakeModel, messages: Message[], tools = delegates) =>
    model.generate({ agent: 'coordinator', mode: 'chat', messages, tools });

  it('delegates to every routed specialist in one turn, then answers with text', async () => {
    const model = new FakeModel(OPTIONS);
    const messages: Message[] = [firstMessage(incident({ reason: 'ErrorRateHigh' }))];
    const first = await chat(model, messages);
    expect(first.text).toBeUndefined();
    expect(first.calls.map((c) => c.name)).toEqual(['delegate_kubernetes', 'delegate_database']);
    expect(new Set(first.calls.map((c) => c.id)).size).toBe(2);
    for (const c of first.calls) expect(String(c.args.task)).toContain('inc-42');
    messages.push({ role: 'model', calls: first.calls });
    messages.push({
      role: 'tool',
      responses: [
        { id: first.calls[0]!.id, name: 'delegate_kubernetes', output: 'pods OOMKilled' },
        { id: first.calls[1]!.id, name: 'delegate_database', output: 'pool exhausted' },
      ],
    });
    const second = await chat(model, messages);
    expect(second.calls).toEqual([]);
    expect(second.text).toContain('inc-42');
    expect(second.text).toContain('kubernetes: pods OOMKilled');
    expect(second.text).toContain('database: pool exhausted');
  });

  it('delegates only to the routed specialist', async () => {
    const r = await chat(new FakeModel(OPTIONS), [firstMessage(incident({ reason: 'HighLatency' }))]);
    expect(r.calls.map((c) => c.name)).toEqual(['delegate_database']);
  });

  it('answers at once when no tools are offered (final round)', async () => {
    const r = await chat(new FakeModel(OPTIONS), [firstMessage(incident({ reason: 'ErrorRateHigh' }))], []);
    expect(r.calls).toEqual([]);
    expect(r.text).toContain('no specialist reported');
  });
});
