import { describe, expect, it } from 'vitest';
import {
  Incident,
  STALL_MARKER,
  TaskCheckpoint,
  parseWith,
  taskIdFor,
  type Approval,
  type ApprovalRequest,
  type Catalog,
  type CatalogTool,
  type DeadLetter,
  type Decision,
  type TaskJob,
  type ToolCallJob,
  type ToolCallResult,
} from '@bosun/contract';
import { createLogger } from '@bosun/config';
import type { Model, ModelRequest, ModelResponse } from '@bosun/models';
import { ApprovalWaiter, MemoryCheckpointStore, MemoryEventSink, type DeadLetterInput, type ToolClient } from '@bosun/transport';

import { runCodeActTask } from './codeact.js';
import { extractScript, usageLine } from './codeact-prompt.js';
import { ParkError, type TaskAgentDeps, type TaskAgentSpec, type TaskPolicy } from './task.js';

// The CodeAct loop with in-memory ports: a gateway fake that records each real application by
// key (a repeated key is answered from its record, as the gateway does), a checkpoint store that
// can "die" at a given save, and approvals in memory.

const RUN_ID = 'r0123456789abcdef0789';
const TASK_ID = taskIdFor(RUN_ID, 0, 'ops');
const CKPT = `task:${TASK_ID}`;
const OUTPUT = { type: 'object', required: ['total'], properties: { total: { type: 'number' }, note: { type: 'string' } } };

function tool(name: string, readOnly = false): CatalogTool {
  const [server, remoteName] = name.split('__') as [string, string];
  return {
    name,
    server,
    remoteName,
    description: `${remoteName} of the counter`,
    inputSchema: { type: 'object', required: ['n'], properties: { n: { type: 'number', description: 'how much' } } },
    annotations: { readOnlyHint: readOnly },
  };
}

/** The gateway: `add` adds n to a counter and answers the new total; each key is applied once. */
class Gateway implements ToolClient {
  readonly sent: ToolCallJob[] = [];
  readonly applied = new Map<string, number>();
  private readonly records = new Map<string, ToolCallResult>();
  total = 0;
  async catalog(): Promise<Catalog> {
    return {
      v: 1,
      updatedAt: new Date(0).toISOString(),
      tools: [tool('calc__add'), tool('calc__read', true), tool('calc__reset')],
      unavailable: {},
    };
  }
  async call(call: ToolCallJob): Promise<ToolCallResult> {
    this.sent.push(call);
    const recorded = this.records.get(call.key);
    if (recorded) return recorded;
    this.applied.set(call.key, (this.applied.get(call.key) ?? 0) + 1);
    if (call.tool === 'calc__add') this.total += call.args.n as number;
    if (call.tool === 'calc__reset') this.total = 0;
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

class Approvals {
  readonly items = new Map<string, Approval>();
  request(r: ApprovalRequest): Promise<Approval> {
    if (!this.items.has(r.id)) this.items.set(r.id, { ...r, status: 'pending', calls: r.calls.map((c) => ({ ...c })) });
    return Promise.resolve(this.items.get(r.id)!);
  }
  get(id: string): Promise<Approval | null> {
    return Promise.resolve(this.items.get(id) ?? null);
  }
  decide(id: string, d: Decision): Promise<Approval> {
    const a = this.items.get(id)!;
    const at = new Date().toISOString();
    const decided: Approval = d.approve
      ? { ...a, status: 'approved', approved: a.calls.map((c) => c.index), decidedBy: d.by, decidedAt: at }
      : { ...a, status: 'denied', denyReason: d.reason, decidedBy: d.by, decidedAt: at };
    this.items.set(id, decided);
    return Promise.resolve(decided);
  }
}

/** A model that writes `scripts[turn]` in a fenced block, and records what it was asked. */
function scripts(...list: string[]): Model & { requests: ModelRequest[] } {
  const requests: ModelRequest[] = [];
  return {
    name: 'scripted',
    requests,
    generate(request: ModelRequest): Promise<ModelResponse> {
      requests.push(structuredClone(request));
      const turn = request.messages.filter((m) => m.role === 'model').length;
      const script = list[turn];
      return Promise.resolve({
        text: script === undefined ? 'I am not sure what to do.' : `Here:\n\`\`\`js\n${script}\n\`\`\``,
        calls: [],
      });
    },
  };
}

function job(over: Record<string, unknown> = {}): TaskJob {
  const incident = parseWith(Incident, { id: 'inc-11', source: 'test', reason: 'Drift', summary: 'counter drift', ...over }, 'incident');
  return { v: 1, runId: RUN_ID, incidentId: incident.id, taskId: TASK_ID, agent: 'ops', task: 'Fix the counter.', incident };
}

const spec = (over: Partial<TaskAgentSpec> = {}): TaskAgentSpec => ({
  name: 'ops',
  tools: ['calc__*'],
  outputSchema: OUTPUT,
  maxToolRounds: 4,
  maxInvalidOutputs: 1,
  loop: 'codeact',
  stallPayload: { note: '${stallText}' },
  ...over,
});

function harness(model: Model, shared: { gateway?: Gateway; checkpoints?: Checkpoints; approvals?: Approvals; policy?: TaskPolicy } = {}) {
  const gateway = shared.gateway ?? new Gateway();
  const checkpoints = shared.checkpoints ?? new Checkpoints();
  const approvals = shared.approvals ?? new Approvals();
  const events = new MemoryEventSink();
  const deadLetters: DeadLetterInput[] = [];
  const log = createLogger({ service: 't', level: 'silent' });
  const deps: TaskAgentDeps = {
    model,
    tools: gateway,
    checkpoints,
    events,
    approvals,
    approvalWaiter: new ApprovalWaiter({ approvals, events, log }),
    deadLetters: {
      add: async (input: DeadLetterInput): Promise<DeadLetter> => {
        deadLetters.push(input);
        return { v: 1, marker: STALL_MARKER, at: new Date(0).toISOString(), ...input };
      },
    },
    log,
    ...(shared.policy ? { policy: shared.policy } : {}),
  };
  const of = (type: string) => events.events.filter((e) => e.type === type);
  return { deps, gateway, checkpoints, approvals, events, deadLetters, of };
}

const FIVE =
  [1, 2, 3, 4, 5].map((n) => `call_tool("calc__add", { n: ${n} });`).join('\n') +
  '\nreturn { final_result: call_tool("calc__read", { n: 0 }) };';

describe('runCodeActTask', () => {
  it('chains three tools in one model turn and completes with the final result', async () => {
    const h = harness(
      scripts(
        'const a = call_tool("calc__add", { n: 2 });\nconst b = call_tool("calc__add", { n: a.total * 10 });\nconsole.log("b", b.total);\nreturn { final_result: call_tool("calc__read", { n: 0 }) };',
      ),
    );
    const result = await runCodeActTask(job(), spec(), h.deps, 1);
    expect(result).toMatchObject({ status: 'completed', output: { total: 22 }, agent: 'ops' });
    expect(h.gateway.sent.map((c) => [c.key, c.tool])).toEqual([
      [`${TASK_ID}-s1-c0`, 'calc__add'],
      [`${TASK_ID}-s1-c1`, 'calc__add'],
      [`${TASK_ID}-s1-c2`, 'calc__read'],
    ]);
    expect(h.of('model.called')).toHaveLength(1);
    expect(h.of('codeact.script')[0]?.data).toMatchObject({ step: 1 });
    expect(h.of('codeact.result')[0]?.data).toMatchObject({ tag: 'final_result', toolCalls: 3 });
    expect(h.of('codeact.output')[0]?.data.console).toBe('b 22\n');
    expect(h.of('agent.completed')).toHaveLength(1);
  });

  it('shows the tools as call_tool usage lines and asks in codeact mode', async () => {
    const m = scripts('return { final_result: { total: 0 } };');
    await runCodeActTask(job(), spec(), harness(m).deps, 1);
    const req = m.requests[0]!;
    expect(req).toMatchObject({ mode: 'codeact', tools: [], outputSchema: OUTPUT });
    expect(req.system).toContain('- call_tool("calc__add", { n: number /* how much */ }) — add of the counter');
    expect(usageLine(tool('x__y'))).toBe('- call_tool("x__y", { n: number /* how much */ }) — y of the counter');
    expect(extractScript('text\n```javascript\nreturn 1;\n```\nmore')).toBe('return 1;');
    expect(extractScript('no script here')).toBeUndefined();
  });

  it('gives script errors, observations and limits back to the model, and the loop goes on', async () => {
    const m = scripts(
      'call_tool("calc__nope", {});',
      'for (;;) {}',
      'return { observation: call_tool("calc__read", { n: 0 }) };',
      'return { final_result: { total: 7 } };',
    );
    const h = harness(m);
    const result = await runCodeActTask(
      job(),
      spec({ codeact: { timeMs: 200, memoryMb: 32, stackKb: 128, maxToolCalls: 5, maxOutputChars: 1000, maxConsoleChars: 1000 } }),
      h.deps,
      1,
    );
    expect(result).toMatchObject({ status: 'completed', output: { total: 7 } });
    const texts = m.requests[3]!.messages.filter((x) => x.role === 'user').map((x) => (x.role === 'user' ? x.text : ''));
    expect(texts[1]).toMatch(/^Your script failed: Error: call_tool: unknown tool "calc__nope"/);
    expect(texts[2]).toMatch(/^Your script failed: .*time limit/);
    expect(texts[3]).toBe('Observation:\n{\n "total": 0\n}');
    expect(h.of('codeact.limit').map((e) => e.data.limit)).toEqual(['time']);
  });

  it('corrects a final_result that does not match the schema, then fails past maxInvalidOutputs', async () => {
    const ok = harness(scripts('return { final_result: { total: "many" } };', 'return { final_result: { total: 3 } };'));
    expect(await runCodeActTask(job(), spec(), ok.deps, 1)).toMatchObject({ status: 'completed', output: { total: 3 } });
    const bad = harness(scripts('return { final_result: {} };', 'return { final_result: { total: "x" } };'));
    const result = await runCodeActTask(job(), spec(), bad.deps, 1);
    expect(result).toMatchObject({ status: 'failed' });
    expect(result.error).toMatch(/final_result did not match the output schema 2 times/);
    expect(bad.deadLetters.map((d) => d.kind)).toEqual(['failure']);
  });

  it('a turn without a script is a stall, with its dead letter', async () => {
    const h = harness(scripts());
    const result = await runCodeActTask(job(), spec(), h.deps, 1);
    expect(result).toMatchObject({ status: 'stalled', lastWords: 'I am not sure what to do.' });
    expect(h.deadLetters[0]).toMatchObject({ kind: 'stall', reason: 'ops ended its turn without a script' });
  });

  it('transfer_to_agent ends the task asking for another specialist', async () => {
    const h = harness(scripts('return { transfer_to_agent: { agent: "database", reason: "it is the DB" } };'));
    const result = await runCodeActTask(job(), spec(), h.deps, 1);
    expect(result).toMatchObject({ status: 'stalled', transfer: { agent: 'database', reason: 'it is the DB' } });
  });

  it('refuses more than 128 tools', async () => {
    const many: TaskPolicy = {
      offered: () => Array.from({ length: 129 }, (_, i) => tool(`calc__t${i}`)),
      stateOf: () => 'allow',
      approvalTimeoutMs: () => 1,
    };
    const h = harness(scripts('return { final_result: { total: 0 } };'), { policy: many });
    const result = await runCodeActTask(job(), spec(), h.deps, 1);
    expect(result).toMatchObject({ status: 'failed' });
    expect(result.error).toMatch(/129 tools .* limit is 128/);
  });

  it('a script killed between calls resumes elsewhere: answered calls from the journal, the unanswered one from the gateway record, each effect once', async () => {
    const gateway = new Gateway();
    const checkpoints = new Checkpoints();
    // Saves: 1 before call 0, 2 before call 1, 3 before call 2 → dies after call 1 took effect.
    checkpoints.dieAt = 3;
    const first = harness(scripts(FIVE), { gateway, checkpoints });
    await expect(runCodeActTask(job(), spec(), first.deps, 1)).rejects.toThrow('process killed');
    expect([...gateway.applied.keys()]).toEqual([`${TASK_ID}-s1-c0`, `${TASK_ID}-s1-c1`]);

    checkpoints.saves = 0;
    checkpoints.dieAt = 4; // second life: dies again before call 4 (after call 3 took effect)
    const second = harness(scripts(FIVE), { gateway, checkpoints });
    await expect(runCodeActTask(job(), spec(), second.deps, 2)).rejects.toThrow('process killed');

    checkpoints.dieAt = undefined;
    const third = harness(scripts(FIVE), { gateway, checkpoints });
    const result = await runCodeActTask(job(), spec(), third.deps, 3);
    expect(result).toMatchObject({ status: 'completed', output: { total: 15 } });
    expect([...gateway.applied.values()]).toEqual([1, 1, 1, 1, 1, 1]);
    expect(gateway.total).toBe(15);
    const replays = third.of('codeact.replayed').filter((e) => e.data.key);
    expect(replays.map((e) => [e.data.index, e.data.source])).toEqual([
      [0, 'journal'],
      [1, 'journal'],
      [2, 'journal'],
      [3, 'gateway'],
    ]);
    // No model call was made again: the script of step 1 was replayed.
    expect(third.of('model.called')).toHaveLength(0);
  });

  it('replays Math.random and Date.now from the journal, so a replay asks for the same calls', async () => {
    const script =
      'const a = call_tool("calc__add", { n: Math.round(Math.random() * 1000) + Date.now() % 7 });\ncall_tool("calc__add", { n: 1 });\nreturn { final_result: call_tool("calc__read", { n: 0 }) };';
    const gateway = new Gateway();
    const checkpoints = new Checkpoints();
    checkpoints.dieAt = 3;
    await expect(runCodeActTask(job(), spec(), harness(scripts(script), { gateway, checkpoints }).deps, 1)).rejects.toThrow(
      'process killed',
    );
    checkpoints.dieAt = undefined;
    const h = harness(scripts(script), { gateway, checkpoints });
    const result = await runCodeActTask(job(), spec(), h.deps, 2);
    expect(result.status).toBe('completed');
    expect([...gateway.applied.values()]).toEqual([1, 1, 1]);
    expect(h.deadLetters).toEqual([]);
  });

  it('a replay that asks for another call at the same position ends INCOMPLETE naming it, without executing it', async () => {
    const gateway = new Gateway();
    const checkpoints = new Checkpoints();
    checkpoints.dieAt = 2;
    await expect(runCodeActTask(job(), spec(), harness(scripts(FIVE), { gateway, checkpoints }).deps, 1)).rejects.toThrow('process killed');
    // Another attempt wrote this journal with other arguments at call 0.
    const ckpt = TaskCheckpoint.parse(await checkpoints.load(CKPT), CKPT)!;
    ckpt.codeact!.calls[0]!.args = { n: 100 };
    checkpoints.dieAt = undefined;
    await checkpoints.save(CKPT, ckpt);
    const sentBefore = gateway.sent.length;
    const h = harness(scripts(FIVE), { gateway, checkpoints });
    const result = await runCodeActTask(job(), spec(), h.deps, 2);
    expect(result.status).toBe('failed');
    expect(result.error).toMatch(/non-deterministic script: at step 1, call 0 \(key .*-s1-c0\)/);
    expect(gateway.sent.length).toBe(sentBefore);
    expect(h.deadLetters.map((d) => d.kind)).toEqual(['failure']);
  });

  describe('approvals inside scripts', () => {
    const policy: TaskPolicy = {
      offered: (t) => [...t],
      stateOf: (t) => (t.name === 'calc__reset' ? 'ask' : 'allow'),
      approvalTimeoutMs: () => 60_000,
    };
    const script = [
      'call_tool("calc__add", { n: 5 });',
      'let note = "reset";',
      'try { call_tool("calc__reset", { n: 0 }); } catch (e) { note = e.message; }',
      'call_tool("calc__add", { n: 1 });',
      'console.log(note);',
      'return { final_result: call_tool("calc__read", { n: 0 }) };',
    ].join('\n');

    async function parked() {
      const shared = { gateway: new Gateway(), checkpoints: new Checkpoints(), approvals: new Approvals(), policy };
      const first = harness(scripts(script), shared);
      const err = await runCodeActTask(job(), spec(), first.deps, 1).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ParkError);
      const id = `ap-${TASK_ID}-s1-c1`;
      expect(shared.approvals.items.get(id)).toMatchObject({
        status: 'pending',
        calls: [{ index: 1, tool: 'calc__reset', key: `${TASK_ID}-s1-c1` }],
      });
      expect(shared.gateway.sent.map((c) => c.tool)).toEqual(['calc__add']);
      // The run so far: the script's earlier call, with its answer.
      expect(shared.approvals.items.get(id)!.steps).toEqual([{ tool: 'calc__add', args: { n: 5 }, result: expect.any(String) }]);
      return { shared, id };
    }

    it('approved: the script replays up to the call and goes on with its result', async () => {
      const { shared, id } = await parked();
      await shared.approvals.decide(id, { approve: true, by: 'alice' });
      const h = harness(scripts(script), shared);
      const result = await runCodeActTask(job(), spec(), h.deps, 1);
      expect(result).toMatchObject({ status: 'completed', output: { total: 1 } });
      expect(shared.gateway.sent.find((c) => c.tool === 'calc__reset')).toMatchObject({ approvalId: id });
      expect([...shared.gateway.applied.values()]).toEqual([1, 1, 1, 1]);
    });

    it("stores the tool's rule of several people, the run's requester and the incident, as the task loop does", async () => {
      const ruled: TaskPolicy = {
        ...policy,
        approvalRule: (t) => ({ required: t.name === 'calc__reset' ? 2 : 1, distinctFrom: 'requester' }),
      };
      const shared = { gateway: new Gateway(), checkpoints: new Checkpoints(), approvals: new Approvals(), policy: ruled };
      const err = await runCodeActTask(job({ requestedBy: 'carol' }), spec(), harness(scripts(script), shared).deps, 1).catch(
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ParkError);
      expect(shared.approvals.items.get(`ap-${TASK_ID}-s1-c1`)).toMatchObject({
        rule: { required: 2, distinctFrom: 'requester' },
        requester: 'carol',
        incident: { id: 'inc-11', title: 'counter drift', source: 'test' },
      });
      // Without a rule, as before rules existed: nothing stored.
      const { shared: plain, id } = await parked();
      expect(plain.approvals.items.get(id)!.rule).toBeUndefined();
    });

    it('denied: the script catches the denial and the result says so', async () => {
      const { shared, id } = await parked();
      await shared.approvals.decide(id, { approve: false, reason: 'not now', by: 'bob' });
      const h = harness(scripts(script), shared);
      const result = await runCodeActTask(job(), spec(), h.deps, 1);
      expect(result).toMatchObject({ status: 'completed', output: { total: 6 } });
      expect(h.of('codeact.output')[0]?.data.console).toMatch(/not executed: the operator denied it: not now/);
      expect(shared.gateway.sent.some((c) => c.tool === 'calc__reset')).toBe(false);
    });
  });
});
