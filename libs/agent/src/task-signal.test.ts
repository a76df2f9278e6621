import { describe, expect, it } from 'vitest';
import { Incident, STALL_MARKER, parseWith, taskIdFor, type Catalog, type DeadLetter, type TaskJob } from '@bosun/contract';
import { createLogger } from '@bosun/config';
import { ModelError, type GenerateOptions, type Model, type ModelResponse } from '@bosun/models';
import { MemoryCheckpointStore, MemoryEventSink, type DeadLetterInput, type ToolClient } from '@bosun/transport';
import { runCodeActTask } from './codeact.js';
import { YieldError, runTask, type TaskAgentDeps, type TaskAgentSpec } from './task.js';

// One stop signal per task (issue 20, item 3): a cancel, a drain, BullMQ's processor signal or the
// deadline (on an injected clock) ends a model call in flight within a second, and the model sees
// the abort. The model here answers only when its signal aborts.

const RUN_ID = 'r0123456789abcdef0456';
const TASK_ID = taskIdFor(RUN_ID, 0, 'kubernetes');
const REPORT = { type: 'object', required: ['summary'], properties: { summary: { type: 'string' } } };

/** A model that never answers: its call ends when its signal aborts, and says so. */
class SlowModel implements Model {
  readonly name = 'slow';
  calls = 0;
  sawAbort = false;
  private startedCall!: () => void;
  /** Resolves when the first call is in flight. */
  readonly started = new Promise<void>((r) => (this.startedCall = r));
  generate(_request: unknown, options?: GenerateOptions): Promise<ModelResponse> {
    this.calls++;
    this.startedCall();
    return new Promise((_resolve, reject) => {
      const { signal } = options ?? {};
      if (!signal) return; // never ends: the test's deadline fails it
      signal.addEventListener('abort', () => {
        this.sawAbort = true;
        reject(new ModelError('the model call was aborted', { retryable: false }));
      });
    });
  }
}

/** `work`, or a failure naming `what` when it takes longer than `ms`. */
async function within<T>(ms: number, what: string, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_r, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)));
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

const noTools: ToolClient = {
  catalog: (): Promise<Catalog> => Promise.resolve({ v: 1, updatedAt: new Date(0).toISOString(), tools: [], unavailable: {} }),
  call: () => Promise.reject(new Error('no tools here')),
};

function job(deadlineAt?: string): TaskJob {
  const incident = parseWith(Incident, { id: 'inc-s', source: 'test', reason: 'PodCrashLooping', summary: 'restarts' }, 'incident');
  return {
    v: 1,
    runId: RUN_ID,
    incidentId: incident.id,
    taskId: TASK_ID,
    agent: 'kubernetes',
    task: 'Look.',
    incident,
    ...(deadlineAt ? { deadlineAt } : {}),
  };
}

const spec = (loop: 'task' | 'codeact' = 'task'): TaskAgentSpec => ({
  name: 'kubernetes',
  tools: ['demo__*'],
  outputSchema: REPORT,
  maxToolRounds: 4,
  maxInvalidOutputs: 1,
  loop,
});

function harness(more: Partial<TaskAgentDeps> = {}) {
  const model = new SlowModel();
  const checkpoints = new MemoryCheckpointStore();
  const deps: TaskAgentDeps = {
    model,
    tools: noTools,
    checkpoints,
    events: new MemoryEventSink(),
    deadLetters: {
      add: (input: DeadLetterInput): Promise<DeadLetter> =>
        Promise.resolve({ v: 1, marker: STALL_MARKER, at: new Date(0).toISOString(), ...input }),
    },
    log: createLogger({ service: 't', level: 'silent' }),
    ...more,
  };
  return { model, checkpoints, deps };
}

describe('one stop signal per task', () => {
  it.each(['task', 'codeact'] as const)(
    '%s loop: a cancel ends the model call in flight within 1 s, and the task ends cancelled',
    async (loop) => {
      let cancelled = false;
      const h = harness({ isCancelled: () => Promise.resolve(cancelled) });
      const running = (loop === 'task' ? runTask : runCodeActTask)(job(), spec(loop), h.deps, 1);
      await within(5_000, 'the model call starts', h.model.started);
      cancelled = true;
      const result = await within(1_000, 'the cancelled task ends', running);
      expect(h.model.sawAbort).toBe(true);
      expect(result).toMatchObject({ status: 'stalled', reason: 'cancelled' });
    },
  );

  it.each(['task', 'codeact'] as const)(
    '%s loop: a drain ends the model call in flight within 1 s and hands the task back',
    async (loop) => {
      const drain = new AbortController();
      const h = harness({ drain: drain.signal });
      const running = (loop === 'task' ? runTask : runCodeActTask)(job(), spec(loop), h.deps, 1);
      await within(5_000, 'the model call starts', h.model.started);
      drain.abort();
      await expect(within(1_000, 'the draining task is handed back', running)).rejects.toBeInstanceOf(YieldError);
      expect(h.model.sawAbort).toBe(true);
      // Handed back with its state saved: the next owner starts from the checkpoint.
      expect(await h.checkpoints.load(`task:${TASK_ID}`)).toMatchObject({ taskId: TASK_ID, step: 0 });
    },
  );

  it("BullMQ's processor signal (a lost lock) ends the model call in flight and hands the task back", async () => {
    const lock = new AbortController();
    const h = harness();
    const running = runTask(job(), spec(), h.deps, { attempt: 1, signal: lock.signal });
    await within(5_000, 'the model call starts', h.model.started);
    lock.abort();
    await expect(within(1_000, 'the task whose lock was lost stops', running)).rejects.toBeInstanceOf(YieldError);
    expect(h.model.sawAbort).toBe(true);
  });

  it('the deadline, on the injected clock, ends the model call in flight: the task times out, with no wait for real time', async () => {
    let now = Date.parse('2026-01-01T00:00:00.000Z');
    const h = harness({ clock: { now: () => now } });
    const running = runTask(job('2026-01-01T00:10:00.000Z'), spec(), h.deps, 1);
    await within(5_000, 'the model call starts', h.model.started);
    now += 11 * 60_000;
    const result = await within(1_000, 'the task past its deadline ends', running);
    expect(h.model.sawAbort).toBe(true);
    expect(result).toMatchObject({ status: 'stalled', reason: 'timeout' });
    expect(result.error).toMatch(/did not finish before its deadline \(2026-01-01T00:10:00.000Z\)/);
  });
});
