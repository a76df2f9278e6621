import { describe, expect, it } from 'vitest';
import { WaitingError, type Job } from 'bullmq';
import { STALL_MARKER, taskIdFor, type Catalog, type ToolCallJob, type ToolCallResult, type TaskJob } from '@bosun/contract';
import { createLogger, defaultConfigFile, loadClusterConfig, specialistConfig } from '@bosun/config';
import { FakeModel } from '@bosun/models';
import { MemoryCheckpointStore, MemoryEventSink, type DeadLetterInput, type RedisClient, type ToolClient } from '@bosun/transport';
import { specialistProcessor, type SpecialistDeps } from './specialist.js';

// A specialist that lost its task's lock (the job went to another process while this one was
// cut off from Redis, or too busy to renew it), with the real task loop over in-memory ports:
// it stops before its next effect and its next checkpoint write, says nothing (no event, no dead
// letter), and gives the job up to BullMQ without touching it; its calls carry its lock so the
// gateway can refuse a stale one.

const RUN_ID = 'r0123456789abcdef0456';
const TASK_ID = taskIdFor(RUN_ID, 0, 'kubernetes');
const LOCK_KEY = `bosun:specialist-kubernetes:${TASK_ID}:lock`;
const TOKEN = 'token-of-this-process';
const spec = specialistConfig(
  loadClusterConfig(defaultConfigFile(), { resolveServers: false, resolveOperatorToken: false }),
  'kubernetes',
)!;

const plan = [
  { tool: 'demo__restart_pod', args: { service: 'checkout', pod: 'checkout-1' } },
  { tool: 'demo__restart_pod', args: { service: 'checkout', pod: 'checkout-2' } },
];
const task: TaskJob = {
  v: 1,
  runId: RUN_ID,
  incidentId: 'inc-lock',
  taskId: TASK_ID,
  agent: 'kubernetes',
  task: 'restart the pods',
  incident: {
    id: 'inc-lock',
    source: 'test',
    reason: 'PodCrashLooping',
    summary: 'checkout restarting',
    severity: 'warning',
    payload: { fake: { calls: { kubernetes: plan } } },
  },
};

/** A gateway stand-in: records every call; `onCall` runs as a call arrives. */
class Tools implements ToolClient {
  readonly calls: ToolCallJob[] = [];
  onCall: (call: ToolCallJob) => void = () => undefined;
  catalog(): Promise<Catalog> {
    const tool = (remoteName: string) => ({
      name: `demo__${remoteName}`,
      server: 'demo',
      remoteName,
      description: '',
      inputSchema: { type: 'object' },
      annotations: { readOnlyHint: false, destructiveHint: true },
    });
    return Promise.resolve({ v: 1, updatedAt: '2026-01-01T00:00:00.000Z', tools: [tool('restart_pod')], unavailable: {} });
  }
  call(call: ToolCallJob): Promise<ToolCallResult> {
    this.calls.push(call);
    this.onCall(call);
    return Promise.resolve({ v: 1, key: call.key, tool: call.tool, status: 'ok', isError: false, text: 'restarted', durationMs: 1 });
  }
}

function setUp() {
  const checkpoints = new MemoryCheckpointStore();
  checkpoints.locks.set(LOCK_KEY, TOKEN);
  const tools = new Tools();
  const events = new MemoryEventSink();
  const deadLetters: DeadLetterInput[] = [];
  const lost: string[] = [];
  const deps: SpecialistDeps = {
    name: 'kubernetes',
    spec: { ...spec, tools: ['demo__*'], mode: 'read-write' },
    model: new FakeModel(),
    tools,
    checkpoints,
    events,
    deadLetters: {
      add: (input) => {
        deadLetters.push(input);
        return Promise.resolve({ v: 1, marker: STALL_MARKER, at: '', ...input });
      },
    },
    log: createLogger({ service: 'task-lock-test', level: 'silent' }),
    // The job lock as Redis holds it (what stillOwned reads).
    redis: { get: (key: string) => Promise.resolve(checkpoints.locks.get(key) ?? null) } as unknown as RedisClient,
    onLockLost: (taskId) => lost.push(taskId),
    policy: { offered: (t) => [...t], stateOf: () => 'allow', approvalTimeoutMs: () => 60_000 },
  };
  const job = {
    id: TASK_ID,
    queueName: 'specialist-kubernetes',
    queueQualifiedName: 'bosun:specialist-kubernetes',
    data: task,
    attemptsMade: 0,
    attemptsStarted: 1,
    timestamp: Date.now(),
  } as unknown as Job;
  return { deps, job, checkpoints, tools, events, deadLetters, lost };
}

describe('a specialist that lost its task lock', () => {
  it('completes a task it holds, every call carrying its lock', async () => {
    const { deps, job, tools, events } = setUp();
    const result = await specialistProcessor(deps)(job, TOKEN, new AbortController().signal);
    expect(result.status).toBe('completed');
    expect(tools.calls.map((c) => c.taskLock)).toEqual([
      { taskId: TASK_ID, token: TOKEN },
      { taskId: TASK_ID, token: TOKEN },
    ]);
    expect(events.events.map((e) => e.type)).toContain('agent.completed');
  });

  it("stops before its next checkpoint write and its next call once another process holds the task, leaving the owner's state as it is", async () => {
    const { deps, job, checkpoints, tools, events, deadLetters, lost } = setUp();
    // While the first call runs, the task passes to another process, which saves its own state.
    tools.onCall = () => {
      checkpoints.locks.set(LOCK_KEY, 'token-of-the-next-owner');
      checkpoints.data.set(`task:${TASK_ID}`, JSON.stringify({ written: 'by the next owner' }));
    };
    await expect(specialistProcessor(deps)(job, TOKEN, new AbortController().signal)).rejects.toBeInstanceOf(WaitingError);
    expect(tools.calls).toHaveLength(1);
    expect(JSON.parse(checkpoints.data.get(`task:${TASK_ID}`)!)).toEqual({ written: 'by the next owner' });
    expect(events.events.map((e) => e.type)).not.toContain('agent.completed');
    expect(deadLetters).toEqual([]);
    expect(lost).toEqual([TASK_ID]);
  });

  it("stops at once when BullMQ reports the lock lost (the processor's signal), before any call", async () => {
    const { deps, job, checkpoints, tools, lost } = setUp();
    const aborted = new AbortController();
    aborted.abort('lock lost');
    // The lock key may still look like its own (the renewal failed, the key not yet taken): the signal decides.
    await expect(specialistProcessor(deps)(job, TOKEN, aborted.signal)).rejects.toBeInstanceOf(WaitingError);
    expect(tools.calls).toEqual([]);
    expect(checkpoints.data.size).toBe(0);
    expect(lost).toEqual([TASK_ID]);
  });

  it('reports no INCOMPLETE result (no dead letter, no event) for a task it no longer holds', async () => {
    const { deps, job, checkpoints, events, deadLetters } = setUp();
    // The model ends its turn without a report (a stall); meanwhile the task passed to another process.
    const stalling = { ...task, incident: { ...task.incident, payload: { fake: { stall: ['kubernetes'] } } } };
    checkpoints.locks.set(LOCK_KEY, 'token-of-the-next-owner');
    await expect(specialistProcessor(deps)({ ...job, data: stalling } as Job, TOKEN, undefined)).rejects.toBeInstanceOf(WaitingError);
    expect(deadLetters).toEqual([]);
    expect(events.events.map((e) => e.type).filter((t) => t.startsWith('agent.') && t !== 'agent.started')).toEqual([]);
  });
});
