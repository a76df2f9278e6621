import { ThrottledError } from '@bosun/models';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { DelayedError, UnrecoverableError, type Job } from 'bullmq';
import { BosunError, STALL_MARKER, isStalled, taskIdFor, type TaskJob, type TaskResult } from '@bosun/contract';
import { createLogger, defaultConfigFile, loadClusterConfig, specialistConfig } from '@bosun/config';
import { ParkError, RetryableTaskError, YieldError, runTask } from '@bosun/agent';
import type * as Agent from '@bosun/agent';
import { FakeModel, type Model } from '@bosun/models';
import {
  MemoryCheckpointStore,
  MemoryEventSink,
  metrics,
  type ApprovalStore,
  type DeadLetterInput,
  type ToolClient,
} from '@bosun/transport';
import { localSpecialist, specialistProcessor, taskStatus, type SpecialistDeps } from './specialist.js';

// The specialist's glue (BullMQ job ↔ the task loop), with the task loop stubbed and in-memory
// stand-ins for the job API and the stores: what each outcome of the loop does to the job.

vi.mock('@bosun/agent', async (importOriginal) => ({ ...(await importOriginal<typeof Agent>()), runTask: vi.fn() }));
const runTaskMock = vi.mocked(runTask);

const RUN_ID = 'r0123456789abcdef0123';
const TASK_ID = taskIdFor(RUN_ID, 0, 'kubernetes');
const TOKEN = 'lock-token';
const spec = specialistConfig(
  loadClusterConfig(defaultConfigFile(), { resolveServers: false, resolveOperatorToken: false }),
  'kubernetes',
)!;

const task: TaskJob = {
  v: 1,
  runId: RUN_ID,
  incidentId: 'inc-1',
  taskId: TASK_ID,
  agent: 'kubernetes',
  task: 'look at the pods',
  incident: { id: 'inc-1', source: 'test', reason: 'PodCrashLooping', summary: 'checkout restarting', severity: 'warning' },
};

/** The parts of a BullMQ job the processor uses, recording where the job was moved. */
function fakeJob(data: unknown, more: { attemptsMade?: number; attemptsStarted?: number; order?: string[] } = {}) {
  const moves: { until: number; token: string | undefined }[] = [];
  const job = {
    id: TASK_ID,
    queueName: 'specialist-kubernetes',
    data,
    attemptsMade: more.attemptsMade ?? 0,
    attemptsStarted: more.attemptsStarted ?? 1,
    moveToDelayed: (until: number, token?: string) => {
      moves.push({ until, token });
      more.order?.push('moveToDelayed');
      return Promise.resolve();
    },
  };
  return { job: job as unknown as Job, moves };
}

/** An approval store with one approval in it, recording where tasks were parked and which approvals were woken. */
function fakeApprovals(status: 'pending' | 'approved', order?: string[]) {
  const parked: [string, string, string][] = [];
  const woken: string[] = [];
  const approval = { id: 'ap-1', status };
  const store = {
    parkedAt: (id: string, queue: string, jobId: string) => {
      parked.push([id, queue, jobId]);
      order?.push('parkedAt');
      return Promise.resolve();
    },
    get: (id: string) => Promise.resolve(id === approval.id ? approval : null),
    wake: (a: { id: string }) => {
      woken.push(a.id);
      return Promise.resolve();
    },
  };
  return { store: store as unknown as ApprovalStore, parked, woken };
}

function deps(more: Partial<SpecialistDeps> = {}) {
  const deadLetters: { input: DeadLetterInput; dedupeId: string | undefined }[] = [];
  const events = new MemoryEventSink();
  const d: SpecialistDeps = {
    name: 'kubernetes',
    spec,
    model: new FakeModel(),
    tools: {} as ToolClient,
    checkpoints: new MemoryCheckpointStore(),
    events,
    deadLetters: {
      add: (input: DeadLetterInput, dedupeId?: string) => {
        deadLetters.push({ input, dedupeId });
        return Promise.resolve({ v: 1, marker: STALL_MARKER, at: '', ...input });
      },
    },
    log: createLogger({ service: 'specialist-test', level: 'silent' }),
    ...more,
  };
  return { deps: d, deadLetters, events };
}

const result: TaskResult = { v: 1, taskId: TASK_ID, agent: 'kubernetes', status: 'completed', output: { summary: 'ok' }, attempts: 1 };

beforeEach(() => {
  runTaskMock.mockReset();
});

describe('specialistProcessor', () => {
  it("returns the task loop's result as the job's value (its output by reference), running the task with the spec, its attempt and whether it is a first pickup", async () => {
    runTaskMock.mockResolvedValue(result);
    const { deps: d } = deps();
    const { job } = fakeJob(task, { attemptsMade: 1, attemptsStarted: 2 });
    // The output stays in the task checkpoint (where the loop saved the result): the job's value refers to it.
    await expect(specialistProcessor(d)(job, TOKEN)).resolves.toEqual({ ...result, output: null, outputIn: 'checkpoint' });
    expect(runTaskMock).toHaveBeenCalledTimes(1);
    const [passedTask, passedSpec, , attempt] = runTaskMock.mock.calls[0]!;
    expect(passedTask).toEqual(task);
    expect(passedSpec).toMatchObject({ name: 'kubernetes', description: spec.description });
    expect(attempt).toEqual({ attempt: 2, firstPickup: false });
  });

  it("hands the task's result on only once the events it emitted are numbered (its agent.completed before the run.completed it leads to)", async () => {
    runTaskMock.mockResolvedValue(result);
    const { deps: d } = deps();
    let release!: () => void;
    const numbering = new Promise<void>((r) => (release = r));
    d.events = { emit: () => undefined, flush: () => Promise.resolve(), numbered: () => numbering };
    const { job } = fakeJob(task);
    let settled = false;
    const done = specialistProcessor(d)(job, TOKEN).then(() => (settled = true));
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    release();
    await done;
    expect(settled).toBe(true);
  });

  it('parks a task that waits for an approval: the job is delayed until its timeout and recorded on the approval; no worker is held', async () => {
    const until = Date.now() + 60_000;
    runTaskMock.mockRejectedValue(new ParkError('ap-1', until));
    const order: string[] = [];
    const approvals = fakeApprovals('pending', order);
    const { deps: d } = deps({ approvals: approvals.store });
    const { job, moves } = fakeJob(task, { order });
    await expect(specialistProcessor(d)(job, TOKEN)).rejects.toBeInstanceOf(DelayedError);
    expect(moves).toEqual([{ until, token: TOKEN }]);
    expect(approvals.parked).toEqual([['ap-1', 'specialist-kubernetes', TASK_ID]]);
    expect(approvals.woken).toEqual([]);
    // Where it parks is on the approval before the job is delayed: a decision can always find it.
    expect(order).toEqual(['parkedAt', 'moveToDelayed']);
  });

  it('wakes a parked task at once when the decision landed before it was parked', async () => {
    runTaskMock.mockRejectedValue(new ParkError('ap-1', Date.now() + 60_000));
    const approvals = fakeApprovals('approved');
    const { deps: d } = deps({ approvals: approvals.store });
    const { job } = fakeJob(task);
    await expect(specialistProcessor(d)(job, TOKEN)).rejects.toBeInstanceOf(DelayedError);
    expect(approvals.woken).toEqual(['ap-1']);
  });

  it('hands a task back to the queue at once when the process is draining (YieldError): delayed until now, not failed', async () => {
    runTaskMock.mockRejectedValue(new YieldError(TASK_ID));
    const { deps: d } = deps();
    const { job, moves } = fakeJob(task);
    const before = Date.now();
    await expect(specialistProcessor(d)(job, TOKEN)).rejects.toBeInstanceOf(DelayedError);
    expect(moves).toHaveLength(1);
    expect(moves[0]!.token).toBe(TOKEN);
    expect(moves[0]!.until).toBeGreaterThanOrEqual(before);
    expect(moves[0]!.until).toBeLessThanOrEqual(Date.now());
  });

  it('hands a task back until its turn when the cluster-wide rate limit asks for a long wait (ThrottledError): delayed, no worker held', async () => {
    const throttled = new ThrottledError('openai:gpt-4.1-mini', 5_000);
    runTaskMock.mockRejectedValue(throttled);
    const { deps: d } = deps();
    const { job, moves } = fakeJob(task);
    await expect(specialistProcessor(d)(job, TOKEN)).rejects.toBeInstanceOf(DelayedError);
    expect(moves).toEqual([{ until: throttled.until, token: TOKEN }]);
  });

  it('rethrows a park or a yield it cannot act on (no lock token, no approval store), without moving the job', async () => {
    const { deps: d } = deps();
    const { job, moves } = fakeJob(task);
    runTaskMock.mockRejectedValueOnce(new ParkError('ap-1', Date.now() + 60_000));
    await expect(specialistProcessor(d)(job, TOKEN)).rejects.toBeInstanceOf(ParkError);
    runTaskMock.mockRejectedValueOnce(new YieldError(TASK_ID));
    await expect(specialistProcessor(d)(job, undefined)).rejects.toBeInstanceOf(YieldError);
    expect(moves).toEqual([]);
  });

  it('rethrows a retryable model error so that BullMQ retries the job with backoff', async () => {
    runTaskMock.mockRejectedValue(new RetryableTaskError('model overloaded', new Error('503')));
    const { deps: d, deadLetters } = deps();
    const { job } = fakeJob(task);
    await expect(specialistProcessor(d)(job, TOKEN)).rejects.toBeInstanceOf(RetryableTaskError);
    expect(deadLetters).toEqual([]);
  });

  it('ends a task whose checkpoint cannot be read with an INCOMPLETE failed result, a dead letter and an agent.failed event', async () => {
    runTaskMock.mockRejectedValue(new BosunError('corrupt_checkpoint', `checkpoint task:${TASK_ID} is not valid JSON`));
    const { deps: d, deadLetters, events } = deps();
    const { job } = fakeJob(task, { attemptsMade: 2 });
    const out = await specialistProcessor(d)(job, TOKEN);
    expect(out).toMatchObject({ v: 1, taskId: TASK_ID, agent: 'kubernetes', status: 'failed', attempts: 3 });
    expect(out.error).toContain('is not valid JSON');
    expect(isStalled(out.output)).toBe(true);
    expect(deadLetters).toEqual([
      {
        input: expect.objectContaining({ kind: 'failure', runId: RUN_ID, taskId: TASK_ID, agent: 'kubernetes', attempts: 3 }),
        dedupeId: `failure-${TASK_ID}-checkpoint`,
      },
    ]);
    expect(events.events).toEqual([expect.objectContaining({ type: 'agent.failed', runId: RUN_ID, agent: 'kubernetes' })]);
  });

  it.each([
    ['does not match the contract', { ...task, taskId: undefined }, /^invalid task: taskId: /],
    ['is for another specialist', { ...task, agent: 'database' }, /^task for "database" on the queue of "kubernetes"$/],
  ])('refuses a task that %s: a poison dead letter with the original data, and an unrecoverable failure', async (_what, data, reason) => {
    const { deps: d, deadLetters } = deps();
    const { job } = fakeJob(data);
    const err = await specialistProcessor(d)(job, TOKEN).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnrecoverableError);
    expect((err as Error).message).toMatch(reason);
    expect(deadLetters).toEqual([
      { input: { kind: 'poison', agent: 'kubernetes', reason: expect.stringMatching(reason), input: data }, dedupeId: `poison-${TASK_ID}` },
    ]);
    expect(runTaskMock).not.toHaveBeenCalled();
  });
});

/** The count of `bosun_tasks_finished_total` for the kubernetes specialist and `status`. */
async function finished(status: string): Promise<number> {
  const line = (await metrics.text())
    .split('\n')
    .find((l) => l.startsWith(`bosun_tasks_finished_total{specialist="kubernetes",status="${status}"}`));
  return line === undefined ? 0 : Number(line.split(' ').pop());
}

/** Tools for the real loops: one read-only demo tool that answers `ok`. */
const okTools: ToolClient = {
  catalog: async () => ({
    v: 1,
    updatedAt: new Date(0).toISOString(),
    tools: [
      {
        name: 'demo__get_pods',
        server: 'demo',
        remoteName: 'get_pods',
        description: 'pods',
        inputSchema: { type: 'object' },
        annotations: { readOnlyHint: true },
      },
    ],
    unavailable: {},
  }),
  call: async (call) => ({ v: 1, key: call.key, tool: call.tool, status: 'ok', isError: false, text: 'ok', durationMs: 0 }),
};

describe('bosun_tasks_finished_total', () => {
  // The real task and CodeAct loops (not the stub): the metric is counted from why the task ended.
  it('counts a budget stop as `budget` and a CodeAct transfer as `transfer`, not as `timeout`', async () => {
    const actual = await vi.importActual<typeof Agent>('@bosun/agent');
    runTaskMock.mockImplementation(actual.runTask);
    const before = { budget: await finished('budget'), transfer: await finished('transfer'), timeout: await finished('timeout') };

    const plan = Array.from({ length: 5 }, (_, i) => ({ tool: 'demo__get_pods', args: { service: `s${i}` } }));
    const budgeted = { ...spec, budget: { toolCalls: 1 } };
    const overBudget = deps({ spec: budgeted, tools: okTools, model: new FakeModel({ plans: { kubernetes: plan } }) });
    const stopped = await specialistProcessor(overBudget.deps)(fakeJob(task).job);
    expect(stopped).toMatchObject({ status: 'stalled', reason: 'budget' });

    const script = 'return { transfer_to_agent: { agent: "database", reason: "it is the DB" } };';
    const transferring: Model = { name: 'scripted', generate: async () => ({ text: `\`\`\`js\n${script}\n\`\`\``, calls: [] }) };
    const codeact = deps({ spec: { ...spec, loop: 'codeact' }, tools: okTools, model: transferring });
    const handed = await specialistProcessor(codeact.deps)(fakeJob(task).job);
    expect(handed).toMatchObject({ status: 'stalled', reason: 'transfer', transfer: { agent: 'database' } });

    expect(await finished('budget')).toBe(before.budget + 1);
    expect(await finished('transfer')).toBe(before.transfer + 1);
    expect(await finished('timeout')).toBe(before.timeout);
  });

  it('counts a result written before `reason` existed by its structure, never by its error text', () => {
    const old = { ...result, status: 'stalled' as const, error: 'did not finish before its deadline' };
    expect(taskStatus(old)).toBe('stalled');
    expect(taskStatus({ ...old, transfer: { agent: 'database', reason: '' } })).toBe('transfer');
    expect(taskStatus({ ...result, status: 'failed' })).toBe('failed');
    expect(taskStatus({ ...old, reason: 'timeout' })).toBe('timeout');
  });
});

describe('localSpecialist (a task in its run’s process, bosun serve)', () => {
  const runLock = (signal?: AbortSignal) => ({ jobId: 'inc-1', fence: { key: 'bosun:incidents:inc-1:lock', token: 'run-token' }, signal });

  it('runs the task loop under the run’s lock: its first attempt, its tool calls carrying the incident job’s lock', async () => {
    const sent: unknown[] = [];
    const tools: ToolClient = {
      catalog: () => Promise.resolve({ v: 1, updatedAt: '', tools: [], unavailable: {} }),
      call: async (call) => {
        sent.push(call.taskLock);
        return { v: 1, key: call.key, tool: call.tool, status: 'ok', isError: false, text: 'ok', durationMs: 0 };
      },
    };
    runTaskMock.mockImplementation(async (_task, _spec, loopDeps) => {
      await loopDeps.tools.call({
        v: 1,
        key: 'k1',
        runId: RUN_ID,
        incidentId: 'inc-1',
        agent: 'kubernetes',
        tool: 'demo__get_pods',
        args: {},
      });
      return result;
    });
    const local = localSpecialist(deps({ tools }).deps)!;
    const place = local.reserve()!;
    await expect(local.run(task, runLock())).resolves.toEqual({ kind: 'result', result });
    place.release();
    expect(runTaskMock.mock.calls[0]![3]).toMatchObject({ attempt: 1, firstPickup: true });
    expect(sent).toEqual([{ taskId: TASK_ID, token: 'run-token', run: { jobId: 'inc-1' } }]);
  });

  it('hands to its queue what a job would hand back (an approval, a rate limit, a drain, an error), and throws a lost lock', async () => {
    const local = localSpecialist(deps().deps)!;
    for (const [err, reason] of [
      [new ParkError('ap-1', Date.now() + 60_000), 'it waits for an approval'],
      [new ThrottledError('openai:gpt-4.1-mini', 5_000), 'the model rate limit asks for a long wait'],
      [new YieldError(TASK_ID), 'the process drains'],
      [new RetryableTaskError('the model is overloaded', new Error('503')), expect.stringContaining('is retried from its queue')],
    ] as const) {
      runTaskMock.mockRejectedValueOnce(err);
      await expect(local.run(task, runLock())).resolves.toEqual({ kind: 'queue', reason });
    }
    const lost = new AbortController();
    lost.abort();
    runTaskMock.mockRejectedValueOnce(new Error('aborted'));
    await expect(local.run(task, runLock(lost.signal))).rejects.toMatchObject({ name: 'LockLostError' });
  });

  it('gives at most `concurrency` places, none while the process drains, and none for a remote A2A specialist', () => {
    let draining = false;
    const local = localSpecialist(deps({ spec: { ...spec, concurrency: 2 }, shouldYield: () => draining }).deps)!;
    const [a, b, c] = [local.reserve(), local.reserve(), local.reserve()];
    expect([a, b, c].map(Boolean)).toEqual([true, true, false]);
    a!.release();
    a!.release();
    expect(local.reserve()).toBeDefined();
    expect(local.reserve()).toBeUndefined();
    b!.release();
    draining = true;
    expect(local.reserve()).toBeUndefined();
    expect(localSpecialist(deps({ remote: {} as SpecialistDeps['remote'] }).deps)).toBeUndefined();
  });
});
