import { describe, expect, it } from 'vitest';
import {
  FINISH_TASK_TOOL,
  Incident,
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
import type { Message, Model, ModelRequest, ModelResponse } from '@bosun/models';
import { ApprovalError, ApprovalWaiter, MemoryCheckpointStore, MemoryEventSink, type ToolClient } from '@bosun/transport';

import { APPROVED_CALLS_MARKER, ParkError, runTask, type TaskAgentDeps, type TaskAgentSpec, type TaskPolicy } from './task.js';
import { stepsSoFar } from './task-approval.js';

// The approval step of the task loop, with in-memory ports: a turn that calls an `ask` tool
// parks the task; resumed, it runs what was approved, or — undecided past the timeout — denies it.

const RUN_ID = 'r0123456789abcdef0456';
const TASK_ID = taskIdFor(RUN_ID, 0, 'kubernetes');
const APPROVAL_ID = `ap-${TASK_ID}-s1`;
const OUTPUT = { type: 'object', required: ['summary'], properties: { summary: { type: 'string' } } };

function tool(name: string, readOnly: boolean): CatalogTool {
  const [server, remoteName] = name.split('__') as [string, string];
  return { name, server, remoteName, description: name, inputSchema: { type: 'object' }, annotations: { readOnlyHint: readOnly } };
}

class Tools implements ToolClient {
  readonly calls: ToolCallJob[] = [];
  catalog(): Promise<Catalog> {
    const tools = [tool('demo__get_pods', true), tool('demo__delete_pod', false)];
    return Promise.resolve({ v: 1, updatedAt: new Date(0).toISOString(), tools, unavailable: {} });
  }
  call(call: ToolCallJob): Promise<ToolCallResult> {
    this.calls.push(call);
    return Promise.resolve({
      v: 1,
      key: call.key,
      tool: call.tool,
      status: 'ok',
      isError: false,
      text: `${call.tool} done`,
      durationMs: 1,
    });
  }
}

/** Approvals in memory, with the store's rules for a decision: once, and only while pending. */
class Approvals {
  readonly items = new Map<string, Approval>();
  request(r: ApprovalRequest): Promise<Approval> {
    const a: Approval = { ...r, status: 'pending', calls: r.calls.map((c) => ({ ...c })) };
    if (!this.items.has(a.id)) this.items.set(a.id, a);
    return Promise.resolve(this.items.get(a.id)!);
  }
  get(id: string): Promise<Approval | null> {
    return Promise.resolve(this.items.get(id) ?? null);
  }
  decide(id: string, d: Decision): Promise<Approval> {
    const a = this.items.get(id);
    if (!a) return Promise.reject(new ApprovalError('not_found', `no approval ${id}`));
    if (a.status !== 'pending') return Promise.reject(new ApprovalError('already_decided', `approval ${id} was already decided`));
    const at = new Date().toISOString();
    const decided: Approval = d.approve
      ? {
          ...a,
          status: 'approved',
          approved: d.only ?? a.calls.filter((c) => c.needsApproval).map((c) => c.index),
          decidedBy: d.by,
          decidedAt: at,
        }
      : { ...a, status: 'denied', denyReason: d.reason, decidedBy: d.by, decidedAt: at };
    this.items.set(id, decided);
    return Promise.resolve(decided);
  }
}

/** A model that reads the pods and deletes one in its first turn, then reports. */
function model(): Model & { requests: ModelRequest[] } {
  const requests: ModelRequest[] = [];
  return {
    name: 'scripted',
    requests,
    generate(request: ModelRequest): Promise<ModelResponse> {
      requests.push(structuredClone(request));
      const first = !request.messages.some((m) => m.role === 'model');
      return Promise.resolve(
        first
          ? {
              text: 'The pod is stuck; delete it.',
              calls: [
                { id: 'c0', name: 'demo__get_pods', args: {} },
                { id: 'c1', name: 'demo__delete_pod', args: { name: 'checkout-1' } },
              ],
            }
          : { calls: [{ id: 'f', name: FINISH_TASK_TOOL, args: { summary: 'handled' } }] },
      );
    },
  };
}

const policy: TaskPolicy = {
  offered: (tools) => [...tools],
  stateOf: (t) => (t.name === 'demo__delete_pod' ? 'ask' : 'allow'),
  approvalTimeoutMs: () => 60_000,
};

function job(): TaskJob {
  const incident = parseWith(Incident, { id: 'inc-9', source: 'test', reason: 'PodStuck', summary: 'checkout stuck' }, 'incident');
  return { v: 1, runId: RUN_ID, incidentId: incident.id, taskId: TASK_ID, agent: 'kubernetes', task: 'Unstick checkout.', incident };
}

const spec: TaskAgentSpec = { name: 'kubernetes', tools: ['demo__*'], outputSchema: OUTPUT, maxToolRounds: 4, maxInvalidOutputs: 1 };

function harness(options: { approvals?: boolean } = {}) {
  const checkpoints = new MemoryCheckpointStore();
  const writes: string[] = [];
  const counting = Object.assign(Object.create(checkpoints) as MemoryCheckpointStore, {
    save: (id: string, value: unknown) => {
      const v = value as { pending?: { kind: string }; result?: unknown };
      writes.push(v.result ? 'result' : (v.pending?.kind ?? 'state'));
      return checkpoints.save(id, value);
    },
  });
  const approvals = new Approvals();
  const tools = new Tools();
  const events = new MemoryEventSink();
  const m = model();
  const log = createLogger({ service: 't', level: 'silent' });
  const deps: TaskAgentDeps = {
    model: m,
    tools,
    checkpoints: counting,
    events,
    deadLetters: { add: (input): Promise<DeadLetter> => Promise.reject(new Error(`unexpected dead letter: ${input.reason}`)) },
    log,
    policy,
    // The waiter the service builds (composition root), over the same store.
    ...(options.approvals === false ? {} : { approvals, approvalWaiter: new ApprovalWaiter({ approvals, events, log }) }),
  };
  return { deps, approvals, tools, events, checkpoints, writes, model: m };
}

/** Runs the task until it parks, and returns the ParkError. */
async function parked(h: ReturnType<typeof harness>): Promise<ParkError> {
  const err = await runTask(job(), spec, h.deps, 1).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ParkError);
  return err as ParkError;
}

describe('runTask: the approval step', () => {
  it('proposes the whole turn, saves it, then parks until the timeout with the wait on record; no tool runs', async () => {
    const h = harness();
    const park = await parked(h);
    const a = h.approvals.items.get(APPROVAL_ID)!;
    expect(park.approvalId).toBe(APPROVAL_ID);
    expect(park.until).toBe(Date.parse(a.timeoutAt));
    expect(a.calls.map((c) => [c.index, c.tool, c.needsApproval, c.key])).toEqual([
      [0, 'demo__get_pods', false, `${TASK_ID}-s1-c0`],
      [1, 'demo__delete_pod', true, `${TASK_ID}-s1-c1`],
    ]);
    expect(a.reason).toBe('The pod is stuck; delete it.');
    // The first turn asks: no step of the run before it.
    expect(a.steps).toEqual([]);
    expect(h.tools.calls).toEqual([]);
    // The turn is on record before the request, then the wait.
    expect(h.writes).toEqual(['state', 'approval']);
    const saved = (await h.checkpoints.load(`task:${TASK_ID}`)) as { pending: { kind: string; approvalId: string; step: number } };
    expect(saved.pending).toMatchObject({ kind: 'approval', approvalId: APPROVAL_ID, step: 1 });
    expect(h.events.events.map((e) => e.type)).toEqual(['agent.started', 'model.called', 'approval.requested']);
  });

  it('resumed once approved: runs the turn as proposed, the approved call under the approval, and tells the model', async () => {
    const h = harness();
    await parked(h);
    await h.approvals.decide(APPROVAL_ID, { approve: true, by: 'alice' });
    const result = await runTask(job(), spec, h.deps, 1);
    expect(result).toMatchObject({ status: 'completed', output: { summary: 'handled' } });
    expect(h.tools.calls.map((c) => [c.key, c.tool, c.approvalId])).toEqual([
      [`${TASK_ID}-s1-c0`, 'demo__get_pods', undefined],
      [`${TASK_ID}-s1-c1`, 'demo__delete_pod', APPROVAL_ID],
    ]);
    const told = h.model.requests.at(-1)!.messages.at(-1)!;
    expect(told).toMatchObject({ role: 'user', text: expect.stringContaining(APPROVED_CALLS_MARKER) as string });
    expect(h.writes).toEqual(['state', 'approval', 'tools', 'result']);
    const saved = (await h.checkpoints.load(`task:${TASK_ID}`)) as { approvalWaitMs?: number; pending?: unknown };
    expect(saved.approvalWaitMs).toBeGreaterThanOrEqual(0);
    expect(saved.pending).toBeUndefined();
    // The operator's decision was published by the operator's side, not by the task.
    expect(h.events.events.filter((e) => e.type === 'approval.resolved')).toEqual([]);
  });

  it('resumed past the timeout, undecided: denies it (reason timeout, approval.resolved), runs only what needed no approval', async () => {
    const h = harness();
    await parked(h);
    const a = h.approvals.items.get(APPROVAL_ID)!;
    h.approvals.items.set(APPROVAL_ID, { ...a, timeoutAt: new Date(Date.now() - 1).toISOString() });
    const result = await runTask(job(), spec, h.deps, 1);
    expect(result.status).toBe('completed');
    expect(h.approvals.items.get(APPROVAL_ID)).toMatchObject({
      status: 'denied',
      denyReason: 'timeout',
      decidedBy: 'bosun (approval timeout)',
    });
    expect(h.tools.calls.map((c) => c.tool)).toEqual(['demo__get_pods']);
    const resolved = h.events.events.filter((e) => e.type === 'approval.resolved');
    expect(resolved.map((e) => [e.data.approvalId, e.data.status, e.data.denyReason])).toEqual([[APPROVAL_ID, 'denied', 'timeout']]);
    const conversation = h.model.requests.at(-1)!.messages;
    const answers = conversation.find((m) => m.role === 'tool');
    expect(answers).toMatchObject({
      responses: [{ isError: false }, { isError: true, output: 'Not executed: the operator denied it: timeout.' }],
    });
    expect(conversation.at(-1)).toMatchObject({
      role: 'user',
      text: expect.stringContaining('nobody decided in time (timeout)') as string,
    });
  });

  it('takes a decision made elsewhere first over its own timeout denial', async () => {
    const h = harness();
    await parked(h);
    const a = h.approvals.items.get(APPROVAL_ID)!;
    h.approvals.items.set(APPROVAL_ID, { ...a, timeoutAt: new Date(Date.now() - 1).toISOString() });
    // Decided by an operator between the task's read and its timeout denial.
    const get = h.approvals.get.bind(h.approvals);
    let reads = 0;
    h.approvals.get = async (id) => {
      const found = await get(id);
      if (++reads === 1) await h.approvals.decide(id, { approve: false, reason: 'not today', by: 'bob' });
      return found;
    };
    await runTask(job(), spec, h.deps, 1);
    expect(h.approvals.items.get(APPROVAL_ID)).toMatchObject({ status: 'denied', denyReason: 'not today', decidedBy: 'bob' });
    expect(h.events.events.filter((e) => e.type === 'approval.resolved')).toEqual([]);
    expect(h.model.requests.at(-1)!.messages.at(-1)).toMatchObject({ text: expect.stringContaining('denied: not today') as string });
  });

  it('fails clearly when a tool needs approval and there is no approval store', async () => {
    const h = harness({ approvals: false });
    const err = await runTask(job(), spec, h.deps, 1).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'no_approvals' });
    expect(h.tools.calls).toEqual([]);
  });
});

describe('the run so far an approval shows', () => {
  it('lists each answered call with redacted arguments and its result cut short, the latest 20, not the asking turn', () => {
    const long = 'x'.repeat(400);
    const messages: Message[] = [
      { role: 'user', text: 'checkout is down' },
      { role: 'model', text: 'look first', calls: [{ id: 'c1', name: 'demo__get_pods', args: { ns: 'payments', token: 'sk-secret' } }] },
      { role: 'tool', responses: [{ id: 'c1', name: 'demo__get_pods', output: { pods: ['checkout-1'] } }] },
      { role: 'model', calls: [{ id: 'c2', name: 'demo__logs', args: { pod: 'checkout-1' } }] },
      { role: 'tool', responses: [{ id: 'c2', name: 'demo__logs', output: long, isError: true }] },
      { role: 'model', text: 'delete it', calls: [{ id: 'c3', name: 'demo__delete_pod', args: { pod: 'checkout-1' } }] },
    ];
    const steps = stepsSoFar(messages);
    expect(steps).toEqual([
      { tool: 'demo__get_pods', args: { ns: 'payments', token: '[redacted]' }, result: '{"pods":["checkout-1"]}' },
      { tool: 'demo__logs', args: { pod: 'checkout-1' }, result: `${'x'.repeat(299)}…`, isError: true },
    ]);
    const many: Message[] = Array.from({ length: 25 }, (_, i) => ({
      role: 'tool' as const,
      responses: [{ id: `c${i}`, name: `t${i}`, output: 'ok' }],
    }));
    expect(stepsSoFar(many).map((s) => s.tool)).toEqual(Array.from({ length: 20 }, (_, i) => `t${i + 5}`));
  });
});
