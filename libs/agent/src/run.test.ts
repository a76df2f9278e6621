import { describe, expect, it } from 'vitest';
import {
  LockLostError,
  STALL_MARKER,
  isStalled,
  outputByReference,
  runCheckpointId,
  runIdFor,
  timerJobId,
  type DeadLetter,
  type IncidentInput,
  type RunCancellation,
  type RunCheckpoint,
  type RunResult,
  type TaskJob,
  type TaskResult,
  type TimerJob,
} from '@bosun/contract';
import { createLogger, parseClusterConfig, type ClusterConfig } from '@bosun/config';
import {
  GeminiModel,
  ModelError,
  OpenAiModel,
  type GenerateOptions,
  type Model,
  type ModelRequest,
  type ModelResponse,
} from '@bosun/models';
import {
  ApprovalError,
  MemoryCheckpointStore,
  MemoryEventSink,
  type Approval,
  type DeadLetterInput,
  type Decision,
} from '@bosun/transport';

import { startGeminiServer } from '../../../test/helpers/gemini-server.js';
import { completion, openAiFixture, startOpenAiServer } from '../../../test/helpers/openai-server.js';
import { runIncident, type RunOutcome } from './run.js';
import type {
  ChildState,
  ChildrenRead,
  IncidentJob,
  LocalOutcome,
  LocalSpecialist,
  LocalSpecialists,
  ParkedRun,
  RunChildren,
  RunDeps,
  RunLock,
} from './run-ports.js';
import { CANCEL_LOOKS, handleTimer } from './run-timers.js';

// The coordinator's run loop with every port in memory: BullMQ's parent/child jobs, timers,
// cancel keys, the clock and the model are simulated by `World` below.

const T0 = Date.parse('2026-03-01T10:00:00.000Z');
const REPORT = { type: 'object', required: ['summary'], properties: { summary: { type: 'string' } } };

/** A cluster config: two specialists (k8s deadline 60 s, db 120 s), run deadline 10 min. */
function clusterConfig(coordinator: Record<string, unknown> = {}): ClusterConfig {
  return parseClusterConfig(
    {
      coordinator: { routes: { PodCrashLooping: ['kubernetes'] }, defaultRoute: ['kubernetes'], runDeadlineMs: 600_000, ...coordinator },
      specialists: {
        kubernetes: { description: 'pods', tools: ['demo__*'], outputSchema: REPORT, deadlineMs: 60_000, retries: 1 },
        database: { description: 'queries', tools: ['demo__*'], outputSchema: REPORT, deadlineMs: 120_000 },
      },
      mcpServers: { demo: { transport: 'stdio', command: 'node', args: ['main.js'] } },
    },
    { file: 'test.yaml', env: {}, resolveServers: false },
  );
}

const INCIDENT: IncidentInput = {
  id: 'inc-1',
  source: 'alertmanager',
  reason: 'PodCrashLooping',
  summary: 'checkout pods restart',
  severity: 'critical',
};

/** What the model answers to one request; a promise that never settles stands for a process killed during the call. */
type Script = (request: ModelRequest, n: number, options?: GenerateOptions) => ModelResponse | Promise<ModelResponse>;

class ScriptModel implements Model {
  readonly name = 'script';
  readonly requests: ModelRequest[] = [];
  constructor(private readonly script: Script) {}
  async generate(request: ModelRequest, options?: GenerateOptions): Promise<ModelResponse> {
    this.requests.push(structuredClone(request));
    return this.script(request, this.requests.length, options);
  }
}

/** A turn of the event loop, as a port's I/O takes. */
const io = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** A promise that never settles: the process "dies" at this await. */
const never = <T>(): Promise<T> => new Promise<T>(() => undefined);

function report(taskId: string, agent: string, summary: string, extra: Partial<TaskResult> = {}): TaskResult {
  return { v: 1, taskId, agent, status: 'completed', output: { summary }, attempts: 1, ...extra };
}

interface ParentSim {
  id: string;
  data: unknown;
  name: string;
  timestamp: number;
  starts: number;
  attemptsMade: number;
  maxAttempts: number;
  state: 'wait' | 'active' | 'waiting-children' | 'completed' | 'failed';
  /** Children not yet finished (BullMQ's unprocessed dependencies). */
  pending: Set<string>;
  values: Map<string, unknown>;
  failures: Map<string, string>;
}

interface ChildSim {
  task: TaskJob;
  attempts: number;
  parent: string;
  state: 'waiting' | 'completed' | 'failed';
  attemptsMade: number;
}

/** Every port of the run loop, in memory. */
class World {
  now = T0;
  readonly checkpoints = new MemoryCheckpointStore();
  readonly events = new MemoryEventSink();
  readonly deadLetters = new Map<string, DeadLetterInput>();
  readonly timers = new Map<string, { timer: TimerJob; dueAt: number }>();
  readonly removedTimers: string[] = [];
  /** Every park the loop asked for, taken or refused. */
  parks = 0;
  readonly cancelled = new Map<string, RunCancellation>();
  readonly stopped = new Set<string>();
  readonly parents = new Map<string, ParentSim>();
  readonly children = new Map<string, ChildSim>();
  readonly decisions: { id: string; decision: Decision }[] = [];
  readonly logs: Record<string, unknown>[] = [];
  /** Called before a task job's state or attempts are read: lets a test act in between (another process, say). */
  hook?: (port: 'childState' | 'childAttempts', taskId: string) => Promise<void>;
  /** Task jobs whose attempts cannot be read. */
  unreadableJobs = new Set<string>();
  /** Children whose `add` never returns (a process killed while adding them). */
  hangOnAdd = new Set<string>();
  pendingApprovals = new Map<string, Approval>();
  /** The run's usage ledger: `<runId>/<part>` → total. */
  readonly ledger = new Map<string, unknown>();
  config: ClusterConfig;
  model: ScriptModel;
  /** Run each pickup of an incident job under a lock of its own (BullMQ's: the last pickup holds it), fencing the checkpoint. */
  fenced = false;
  /** Parks refused as BullMQ refuses a command under a lost lock. */
  lockLostOnPark = new Set<number>();
  /** Specialists hosted in the coordinator's process (`bosun serve`): their tasks run without child jobs. */
  local?: LocalSpecialists;

  constructor(script: Script, config: ClusterConfig = clusterConfig()) {
    this.config = config;
    this.model = new ScriptModel(script);
  }

  deps(): RunDeps {
    const log = createLogger({ service: 'test', level: 'debug', destination: { write: (s: string) => this.logs.push(JSON.parse(s)) } });
    return {
      config: this.config,
      model: this.model,
      usage: { record: async (runId: string, part: string, usage: unknown) => void this.ledger.set(`${runId}/${part}`, usage) },
      checkpoints: this.checkpoints,
      events: this.events,
      deadLetters: {
        add: async (input: DeadLetterInput, id: string): Promise<DeadLetter> => {
          await io();
          if (!this.deadLetters.has(id)) this.deadLetters.set(id, structuredClone(input));
          return { v: 1, at: new Date().toISOString(), marker: STALL_MARKER, ...input };
        },
      },
      jobs: {
        childState: async (_agent: string, taskId: string): Promise<ChildState> => {
          await this.hook?.('childState', taskId);
          const c = this.children.get(taskId);
          return !c ? 'none' : c.state === 'completed' ? 'completed' : 'open';
        },
        childAttempts: async (_agent: string, taskId: string) => {
          await this.hook?.('childAttempts', taskId);
          if (this.unreadableJobs.has(taskId)) throw new Error('READONLY You can not write against a read only replica.');
          return this.children.get(taskId)?.attemptsMade ?? 0;
        },
        release: async (_agent: string, taskId: string) => {
          await io();
          const c = this.children.get(taskId);
          if (c) this.settle(c.parent, taskId);
        },
        parked: async (jobId: string): Promise<ParkedRun | undefined> => {
          await io();
          const p = this.parents.get(jobId);
          return p?.state === 'waiting-children' ? { data: p.data, children: this.childrenOf(p) } : undefined;
        },
      },
      timers: {
        add: async (timer: TimerJob, delayMs: number) => {
          await io();
          const id = timerJobId(timer);
          if (!this.timers.has(id)) this.timers.set(id, { timer, dueAt: this.now + delayMs });
        },
        remove: async (timer: TimerJob) => {
          await io();
          this.removedTimers.push(timerJobId(timer));
          this.timers.delete(timerJobId(timer));
        },
      },
      cancels: {
        run: async (runId: string) => {
          await io();
          return this.cancelled.get(runId) ?? null;
        },
        stopTask: async (taskId: string) => {
          await io();
          this.stopped.add(taskId);
        },
      },
      clock: { now: () => this.now },
      log,
      ...(this.local ? { local: this.local } : {}),
      approvals: {
        decide: async (id: string, decision: Decision) => {
          await io();
          const a = this.pendingApprovals.get(id);
          if (!a) throw new ApprovalError('not_found', `no approval ${id}`);
          this.decisions.push({ id, decision });
          this.pendingApprovals.delete(id);
          return {
            ...a,
            status: decision.approve ? 'approved' : 'denied',
            decidedBy: decision.by,
            decidedAt: new Date(this.now).toISOString(),
          };
        },
      },
    };
  }

  private childrenOf(p: ParentSim): RunChildren {
    return {
      add: async (task: TaskJob, options: { attempts: number }) => {
        await io();
        if (this.hangOnAdd.has(task.taskId)) return never();
        if (this.children.has(task.taskId)) return;
        this.children.set(task.taskId, { task, attempts: options.attempts, parent: p.id, state: 'waiting', attemptsMade: 0 });
        p.pending.add(task.taskId);
      },
    };
  }

  /** A child no longer holds its parent; the parent waiting for it goes back to the queue when none is left. */
  private settle(parentId: string, taskId: string): void {
    const p = this.parents.get(parentId);
    if (!p) return;
    p.pending.delete(taskId);
    if (p.state === 'waiting-children' && p.pending.size === 0) p.state = 'wait';
  }

  publish(incident: IncidentInput = INCIDENT, options: { name?: string; id?: string; maxAttempts?: number } = {}): ParentSim {
    const p: ParentSim = {
      id: options.id ?? incident.id,
      data: structuredClone(incident),
      name: options.name ?? 'incident',
      timestamp: T0,
      starts: 0,
      attemptsMade: 0,
      maxAttempts: options.maxAttempts ?? 1,
      state: 'wait',
      pending: new Set(),
      values: new Map(),
      failures: new Map(),
    };
    this.parents.set(p.id, p);
    return p;
  }

  runId(incidentId = INCIDENT.id): string {
    return runIdFor(incidentId, T0);
  }

  /** A coordinator picks the incident job up (again). */
  async process(jobId = INCIDENT.id): Promise<RunOutcome> {
    const p = this.parents.get(jobId)!;
    p.starts++;
    p.state = 'active';
    // This pickup takes the job's lock (an earlier holder's lock has expired).
    if (this.fenced) this.checkpoints.locks.set(`lock:${p.id}`, `token-${p.starts}`);
    let outcome: RunOutcome;
    try {
      outcome = await runIncident(this.incidentJob(p), this.deps());
    } catch (err) {
      p.attemptsMade++;
      p.state = p.attemptsMade < p.maxAttempts ? 'wait' : 'failed';
      throw err;
    }
    if (outcome.kind === 'result') p.state = 'completed';
    else if (outcome.kind === 'rejected') p.state = 'failed';
    return outcome;
  }

  /** Starts processing without waiting for it: a process that dies wherever it hangs. */
  start(jobId = INCIDENT.id): void {
    void this.process(jobId).catch(() => undefined);
  }

  private incidentJob(p: ParentSim): IncidentJob {
    const pickup = p.starts;
    const token = `token-${pickup}`;
    const read = async (): Promise<ChildrenRead> => {
      await io();
      return { values: new Map(p.values), failures: new Map(p.failures) };
    };
    return {
      id: p.id,
      name: p.name,
      data: p.data,
      timestamp: p.timestamp,
      attemptsStarted: p.starts,
      attemptsMade: p.attemptsMade,
      maxAttempts: p.maxAttempts,
      parkable: true,
      children: { ...this.childrenOf(p), read },
      park: async () => {
        this.parks++;
        await io();
        if (this.fenced && this.checkpoints.locks.get(`lock:${p.id}`) !== token) throw new LockLostError(`run of incident job ${p.id}`);
        if (p.pending.size === 0) return false;
        p.state = 'waiting-children';
        return true;
      },
      progress: () => io(),
      ...(this.fenced ? { fence: { key: `lock:${p.id}`, token } } : {}),
    };
  }

  /** A child job completes with `result`. */
  complete(taskId: string, result: unknown): void {
    const c = this.children.get(taskId)!;
    c.state = 'completed';
    c.attemptsMade++;
    const p = this.parents.get(c.parent)!;
    if (p.pending.has(taskId)) p.values.set(taskId, result);
    this.settle(c.parent, taskId);
  }

  /** A child job fails for good (its failure ignored by the parent, as `ignoreDependencyOnFailure` does). */
  fail(taskId: string, reason: string, attemptsMade = 2): void {
    const c = this.children.get(taskId)!;
    c.state = 'failed';
    c.attemptsMade = attemptsMade;
    const p = this.parents.get(c.parent)!;
    if (p.pending.has(taskId)) p.failures.set(taskId, reason);
    this.settle(c.parent, taskId);
  }

  /** The job id of the run's timer due at `at`. */
  runTimer(at: number, runId = this.runId()): string {
    return timerJobId({ kind: 'run-timer', runId, at });
  }

  /** Fires one timer now (it is removed, as a completed timer job is). */
  async fire(id: string): Promise<void> {
    const t = this.timers.get(id);
    if (!t) throw new Error(`no timer ${id} (have ${[...this.timers.keys()].join(', ')})`);
    this.timers.delete(id);
    await handleTimer(t.timer, this.deps());
  }

  async checkpoint(runId = this.runId()): Promise<RunCheckpoint> {
    return (await this.checkpoints.load(runCheckpointId(runId))) as RunCheckpoint;
  }

  eventsOf(type: string) {
    return this.events.events.filter((e) => e.type === type);
  }

  taskIds(): string[] {
    return [...this.children.keys()];
  }

  warnings(): Record<string, unknown>[] {
    return this.logs.filter((l) => l.level === 40);
  }
}

function resultOf(outcome: RunOutcome): RunResult {
  if (outcome.kind !== 'result') throw new Error(`expected a result, got ${JSON.stringify(outcome)}`);
  return outcome.result;
}

const routeTo =
  (...names: string[]): Script =>
  () => ({ text: JSON.stringify({ specialists: names }), calls: [] });

/** Waits until `check` holds, giving pending promises their turns (for processes left hanging). */
async function settleUntil(check: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setImmediate(r));
  expect(check()).toBe(true);
}

describe('route mode', () => {
  it('routes, delegates as child jobs, parks, and answers from the reports', async () => {
    const w = new World(routeTo('kubernetes', 'database'));
    w.publish();
    expect((await w.process()).kind).toBe('parked');
    const [k8s, db] = w.taskIds() as [string, string];
    expect(w.children.get(k8s)!.task).toMatchObject({ agent: 'kubernetes', runId: w.runId(), incidentId: 'inc-1' });
    expect(w.children.get(k8s)!.attempts).toBe(2);
    expect(w.children.get(db)!.attempts).toBe(3);
    // One timer for the run, at the first backstop: kubernetes's deadline (60 s) + 5 s.
    expect([...w.timers.keys()]).toEqual([w.runTimer(T0 + 65_000)]);
    expect(w.timers.get(w.runTimer(T0 + 65_000))!.dueAt).toBe(T0 + 60_000 + 5_000);
    expect(await w.checkpoint()).toMatchObject({ phase: 'waiting', timerAt: T0 + 65_000 });
    w.complete(k8s, report(k8s, 'kubernetes', 'OOM kills'));
    w.complete(db, report(db, 'database', 'slow queries'));
    const result = resultOf(await w.process());
    expect(result.status).toBe('completed');
    expect(result.answer).toContain('## kubernetes — completed\nOOM kills');
    expect(result.answer).toContain('## database — completed\nslow queries');
    expect(w.model.requests).toHaveLength(1);
    expect(w.model.requests[0]!.mode).toBe('single');
    expect(w.model.requests[0]!.system).toContain('- kubernetes: pods');
    expect(w.model.requests[0]!.system).toContain('- PodCrashLooping -> kubernetes');
    // Providers with structured output are held to the answer parseRouting reads.
    expect(w.model.requests[0]!.responseSchema).toMatchObject({
      name: 'route',
      schema: { properties: { specialists: { items: { enum: ['kubernetes', 'database'] } } }, required: ['specialists'] },
    });
    expect(w.eventsOf('run.routed')[0]!.data).toEqual({ specialists: ['kubernetes', 'database'], unknown: [] });
    expect(w.eventsOf('run.completed')).toHaveLength(1);
    expect((await w.checkpoint()).result).toEqual(result);
    // The run's timer is removed with its result.
    expect(w.removedTimers).toEqual([w.runTimer(T0 + 65_000)]);
  });

  it('goes straight to collecting when every child has reported by the time it is picked up again: no park, no timer', async () => {
    const w = new World(routeTo('kubernetes', 'database'));
    w.publish();
    expect((await w.process()).kind).toBe('parked');
    expect(w.parks).toBe(1);
    const [k8s, db] = w.taskIds() as [string, string];
    const armed = [...w.timers.keys()];
    w.complete(k8s, report(k8s, 'kubernetes', 'OOM kills'));
    // One child still out: picked up again (as after a restart), the run parks as before.
    expect((await w.process()).kind).toBe('parked');
    expect(w.parks).toBe(2);
    w.complete(db, report(db, 'database', 'slow queries'));
    expect(resultOf(await w.process()).status).toBe('completed');
    // The last pickup read both reports beside the checkpoint: it neither parked nor armed a timer.
    expect(w.parks).toBe(2);
    expect([...w.timers.keys()]).toEqual([]);
    expect(w.removedTimers).toEqual(armed);
  });

  it('reads an output stored once, in its task checkpoint, and keeps only the reference in its own', async () => {
    const w = new World(routeTo('kubernetes', 'database'));
    w.publish();
    expect((await w.process()).kind).toBe('parked');
    const [k8s, db] = w.taskIds() as [string, string];
    const whole = report(k8s, 'kubernetes', 'OOM kills');
    // What the specialist leaves: the result in the task checkpoint, a reference as the job's return value.
    const taskCkpt = {
      v: 1,
      taskId: k8s,
      step: 1,
      toolRounds: 0,
      invalidOutputs: 0,
      askedToFinish: false,
      messages: [{ role: 'user', text: 't' }],
    };
    await w.checkpoints.save(`task:${k8s}`, { ...taskCkpt, result: whole });
    w.complete(k8s, outputByReference(whole));
    // Its checkpoint is gone (expired): the part says so instead of a hole.
    w.complete(db, outputByReference(report(db, 'database', 'slow queries')));
    const result = resultOf(await w.process());
    expect(result.answer).toContain('## kubernetes — completed\nOOM kills');
    expect(result.specialists.find((s) => s.name === 'kubernetes')).toMatchObject({
      status: 'completed',
      output: { summary: 'OOM kills' },
    });
    expect(result.specialists.find((s) => s.name === 'database')).toMatchObject({ status: 'failed' });
    expect(JSON.stringify(result.specialists.find((s) => s.name === 'database')!.output)).toContain(`checkpoint task:${db}`);
    const stored = (await w.checkpoint()).delegations.find((d) => d.taskId === k8s)!.result!;
    expect(stored).toMatchObject({ status: 'completed', output: null, outputIn: 'checkpoint' });
    expect(result.status).toBe('partial');
  });

  it("reports the run's usage: the coordinator's calls (also in the run's ledger) and every part's", async () => {
    const w = new World(() => ({
      text: '{"specialists":["kubernetes","database"]}',
      calls: [],
      usage: { inputTokens: 100, outputTokens: 7 },
    }));
    w.publish();
    await w.process();
    const [k8s, db] = w.taskIds() as [string, string];
    const part = (toolCalls: number) => ({ inputTokens: 50, outputTokens: 5, modelCalls: 2, toolCalls, costUsd: 0.001 });
    w.complete(k8s, report(k8s, 'kubernetes', 'a', { usage: part(1) }));
    w.complete(db, report(db, 'database', 'b', { usage: { ...part(2), fallbacks: 1 } }));
    const result = resultOf(await w.process());
    const coordinator = { inputTokens: 100, outputTokens: 7, modelCalls: 1, toolCalls: 0, costUsd: 0 };
    expect(w.ledger.get(`${w.runId()}/coordinator`)).toEqual(coordinator);
    expect(result.usage).toEqual({ inputTokens: 200, outputTokens: 17, modelCalls: 5, toolCalls: 3, costUsd: 0.002, fallbacks: 1 });
    expect(result.specialists.map((s) => s.usage?.toolCalls)).toEqual([1, 2]);
    expect(w.eventsOf('run.completed')[0]!.data.usage).toEqual(result.usage);
  });

  it('takes the default route when the classifier names nobody, and fails a run that has nobody to ask', async () => {
    const w = new World(() => ({ text: 'no idea', calls: [] }));
    w.publish();
    await w.process();
    expect(w.taskIds()).toEqual([`${w.runId()}-d0-kubernetes`]);

    const nobody = new World(() => ({ text: '{"specialists": []}', calls: [] }), clusterConfig({ defaultRoute: [] }));
    nobody.publish();
    const result = resultOf(await nobody.process());
    expect(result.status).toBe('failed');
    expect(result.answer).toContain('No specialist covers this incident; nothing was checked.');
    expect(nobody.eventsOf('run.failed')).toHaveLength(1);
  });

  it('makes unknown names, JS built-in names among them, failed parts with a dead letter; the others still run', async () => {
    const w = new World(routeTo('kubernetes', 'networking', 'constructor', 'toString', '__proto__', 'kubernetes'));
    w.publish();
    expect((await w.process()).kind).toBe('parked');
    // Only the known specialist got a child job; each name once.
    expect(w.taskIds()).toEqual([`${w.runId()}-d0-kubernetes`]);
    expect(w.eventsOf('run.routed')[0]!.data.unknown).toEqual(['networking', 'constructor', 'toString', '__proto__']);
    const failures = [...w.deadLetters.values()].filter((d) => d.kind === 'failure');
    expect(failures.map((d) => d.agent)).toEqual(['networking', 'constructor', 'toString', '__proto__']);
    expect(failures[0]!.reason).toBe('unknown specialist "networking" (known: kubernetes, database)');
    w.complete(`${w.runId()}-d0-kubernetes`, report(`${w.runId()}-d0-kubernetes`, 'kubernetes', 'fine'));
    const result = resultOf(await w.process());
    expect(result.status).toBe('partial');
    expect(result.specialists.map((s) => [s.name, s.status])).toEqual([
      ['kubernetes', 'completed'],
      ['networking', 'failed'],
      ['constructor', 'failed'],
      ['toString', 'failed'],
      ['__proto__', 'failed'],
    ]);
    expect(result.answer).toContain('Not checked: networking, constructor, toString, __proto__.');
  });

  it('ends at once when every routed name is unknown', async () => {
    const w = new World(routeTo('nobody'));
    w.publish();
    const result = resultOf(await w.process());
    expect(result.status).toBe('partial');
    expect(w.taskIds()).toEqual([]);
    expect(result.specialists).toEqual([{ name: 'nobody', status: 'failed', output: expect.stringContaining(STALL_MARKER), attempts: 0 }]);
  });
});

/** A delegate-mode model: `rounds[n]` are the calls of its n-th turn; the turn after the last answers `answer`. */
function delegating(rounds: { name: string; task?: string }[][], answer = 'the answer'): Script {
  return (_request, n) => {
    const calls = rounds[n - 1];
    if (!calls) return { text: answer, calls: [] };
    return { calls: calls.map((c, i) => ({ id: `call-${n}-${i}`, name: c.name, args: c.task === undefined ? {} : { task: c.task } })) };
  };
}

describe('a run whose lock passed to another coordinator', () => {
  it('gives the job up to its next owner, which resumes and answers; the first answers nothing (no run.failed, no failure dead letter)', async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((r) => (release = r));
    // The first classifier call hangs (the coordinator's Redis link is held beyond its lock); the next owner's answers at once.
    const w = new World(async (_req, n) => {
      if (n === 1) await held;
      return { text: JSON.stringify({ specialists: ['kubernetes'] }), calls: [] };
    });
    w.fenced = true;
    w.publish();
    const first = w.process();
    await settleUntil(() => w.model.requests.length === 1);
    // The lock expired; BullMQ gave the job to another coordinator, which routes, dispatches and parks.
    expect((await w.process()).kind).toBe('parked');
    const [k8s] = w.taskIds() as [string];
    release();
    const outcome = await first;
    expect(outcome.kind).toBe('lost');
    // It wrote nothing over the next owner's run and said nothing about it.
    expect(await w.checkpoint()).toMatchObject({ phase: 'waiting' });
    expect(w.eventsOf('run.failed')).toEqual([]);
    expect([...w.deadLetters.keys()]).toEqual([]);
    expect(w.taskIds()).toEqual([k8s]);
    w.complete(k8s, report(k8s, 'kubernetes', 'OOM kills'));
    const result = resultOf(await w.process());
    expect(result.status).toBe('completed');
    expect(w.eventsOf('run.completed')).toHaveLength(1);
    expect(w.eventsOf('run.failed')).toEqual([]);
  });

  it("ends the coordinator's model call in flight when BullMQ's signal says the lock is lost, and gives the run up", async () => {
    let sawAbort = false;
    const w = new World(
      (_req, _n, options) =>
        new Promise<ModelResponse>((_resolve, reject) =>
          options?.signal?.addEventListener('abort', () => {
            sawAbort = true;
            reject(new Error('aborted'));
          }),
        ),
    );
    w.publish();
    const lock = new AbortController();
    const job = { ...(w as unknown as { incidentJob(p: ParentSim): IncidentJob }).incidentJob(w.parents.get(INCIDENT.id)!) };
    const running = runIncident({ ...job, signal: lock.signal, lost: () => lock.signal.aborted }, w.deps());
    await settleUntil(() => w.model.requests.length === 1);
    lock.abort();
    expect((await running).kind).toBe('lost');
    expect(sawAbort).toBe(true);
    expect(w.eventsOf('run.failed')).toEqual([]);
  });

  it('gives up a run whose park BullMQ refuses under a lost lock, instead of failing it', async () => {
    const w = new World(routeTo('kubernetes'));
    w.fenced = true;
    w.publish();
    const p = w.parents.get(INCIDENT.id)!;
    // The lock passes to someone else between the dispatch's save and the park.
    const deps = w.deps();
    const original = deps.checkpoints.save.bind(deps.checkpoints);
    let saves = 0;
    deps.checkpoints.save = async (id, value, options) => {
      await original(id, value, options);
      if (++saves === 2) w.checkpoints.locks.set(`lock:${p.id}`, 'token-of-another');
    };
    p.starts = 1;
    w.checkpoints.locks.set(`lock:${p.id}`, 'token-1');
    const outcome = await runIncident((w as unknown as { incidentJob(p: ParentSim): IncidentJob }).incidentJob(p), deps);
    expect(outcome.kind).toBe('lost');
    expect(w.eventsOf('run.failed')).toEqual([]);
    expect([...w.deadLetters.keys()]).toEqual([]);
  });
});

describe('delegate mode', () => {
  it('delegates in rounds, gives the reports back as tool responses, and answers', async () => {
    const w = new World(
      delegating([
        [
          { name: 'delegate_kubernetes', task: 'check pods' },
          { name: 'delegate_database', task: '  ' },
        ],
        [{ name: 'delegate_database', task: 'again' }],
      ]),
      clusterConfig({ mode: 'delegate' }),
    );
    w.publish();
    expect((await w.process()).kind).toBe('parked');
    const [k8s, db] = w.taskIds() as [string, string];
    expect(w.children.get(k8s)!.task.task).toBe('check pods');
    expect(w.children.get(db)!.task.task).toBe('Investigate this incident within your domain and report what you find.');
    w.complete(k8s, report(k8s, 'kubernetes', 'pods fine'));
    w.fail(db, 'boom');
    expect((await w.process()).kind).toBe('parked');
    const second = w.model.requests[1]!;
    const responses = second.messages.find((m) => m.role === 'tool');
    expect(responses).toEqual({
      role: 'tool',
      responses: [
        { id: 'call-1-0', name: 'delegate_kubernetes', isError: false, output: { summary: 'pods fine' } },
        {
          id: 'call-1-1',
          name: 'delegate_database',
          isError: true,
          output: { status: 'failed', report: { summary: expect.stringContaining(STALL_MARKER) } },
        },
      ],
    });
    const third = w.taskIds()[2]!;
    expect(third).toBe(`${w.runId()}-d2-database`);
    w.complete(third, report(third, 'database', 'queries fine'));
    const result = resultOf(await w.process());
    expect(result.answer).toBe('the answer');
    expect(result.status).toBe('partial');
    expect(w.model.requests).toHaveLength(3);
    expect(w.eventsOf('run.routed').map((e) => e.data)).toEqual([
      { specialists: ['kubernetes', 'database'], round: 1 },
      { specialists: ['database'], round: 2 },
    ]);
    expect((await w.checkpoint()).round).toBe(2);
  });

  it('offers no delegate tools once maxRounds is reached, and asks for the answer', async () => {
    const always = delegating(Array.from({ length: 10 }, () => [{ name: 'delegate_kubernetes', task: 'look' }]));
    const w = new World(
      (r, n) => (r.tools.length === 0 ? { text: 'final answer', calls: [] } : always(r, n)),
      clusterConfig({ mode: 'delegate', maxRounds: 2 }),
    );
    w.publish();
    for (let round = 0; round < 2; round++) {
      expect((await w.process()).kind).toBe('parked');
      const id = w.taskIds()[round]!;
      w.complete(id, report(id, 'kubernetes', `round ${round + 1}`));
    }
    const result = resultOf(await w.process());
    expect(result.answer).toBe('final answer');
    expect(w.model.requests.map((r) => r.tools.length)).toEqual([2, 2, 0]);
    expect(w.model.requests[2]!.messages.at(-1)).toEqual({
      role: 'user',
      text: 'No more delegation rounds are available. Answer now with what you have.',
    });
    expect(w.taskIds()).toHaveLength(2);
  });

  it('makes a call to an unknown specialist a failed tool response, and the model answers without it', async () => {
    const w = new World(delegating([[{ name: 'delegate_networking', task: 'x' }]]), clusterConfig({ mode: 'delegate' }));
    w.publish();
    const result = resultOf(await w.process());
    expect(w.taskIds()).toEqual([]);
    expect(w.model.requests[1]!.messages.at(-1)).toMatchObject({
      role: 'tool',
      responses: [{ name: 'delegate_networking', isError: true }],
    });
    expect(result.specialists).toMatchObject([{ name: 'networking', status: 'failed' }]);
    expect(w.deadLetters.get(`failure-${w.runId()}-d0-networking`)?.reason).toContain('unknown specialist "networking"');
  });

  it('answers alone (completed) when the model delegates nothing', async () => {
    const w = new World(delegating([], 'nothing to do'), clusterConfig({ mode: 'delegate' }));
    w.publish();
    const result = resultOf(await w.process());
    expect(result).toMatchObject({ status: 'completed', answer: 'nothing to do', specialists: [] });
  });
});

describe('INCOMPLETE parts', () => {
  it('turns a lost, a failed, a malformed and a missing child into stall and failure parts with dead letters', async () => {
    const w = new World(routeTo('kubernetes', 'database'));
    w.publish(INCIDENT);
    await w.process();
    const [k8s, db] = w.taskIds() as [string, string];
    // Last words from the task's checkpoint, and its calls in doubt.
    await w.checkpoints.save(`task:${k8s}`, {
      v: 1,
      taskId: k8s,
      step: 2,
      toolRounds: 1,
      invalidOutputs: 0,
      askedToFinish: false,
      messages: [
        { role: 'user', text: 'go' },
        { role: 'model', text: 'looking at pods' },
      ],
    });
    w.fail(k8s, 'job stalled more than allowable limit', 3);
    w.fail(db, 'gateway unreachable');
    const result = resultOf(await w.process());
    expect(result.status).toBe('partial');
    const stall = w.deadLetters.get(`stall-${k8s}`)!;
    expect(stall).toMatchObject({ kind: 'stall', agent: 'kubernetes', taskId: k8s, lastWords: 'looking at pods', attempts: 3 });
    expect(w.deadLetters.get(`failure-${db}`)).toMatchObject({
      kind: 'failure',
      reason: 'gateway unreachable',
      lastWords: '',
      attempts: 2,
    });
    expect(w.eventsOf('agent.stalled').map((e) => e.data)).toEqual([
      { taskId: k8s, kind: 'stall', reason: 'job stalled more than allowable limit', marker: STALL_MARKER },
    ]);
    expect(w.eventsOf('agent.failed').map((e) => e.data.kind)).toEqual(['failure']);
    expect(result.specialists.map((s) => [s.name, s.status, isStalled(s.output)])).toEqual([
      ['kubernetes', 'stalled', true],
      ['database', 'failed', true],
    ]);
    // Neither was told to stop: they have ended.
    expect(w.stopped.size).toBe(0);

    const odd = new World(routeTo('kubernetes', 'database'));
    odd.publish();
    await odd.process();
    const [a, b] = odd.taskIds() as [string, string];
    odd.complete(a, { not: 'a task result' });
    // b's child is released without a result (as a removed dependency is).
    await odd.deps().jobs.release('database', b);
    const r2 = resultOf(await odd.process());
    expect(odd.deadLetters.get(`failure-${a}`)?.reason).toMatch(/^malformed result: /);
    expect(odd.deadLetters.get(`failure-${b}`)?.reason).toBe('no result from the specialist task');
    expect(r2.stalled).toBe(2);
  });

  it('times a task out at its deadline timer: INCOMPLETE timeout, the task told to stop, the run released', async () => {
    const w = new World(routeTo('kubernetes', 'database'));
    w.publish();
    await w.process();
    const [k8s, db] = w.taskIds() as [string, string];
    w.complete(db, report(db, 'database', 'ok'));
    w.now = T0 + 65_000;
    await w.fire(w.runTimer(T0 + 65_000));
    expect(w.stopped).toEqual(new Set([k8s]));
    expect(w.deadLetters.get(`timeout-${k8s}`)).toMatchObject({
      kind: 'timeout',
      reason: `kubernetes did not report before its deadline (${new Date(T0 + 60_000).toISOString()})`,
      attempts: 0,
    });
    expect(w.eventsOf('agent.stalled').map((e) => e.data.kind)).toEqual(['timeout']);
    expect(w.parents.get('inc-1')!.state).toBe('wait');
    // The next timer is armed at the next backstop (database's, 120 s + 5 s), saved with the checkpoint.
    expect([...w.timers.keys()]).toEqual([w.runTimer(T0 + 125_000)]);
    expect((await w.checkpoint()).timerAt).toBe(T0 + 125_000);
    const result = resultOf(await w.process());
    expect(result.status).toBe('partial');
    expect(result.specialists.map((s) => s.status)).toEqual(['stalled', 'completed']);
    expect(w.removedTimers).toEqual([w.runTimer(T0 + 125_000)]);
    // A timer of a finished run does nothing (nor does one of an earlier version).
    await handleTimer({ kind: 'run-timer', runId: w.runId(), at: T0 + 125_000 }, w.deps());
    await handleTimer({ kind: 'task-deadline', runId: w.runId(), taskId: k8s }, w.deps());
    expect(w.eventsOf('agent.stalled')).toHaveLength(1);
  });

  it('leaves a task whose child has completed to the run, and a timer of an active run alone', async () => {
    const w = new World(routeTo('kubernetes'));
    w.publish();
    await w.process();
    const [k8s] = w.taskIds() as [string];
    w.complete(k8s, report(k8s, 'kubernetes', 'ok'));
    // Completed but not collected yet: the run is back in the queue, not parked.
    w.now = T0 + 65_000;
    await w.fire(w.runTimer(T0 + 65_000));
    expect(w.deadLetters.size).toBe(0);
    // The run is `waiting` but not parked (it may be about to park): the timer looks again a second later.
    expect(w.timers.get(`${w.runTimer(T0 + 65_000)}-a1`)?.dueAt).toBe(T0 + 66_000);
    expect(resultOf(await w.process()).status).toBe('completed');
  });

  it("arms one timer at the run's deadline when that comes before every backstop", async () => {
    const w = new World(routeTo('kubernetes', 'database'), clusterConfig({ runDeadlineMs: 50_000 }));
    w.publish();
    expect((await w.process()).kind).toBe('parked');
    expect([...w.timers.keys()]).toEqual([w.runTimer(T0 + 50_000)]);
    w.now = T0 + 50_000;
    await w.fire(w.runTimer(T0 + 50_000));
    expect(w.deadLetters.size).toBe(2);
    expect(w.timers.size).toBe(0);
    expect(resultOf(await w.process()).status).toBe('partial');
  });

  it('looks again at a waiting run its timer found not parked, and the run arms its timer again when it parks', async () => {
    const w = new World(routeTo('kubernetes'));
    w.publish();
    await w.process();
    const [k8s] = w.taskIds() as [string];
    // The run was picked up again (its coordinator died, say) when its timer came.
    w.parents.get('inc-1')!.state = 'active';
    w.now = T0 + 65_000;
    await w.fire(w.runTimer(T0 + 65_000));
    expect(w.deadLetters.size).toBe(0);
    expect(w.timers.has(`${w.runTimer(T0 + 65_000)}-a1`)).toBe(true);
    // It parks again past its timer's time: the timer is armed again, and ends the task.
    w.timers.clear();
    expect((await w.process()).kind).toBe('parked');
    expect(w.timers.get(w.runTimer(T0 + 65_000))?.dueAt).toBe(T0 + 65_000);
    await w.fire(w.runTimer(T0 + 65_000));
    expect(w.deadLetters.get(`timeout-${k8s}`)?.kind).toBe('timeout');
  });

  it('writes a part whose task checkpoint or job cannot be read, and says so in the log', async () => {
    const w = new World(routeTo('kubernetes'));
    w.publish();
    await w.process();
    const [k8s] = w.taskIds() as [string];
    w.checkpoints.data.set(`task:${k8s}`, '{"v":1, broken');
    w.unreadableJobs.add(k8s);
    w.now = T0 + 65_000;
    await w.fire(w.runTimer(T0 + 65_000));
    expect(w.deadLetters.get(`timeout-${k8s}`)).toMatchObject({ lastWords: '', attempts: 0 });
    const warned = w.warnings().map((l) => [l.msg, l.taskId, (l.err as { message?: string } | undefined)?.message]);
    expect(warned).toContainEqual([
      'could not read the task checkpoint of an INCOMPLETE part: written without its last words',
      k8s,
      expect.stringContaining('JSON'),
    ]);
    expect(warned).toContainEqual([
      'could not read the task job: its INCOMPLETE part says attempts 0',
      k8s,
      'READONLY You can not write against a read only replica.',
    ]);
  });
});

describe('deadlines', () => {
  it("ends a parked run at the run's deadline timer: parts still out time out, the run ends partial with the deadline line", async () => {
    const w = new World(routeTo('kubernetes', 'database'));
    w.publish();
    await w.process();
    const [k8s, db] = w.taskIds() as [string, string];
    w.complete(k8s, report(k8s, 'kubernetes', 'ok'));
    // The run's timer, late: past the run's deadline, every part still out times out.
    w.now = T0 + 600_000;
    await w.fire(w.runTimer(T0 + 65_000));
    expect(w.deadLetters.get(`timeout-${db}`)?.reason).toBe('database the run reached its deadline');
    expect(w.parents.get('inc-1')!.state).toBe('wait');
    const result = resultOf(await w.process());
    expect(result.status).toBe('partial');
    expect(result.answer).toContain(`The run reached its deadline (${new Date(T0 + 600_000).toISOString()}) before it was complete.`);
    expect(result.specialists.map((s) => s.status)).toEqual(['completed', 'stalled']);

    // The loop checks the deadline too, at each step: here a run back from waiting past it.
    const loop = new World(routeTo('kubernetes', 'database'));
    loop.publish();
    await loop.process();
    const [a, b] = loop.taskIds() as [string, string];
    loop.complete(a, report(a, 'kubernetes', 'ok'));
    await loop.deps().jobs.release('database', b);
    loop.now = T0 + 600_001;
    const r2 = resultOf(await loop.process());
    expect(r2.status).toBe('partial');
    expect(r2.answer).toContain(`The run reached its deadline (${new Date(T0 + 600_000).toISOString()}) before it was complete.`);
    expect(loop.deadLetters.get(`timeout-${b}`)?.reason).toBe('database the run reached its deadline');
  });

  it('moves a task deadline while the task waits for an approval, and times it out once the moved deadline passes', async () => {
    const w = new World(routeTo('kubernetes'));
    w.publish();
    await w.process();
    const [k8s] = w.taskIds() as [string];
    const waitingSince = T0 + 30_000;
    await w.checkpoints.save(`task:${k8s}`, {
      v: 1,
      taskId: k8s,
      step: 1,
      toolRounds: 0,
      invalidOutputs: 0,
      askedToFinish: false,
      messages: [{ role: 'user', text: 'go' }],
      pending: { kind: 'approval', step: 1, approvalId: 'ap-1', at: new Date(waitingSince).toISOString() },
    });
    w.now = T0 + 65_000;
    await w.fire(w.runTimer(T0 + 65_000));
    // Waiting for 35 s so far: the deadline moves to 95 s (+5 s grace), and nothing times out.
    expect(w.deadLetters.size).toBe(0);
    const moved = w.timers.get(w.runTimer(T0 + 100_000))!;
    expect(moved.timer).toEqual({ kind: 'run-timer', runId: w.runId(), at: T0 + 100_000 });
    expect(moved.dueAt).toBe(T0 + 60_000 + 35_000 + 5_000);
    expect((await w.checkpoint()).timerAt).toBe(T0 + 100_000);
    expect(w.logs.some((l) => l.msg === 'task deadline moved by its approval wait' && l.dueAt === T0 + 100_000)).toBe(true);
    // Decided after 40 s of waiting: the deadline is 100 s; before it (+5 s), the timer moves again.
    await w.checkpoints.save(`task:${k8s}`, {
      v: 1,
      taskId: k8s,
      step: 2,
      toolRounds: 0,
      invalidOutputs: 0,
      askedToFinish: false,
      messages: [{ role: 'user', text: 'go' }],
      approvalWaitMs: 40_000,
    });
    w.now = moved.dueAt;
    await w.fire(w.runTimer(T0 + 100_000));
    expect(w.timers.get(w.runTimer(T0 + 105_000))?.dueAt).toBe(T0 + 105_000);
    expect(w.deadLetters.size).toBe(0);
    // Silent past it: the task times out, and no timer follows.
    w.now = T0 + 105_000;
    await w.fire(w.runTimer(T0 + 105_000));
    expect(w.timers.size).toBe(0);
    expect(w.deadLetters.get(`timeout-${k8s}`)?.kind).toBe('timeout');
  });
});

/** The cancellation the tests' runs are given: by alice, a false alarm. */
const cancellation: RunCancellation = { by: 'alice', reason: 'false alarm', at: '2026-03-01T10:00:30.000Z' };

describe('cancellation', () => {
  it('ends a parked run at once: parts cancelled, children released, approvals denied, the run cancelled', async () => {
    const w = new World(routeTo('kubernetes', 'database'));
    w.publish();
    await w.process();
    const [k8s, db] = w.taskIds() as [string, string];
    w.complete(db, report(db, 'database', 'ok'));
    await w.checkpoints.save(`task:${k8s}`, {
      v: 1,
      taskId: k8s,
      step: 1,
      toolRounds: 0,
      invalidOutputs: 0,
      askedToFinish: false,
      messages: [{ role: 'user', text: 'go' }],
      pending: { kind: 'approval', step: 1, approvalId: 'ap-1', at: new Date(T0).toISOString() },
    });
    w.pendingApprovals.set('ap-1', { id: 'ap-1', runId: w.runId(), incidentId: 'inc-1', agent: 'kubernetes', taskId: k8s } as Approval);
    w.cancelled.set(w.runId(), cancellation);
    await w.deps().timers.add({ kind: 'cancel-run', runId: w.runId() }, 0);
    await w.fire(`cancel-run-${w.runId()}`);
    expect(w.parents.get('inc-1')!.state).toBe('wait');
    expect(w.stopped).toEqual(new Set([k8s]));
    expect(w.decisions).toEqual([{ id: 'ap-1', decision: { approve: false, reason: 'the run was cancelled: false alarm', by: 'alice' } }]);
    expect(w.eventsOf('approval.resolved')).toHaveLength(1);
    const result = resultOf(await w.process());
    expect(result.status).toBe('cancelled');
    expect(result.cancelled).toEqual(cancellation);
    expect(result.specialists.map((s) => [s.name, s.status])).toEqual([
      ['kubernetes', 'stalled'],
      ['database', 'completed'],
    ]);
    expect(result.answer).toContain('This run was CANCELLED by alice at 2026-03-01T10:00:30.000Z: false alarm');
    expect(result.answer).toContain('Not finished: kubernetes.');
    // A cancelled part has no dead letter.
    expect(w.deadLetters.size).toBe(0);
    expect(w.eventsOf('agent.stalled').map((e) => e.data.reason)).toEqual(['the run was cancelled by alice: false alarm']);
  });

  it('announces once a part whose specialist saw the cancellation first and reported it cancelled, as it announces a part it cuts', async () => {
    const w = new World(routeTo('kubernetes', 'database'));
    w.publish();
    await w.process();
    const [k8s, db] = w.taskIds() as [string, string];
    w.complete(db, report(db, 'database', 'ok'));
    // The specialist stopped at the cancellation before the coordinator ended the run.
    w.complete(k8s, report(k8s, 'kubernetes', 'INCOMPLETE', { status: 'stalled', error: 'cancelled', reason: 'cancelled' }));
    w.cancelled.set(w.runId(), cancellation);
    await w.deps().timers.add({ kind: 'cancel-run', runId: w.runId() }, 0);
    await w.fire(`cancel-run-${w.runId()}`);
    const result = resultOf(await w.process());
    expect(result.status).toBe('cancelled');
    expect(result.specialists.map((s) => [s.name, s.status])).toEqual([
      ['kubernetes', 'stalled'],
      ['database', 'completed'],
    ]);
    expect(w.eventsOf('agent.stalled').map((e) => [e.agent, e.data.kind, e.data.reason])).toEqual([
      ['kubernetes', 'cancelled', 'the run was cancelled by alice: false alarm'],
    ]);
    expect(w.deadLetters.size).toBe(0);
  });

  it('ends an active run at its next step, before any child job, when cancelled during its model call', async () => {
    const w = new World(() => {
      w.cancelled.set(w.runId(), cancellation);
      return { text: '{"specialists": ["kubernetes"]}', calls: [] };
    });
    w.publish();
    const result = resultOf(await w.process());
    expect(w.taskIds()).toEqual([]);
    expect(result.status).toBe('cancelled');
    expect(result.specialists).toMatchObject([{ name: 'kubernetes', status: 'stalled' }]);
    expect(w.stopped).toEqual(new Set([`${w.runId()}-d0-kubernetes`]));
  });

  it('ends a run not started yet before anything else, and says nothing was checked', async () => {
    const w = new World(routeTo('kubernetes'));
    w.publish();
    w.cancelled.set(w.runId(), cancellation);
    const result = resultOf(await w.process());
    expect(w.model.requests).toHaveLength(0);
    expect(result.status).toBe('cancelled');
    expect(result.answer).toContain('It was cancelled before anything was delegated: nothing was checked.');
    expect(w.eventsOf('run.started')).toHaveLength(1);
    expect(w.eventsOf('run.completed')[0]!.data.cancelled).toEqual(cancellation);
  });

  it('looks again, a second apart and at most 30 times, at a cancellation of a run that is not parked', async () => {
    const w = new World(routeTo('kubernetes'));
    w.publish();
    w.cancelled.set(w.runId(), cancellation);
    await handleTimer({ kind: 'cancel-run', runId: w.runId() }, w.deps());
    expect(w.timers.get(`cancel-run-${w.runId()}-a1`)).toEqual({
      timer: { kind: 'cancel-run', runId: w.runId(), again: 1 },
      dueAt: T0 + 1_000,
    });
    await handleTimer({ kind: 'cancel-run', runId: w.runId(), again: CANCEL_LOOKS }, w.deps());
    expect(w.timers.has(`cancel-run-${w.runId()}-a${CANCEL_LOOKS + 1}`)).toBe(false);
    // Other timers of a run that is not parked do nothing.
    await handleTimer({ kind: 'run-deadline', runId: w.runId() }, w.deps());
    expect(w.timers.size).toBe(1);
  });
});

describe('resume after a crash', () => {
  it('routing: a coordinator killed in its classifier call is replaced; the run starts over and delegates once', async () => {
    let calls = 0;
    const w = new World(() => (++calls === 1 ? never() : { text: '{"specialists": ["kubernetes"]}', calls: [] }));
    w.publish();
    w.start();
    await settleUntil(() => calls === 1);
    expect(await w.checkpoints.load(runCheckpointId(w.runId()))).toBeNull();
    expect((await w.process()).kind).toBe('parked');
    expect(w.taskIds()).toHaveLength(1);
    expect(w.eventsOf('agent.delegated')).toHaveLength(1);
    expect(w.eventsOf('run.started')).toHaveLength(2);
  });

  it('waiting: a parked run resumes in another coordinator when its children finish', async () => {
    const w = new World(routeTo('kubernetes'));
    w.publish();
    await w.process();
    const [k8s] = w.taskIds() as [string];
    w.complete(k8s, report(k8s, 'kubernetes', 'ok'));
    // A new World's deps stand for another process; the state (Redis) is the same.
    const result = resultOf(await w.process());
    expect(result.status).toBe('completed');
    expect(w.model.requests).toHaveLength(1);
    expect(w.eventsOf('run.started')).toHaveLength(1);
  });

  it('thinking: a saved model turn is acted on, not asked again, and each delegation gets one child job', async () => {
    const w = new World(
      delegating([
        [
          { name: 'delegate_kubernetes', task: 'a' },
          { name: 'delegate_database', task: 'b' },
        ],
      ]),
      clusterConfig({ mode: 'delegate' }),
    );
    w.publish();
    w.hangOnAdd.add(`${w.runId()}-d0-kubernetes`);
    w.start();
    await settleUntil(() => w.model.requests.length === 1 && w.eventsOf('run.routed').length === 1);
    const saved = await w.checkpoint();
    expect(saved.phase).toBe('thinking');
    expect(saved.delegations).toHaveLength(2);
    w.hangOnAdd.clear();
    expect((await w.process()).kind).toBe('parked');
    expect(w.model.requests).toHaveLength(1);
    expect(w.taskIds().sort()).toEqual([`${w.runId()}-d0-kubernetes`, `${w.runId()}-d1-database`]);
  });

  it('done: a run whose result was saved returns it without asking or announcing again', async () => {
    const w = new World(routeTo('kubernetes'));
    w.publish();
    await w.process();
    const [k8s] = w.taskIds() as [string];
    w.complete(k8s, report(k8s, 'kubernetes', 'ok'));
    const first = resultOf(await w.process());
    const events = w.events.events.length;
    expect(resultOf(await w.process())).toEqual(first);
    expect(w.events.events.length).toBe(events);
    expect(w.model.requests).toHaveLength(1);

    // Saved as done without its result (killed between the two writes): answered from the parts.
    const d = new World(routeTo('kubernetes'));
    d.publish();
    await d.process();
    const [t] = d.taskIds() as [string];
    d.complete(t, report(t, 'kubernetes', 'fine'));
    const ckpt = await d.checkpoint();
    await d.checkpoints.save(runCheckpointId(d.runId()), {
      ...ckpt,
      phase: 'done',
      delegations: [{ ...ckpt.delegations[0]!, result: report(t, 'kubernetes', 'fine') }],
    });
    const r = resultOf(await d.process());
    expect(r.status).toBe('completed');
    expect(r.answer).toContain('## kubernetes — completed\nfine');
  });

  it('fails a run whose checkpoint cannot be used, with a dead letter and run.failed', async () => {
    const w = new World(routeTo('kubernetes'));
    w.publish();
    await w.process();
    await w.checkpoints.save(runCheckpointId(w.runId()), { v: 2, phase: 'wait' });
    const outcome = await w.process();
    expect(outcome).toEqual({ kind: 'rejected', reason: expect.stringContaining(`checkpoint run:${w.runId()} cannot be used`) });
    expect(w.deadLetters.get(`failure-${w.runId()}-checkpoint`)?.kind).toBe('failure');
    expect(w.eventsOf('run.failed')).toHaveLength(1);
  });
});

describe('rejected input and failed runs', () => {
  it('rejects a job with another name, an invalid incident and a job id other than the incident id, as poison', async () => {
    const w = new World(routeTo('kubernetes'));
    w.publish(INCIDENT, { name: 'oops' });
    expect(await w.process()).toEqual({ kind: 'rejected', reason: 'unexpected job name "oops"' });
    w.publish({ ...INCIDENT, id: 'inc-2', summary: '', source: 5 as never });
    expect((await w.process('inc-2')).kind).toBe('rejected');
    w.publish({ ...INCIDENT, id: 'inc-3' }, { id: 'job-3' });
    expect(await w.process('job-3')).toEqual({
      kind: 'rejected',
      reason: 'job id "job-3" does not match the incident\'s id "inc-3": publish an incident with its id as the job id',
    });
    expect([...w.deadLetters.keys()]).toEqual([`poison-inc-1-${T0}`, `poison-inc-2-${T0}`, `poison-job-3-${T0}`]);
    expect([...w.deadLetters.values()].every((d) => d.kind === 'poison')).toBe(true);
    expect(w.model.requests).toHaveLength(0);
  });

  it('throws a retryable model error while the job has attempts left, then ends the run failed', async () => {
    const w = new World(() => {
      throw new ModelError('429 rate limited', { retryable: true, status: 429 });
    });
    w.publish(INCIDENT, { maxAttempts: 2 });
    await expect(w.process()).rejects.toThrow('429 rate limited');
    const result = resultOf(await w.process());
    expect(result.status).toBe('failed');
    expect(result.answer).toBe('The run failed before it could answer: 429 rate limited');
    expect(w.deadLetters.get(`failure-${w.runId()}`)?.reason).toBe('429 rate limited');
  });
});

describe('an answer the provider cut off', () => {
  it('never ends the run completed with it: the last turn cut at the output limit fails the run, naming the limit', async () => {
    // The real OpenAI adapter against recorded answers: the delegation, then a last turn with finish_reason length.
    const server = await startOpenAiServer((req) =>
      req.body.messages.some((m) => m.role === 'tool')
        ? openAiFixture('finish-length')
        : completion({ calls: [['delegate_kubernetes', { task: 'check pods' }]] }),
    );
    try {
      const model = new OpenAiModel({ apiKey: 'sk-test', model: 'gpt-4.1-mini', baseUrl: server.baseUrl });
      const w = new World((request) => model.generate(request), clusterConfig({ mode: 'delegate' }));
      w.publish();
      expect((await w.process()).kind).toBe('parked');
      const [k8s] = w.taskIds() as [string];
      w.complete(k8s, report(k8s, 'kubernetes', 'pods fine'));
      const result = resultOf(await w.process());
      expect(result.status).toBe('failed');
      expect(result.answer).toBe(
        'The run failed before it could answer: OpenAI cut the answer off at the output token limit (finish_reason length)',
      );
      expect(result.specialists).toEqual([expect.objectContaining({ name: 'kubernetes', status: 'completed' })]);
    } finally {
      await server.close();
    }
  });
  it('Gemini: "The capital of France is" with finishReason MAX_TOKENS as the last turn fails the run, naming the limit', async () => {
    const server = await startGeminiServer((i) => (i === 0 ? 'function-call-with-id' : 'max-tokens'));
    try {
      const model = new GeminiModel({ apiKey: 'AIza-test', baseUrl: server.baseUrl });
      const delegate = (request: ModelRequest) =>
        request.messages.some((m) => m.role === 'tool')
          ? model.generate(request)
          : { calls: [{ id: 'c0', name: 'delegate_kubernetes', args: { task: 'check pods' } }] };
      const w = new World(delegate, clusterConfig({ mode: 'delegate' }));
      w.publish();
      expect((await w.process()).kind).toBe('parked');
      const [k8s] = w.taskIds() as [string];
      w.complete(k8s, report(k8s, 'kubernetes', 'pods fine'));
      const result = resultOf(await w.process());
      expect(result.status).toBe('failed');
      expect(result.answer).not.toContain('The capital of France is');
      expect(result.answer).toBe(
        'The run failed before it could answer: Gemini cut the answer off at the output token limit (finishReason MAX_TOKENS)',
      );
    } finally {
      await server.close();
    }
  });
});

describe('dlq retry of a delegation (retry-task)', () => {
  it('hands a failed part of a parked run to its specialist again; the retry supersedes it', async () => {
    const w = new World(routeTo('kubernetes', 'database'));
    w.publish();
    await w.process();
    const [k8s, db] = w.taskIds() as [string, string];
    w.fail(db, 'gateway unreachable');
    // The run still waits for kubernetes; the operator retries the database part.
    await w.deps().timers.add({ kind: 'retry-task', runId: w.runId(), taskId: db }, 0);
    await w.fire(`retry-task-${db}`);
    const retry = `${w.runId()}-d2-database`;
    expect(w.children.get(retry)?.task).toMatchObject({ agent: 'database', task: expect.stringContaining('(database)') });
    expect(w.eventsOf('agent.delegated').at(-1)!.data).toMatchObject({ taskId: retry, retryOf: db });
    expect((await w.checkpoint()).delegations[2]).toMatchObject({ taskId: retry, retryOf: db, deadlineAt: expect.any(String) });
    // Twice is once.
    await handleTimer({ kind: 'retry-task', runId: w.runId(), taskId: db }, w.deps());
    expect(w.taskIds()).toHaveLength(3);
    w.complete(k8s, report(k8s, 'kubernetes', 'ok'));
    w.complete(retry, report(retry, 'database', 'fine now'));
    const result = resultOf(await w.process());
    expect(result.status).toBe('completed');
    expect(result.specialists.map((s) => [s.name, s.status])).toEqual([
      ['kubernetes', 'completed'],
      ['database', 'completed'],
    ]);
    expect(result.answer).toContain('fine now');
  });
});

describe('calls in doubt', () => {
  it("gathers every part's calls in doubt once, makes the run partial, and names them in the answer", async () => {
    const w = new World(
      delegating(
        [
          [
            { name: 'delegate_kubernetes', task: 'a' },
            { name: 'delegate_database', task: 'b' },
          ],
        ],
        'all good',
      ),
      clusterConfig({ mode: 'delegate' }),
    );
    w.publish();
    await w.process();
    const [k8s, db] = w.taskIds() as [string, string];
    const call = { key: `${k8s}-s1-c0`, tool: 'demo__restart_pod' };
    w.complete(k8s, report(k8s, 'kubernetes', 'restarted', { inDoubt: [call, call] }));
    w.complete(db, report(db, 'database', 'ok', { inDoubt: [{ key: `${db}-s2-c1`, tool: 'demo__kill_query' }] }));
    const result = resultOf(await w.process());
    expect(result.status).toBe('partial');
    expect(result.inDoubt).toEqual({
      count: 2,
      calls: [
        { ...call, agent: 'kubernetes' },
        { key: `${db}-s2-c1`, tool: 'demo__kill_query', agent: 'database' },
      ],
    });
    expect(result.answer).toMatch(/^all good\n\nIN DOUBT: 2 mutating tool calls were sent/);
    expect(w.eventsOf('run.completed')[0]!.data.inDoubt).toEqual(result.inDoubt);
  });
});

describe('a timer racing a run resumed elsewhere', () => {
  it('never writes over the result the run saved meanwhile: it looks again, finds the result, and stops', async () => {
    const w = new World(routeTo('kubernetes', 'database'));
    w.publish();
    await w.process();
    const [k8s, db] = w.taskIds() as [string, string];
    w.complete(k8s, report(k8s, 'kubernetes', 'ok'));
    w.now = T0 + 130_000;
    let finished: RunResult | undefined;
    w.hook = async (port, taskId) => {
      if (port !== 'childAttempts' || taskId !== db || finished) return;
      // The timer found db still out and writes its INCOMPLETE part; meanwhile db completes and
      // the run finishes in another process.
      w.complete(db, report(db, 'database', 'ok'));
      finished = resultOf(await w.process());
    };
    await w.fire(w.runTimer(T0 + 65_000));
    expect(finished?.status).toBe('completed');
    const ckpt = await w.checkpoint();
    expect(ckpt.result).toEqual(finished);
    expect(ckpt.phase).toBe('done');
    expect(ckpt.delegations.map((d) => d.result?.status)).toEqual(['completed', 'completed']);
    expect(w.logs.some((l) => l.msg === 'the run changed while a timer worked on it: looking again')).toBe(true);
    // Nothing released the finished run's children from here.
    expect(w.parents.get('inc-1')!.state).toBe('completed');
  });

  it("looks again when the run changed before its write, and does not lose the other writer's parts", async () => {
    const w = new World(routeTo('kubernetes', 'database'));
    w.publish();
    await w.process();
    const [k8s, db] = w.taskIds() as [string, string];
    w.now = T0 + 130_000;
    let raced = false;
    w.hook = async (port, taskId) => {
      if (port !== 'childAttempts' || taskId !== db || raced) return;
      raced = true;
      // Another timer (kubernetes's deadline) saves its part first.
      await handleTimer({ kind: 'task-deadline', runId: w.runId(), taskId: k8s }, w.deps());
    };
    await w.fire(w.runTimer(T0 + 65_000));
    const ckpt = await w.checkpoint();
    expect(ckpt.delegations.map((d) => [d.agent, d.result?.status])).toEqual([
      ['kubernetes', 'stalled'],
      ['database', 'stalled'],
    ]);
    expect(w.logs.some((l) => l.msg === 'the run changed while a timer worked on it: looking again')).toBe(true);
    expect(resultOf(await w.process()).specialists.map((s) => s.status)).toEqual(['stalled', 'stalled']);
  });
});

/** A specialist of the coordinator's own process whose tasks answer as `answer` says, with `places` places. */
function localSpecialist(answer: (task: TaskJob, lock: RunLock) => Promise<LocalOutcome>, places = 4) {
  const seen: { task: TaskJob; lock: RunLock }[] = [];
  let taken = 0;
  const specialist: LocalSpecialist & { seen: typeof seen; taken: () => number } = {
    seen,
    taken: () => taken,
    reserve: () => {
      if (taken >= places) return undefined;
      taken++;
      return { release: () => void taken-- };
    },
    run: (task, lock) => {
      seen.push({ task, lock });
      return answer(task, lock);
    },
  };
  return specialist;
}

/** A local task's result as the task loop returns it: saved in its task checkpoint first. */
async function savedResult(w: World, result: TaskResult): Promise<LocalOutcome> {
  const ckpt = {
    v: 1,
    taskId: result.taskId,
    step: 1,
    toolRounds: 0,
    invalidOutputs: 0,
    askedToFinish: false,
    messages: [{ role: 'user', text: 't' }],
    result,
  };
  await w.checkpoints.save(`task:${result.taskId}`, ckpt);
  return { kind: 'result', result };
}

describe('local tasks (bosun serve: the specialist in the coordinator’s process)', () => {
  it('runs the round in the run’s pass: no child job, no park, no timer; the checkpoint refers to the task’s output', async () => {
    const w = new World(routeTo('kubernetes'));
    w.fenced = true;
    const k8s = localSpecialist(async (task) => ({ kind: 'result', result: report(task.taskId, 'kubernetes', 'OOM kills') }));
    w.local = new Map([['kubernetes', k8s]]);
    w.publish();
    const result = resultOf(await w.process());
    expect(result.status).toBe('completed');
    expect(result.answer).toContain('## kubernetes — completed\nOOM kills');
    expect([w.children.size, w.parks, w.timers.size]).toEqual([0, 0, 0]);
    const [{ task, lock }] = k8s.seen as [{ task: TaskJob; lock: RunLock }];
    // The task runs under the run's lock: the gateway checks the incident job's, its writes are fenced by it.
    expect(lock).toMatchObject({ jobId: 'inc-1', fence: { key: 'lock:inc-1', token: 'token-1' } });
    expect(task).toMatchObject({ agent: 'kubernetes', runId: w.runId(), deadlineAt: new Date(T0 + 60_000).toISOString() });
    expect(task.resumed).toBeUndefined();
    expect(k8s.taken()).toBe(0);
    const [d] = (await w.checkpoint()).delegations;
    expect(d).toMatchObject({ taskId: task.taskId, result: { outputIn: 'checkpoint', output: null } });
    expect(d).not.toHaveProperty('local');
    expect(w.eventsOf('agent.delegated').map((e) => e.data)).toEqual([expect.objectContaining({ taskId: task.taskId, local: true })]);
  });

  it('writes the run’s checkpoint, the delegation marked local, before the task starts', async () => {
    const w = new World(routeTo('kubernetes'));
    w.fenced = true;
    let seenAtStart: RunCheckpoint | undefined;
    w.local = new Map([
      [
        'kubernetes',
        localSpecialist(async (task) => {
          seenAtStart = await w.checkpoint();
          return { kind: 'result', result: report(task.taskId, 'kubernetes', 'ok') };
        }),
      ],
    ]);
    w.publish();
    await w.process();
    expect(seenAtStart).toMatchObject({ phase: 'waiting', delegations: [{ agent: 'kubernetes', local: true }] });
    expect(seenAtStart!.delegations[0]!.result).toBeUndefined();
  });

  it('writes the routing and the local marks in one checkpoint write: the run is written twice in all', async () => {
    const w = new World(routeTo('kubernetes'));
    w.fenced = true;
    w.local = new Map([['kubernetes', localSpecialist(async (task) => savedResult(w, report(task.taskId, 'kubernetes', 'ok')))]]);
    const written: RunCheckpoint[] = [];
    const save = w.checkpoints.save.bind(w.checkpoints);
    w.checkpoints.save = async (id, value, options) => {
      if (!id.startsWith('task:')) written.push(structuredClone(value) as RunCheckpoint);
      await save(id, value, options);
    };
    w.publish();
    expect(resultOf(await w.process()).status).toBe('completed');
    expect(written.map((c) => [c.phase, c.routed, c.delegations.map((d) => d.local ?? false)])).toEqual([
      ['waiting', ['kubernetes'], [true]],
      ['done', ['kubernetes'], [false]],
    ]);
  });

  it('a cancellation read beside that write runs no task, gives its place back and ends the run cancelled', async () => {
    const w = new World(() => {
      w.cancelled.set(w.runId(), cancellation);
      return { text: '{"specialists": ["kubernetes"]}', calls: [] };
    });
    w.fenced = true;
    const k8s = localSpecialist(async (task) => savedResult(w, report(task.taskId, 'kubernetes', 'ok')));
    w.local = new Map([['kubernetes', k8s]]);
    w.publish();
    const result = resultOf(await w.process());
    expect(result.status).toBe('cancelled');
    expect([k8s.seen.length, k8s.taken(), w.children.size]).toEqual([0, 0, 0]);
    expect(w.eventsOf('agent.delegated')).toEqual([]);
    const saved = await w.checkpoint();
    expect(saved.delegations.map((d) => [d.agent, d.result?.status ?? null, d.local ?? null])).toEqual([['kubernetes', 'stalled', null]]);
  });

  it('hands a task that cannot go on here (an approval, a drain) to its queue as a resumed child, and parks', async () => {
    const w = new World(routeTo('kubernetes', 'database'));
    w.fenced = true;
    const answer = async (task: TaskJob): Promise<LocalOutcome> => {
      if (task.agent === 'kubernetes') return { kind: 'queue', reason: 'it waits for an approval' };
      return savedResult(w, report(task.taskId, 'database', 'slow queries'));
    };
    w.local = new Map([
      ['kubernetes', localSpecialist(answer)],
      ['database', localSpecialist(answer)],
    ]);
    w.publish();
    expect((await w.process()).kind).toBe('parked');
    const [k8s] = w.taskIds() as [string];
    expect(w.taskIds()).toEqual([k8s]);
    expect(w.children.get(k8s)!.task).toMatchObject({ agent: 'kubernetes', resumed: true });
    expect(w.children.get(k8s)!.attempts).toBe(2);
    // Its backstop is armed as for any child; the part that came back is in the checkpoint.
    expect([...w.timers.keys()]).toEqual([w.runTimer(T0 + 65_000)]);
    const saved = await w.checkpoint();
    expect(saved.delegations.map((d) => [d.agent, d.result?.status ?? null, d.local ?? null])).toEqual([
      ['kubernetes', null, null],
      ['database', 'completed', null],
    ]);
    w.complete(k8s, report(k8s, 'kubernetes', 'restarted'));
    const result = resultOf(await w.process());
    expect(result.status).toBe('completed');
    expect(result.answer).toContain('restarted');
    expect(result.answer).toContain('slow queries');
  });

  it('a run picked up after its process died under a local task hands that task to its queue, resumed from its checkpoint', async () => {
    const w = new World(routeTo('kubernetes'));
    w.fenced = true;
    const k8s = localSpecialist(() => never());
    w.local = new Map([['kubernetes', k8s]]);
    w.publish();
    w.start();
    await settleUntil(() => k8s.seen.length === 1);
    // The process is gone; another coordinator, without local specialists, picks the run up.
    w.local = undefined;
    expect((await w.process()).kind).toBe('parked');
    const [taskId] = w.taskIds() as [string];
    expect(taskId).toBe(k8s.seen[0]!.task.taskId);
    expect(w.children.get(taskId)!.task).toMatchObject({ resumed: true, deadlineAt: new Date(T0 + 60_000).toISOString() });
    expect((await w.checkpoint()).delegations[0]).not.toHaveProperty('local');
    w.complete(taskId, report(taskId, 'kubernetes', 'resumed and done'));
    expect(resultOf(await w.process()).answer).toContain('resumed and done');
  });

  it('goes to the queues as before when a specialist of the round has no place free here', async () => {
    const w = new World(routeTo('kubernetes', 'database'));
    w.fenced = true;
    const k8s = localSpecialist(async (task) => ({ kind: 'result', result: report(task.taskId, 'kubernetes', 'x') }));
    const db = localSpecialist(async (task) => ({ kind: 'result', result: report(task.taskId, 'database', 'y') }), 0);
    w.local = new Map([
      ['kubernetes', k8s],
      ['database', db],
    ]);
    w.publish();
    expect((await w.process()).kind).toBe('parked');
    expect(w.taskIds()).toHaveLength(2);
    expect([...w.children.values()].map((c) => c.task.resumed)).toEqual([undefined, undefined]);
    expect([k8s.seen.length, k8s.taken()]).toEqual([0, 0]);
  });

  it('a local task past its backstop becomes an INCOMPLETE timeout part, and is told to stop', async () => {
    const w = new World(routeTo('kubernetes'));
    w.fenced = true;
    // The task runs past its deadline (60 s) and the grace (5 s) without reporting.
    const k8s = localSpecialist(() => {
      w.now = T0 + 70_000;
      return never();
    });
    w.local = new Map([['kubernetes', k8s]]);
    w.publish();
    const result = resultOf(await w.process());
    expect(result.status).toBe('partial');
    expect(result.specialists).toEqual([expect.objectContaining({ name: 'kubernetes', status: 'stalled' })]);
    const taskId = k8s.seen[0]!.task.taskId;
    expect(w.stopped).toEqual(new Set([taskId]));
    expect([...w.deadLetters.keys()]).toEqual([`timeout-${taskId}`]);
  });

  it('a local task that saw the run cancelled ends it: the run is cancelled, the part announced once, as a child’s would be', async () => {
    const w = new World(routeTo('kubernetes'));
    w.fenced = true;
    w.local = new Map([
      [
        'kubernetes',
        localSpecialist(async (task) => {
          w.cancelled.set(w.runId(), cancellation);
          return {
            kind: 'result',
            result: report(task.taskId, 'kubernetes', 'INCOMPLETE', { status: 'stalled', error: 'cancelled', reason: 'cancelled' }),
          };
        }),
      ],
    ]);
    w.publish();
    const result = resultOf(await w.process());
    expect(result.status).toBe('cancelled');
    expect(w.eventsOf('agent.stalled').map((e) => [e.agent, e.data.kind])).toEqual([['kubernetes', 'cancelled']]);
    expect(w.deadLetters.size).toBe(0);
  });

  it('announces a part its local task ended as cancelled when another task of the round went to its queue, once', async () => {
    const w = new World(routeTo('kubernetes', 'database'));
    w.fenced = true;
    const answer = async (task: TaskJob): Promise<LocalOutcome> => {
      if (task.agent === 'database') return { kind: 'queue', reason: 'it waits for an approval' };
      w.cancelled.set(w.runId(), cancellation);
      const result = report(task.taskId, 'kubernetes', 'INCOMPLETE', { status: 'stalled', error: 'cancelled', reason: 'cancelled' });
      return savedResult(w, result);
    };
    w.local = new Map([
      ['kubernetes', localSpecialist(answer)],
      ['database', localSpecialist(answer)],
    ]);
    w.publish();
    const first = await w.process();
    // Parked for the queued task, or ended at once (the cancellation seen at the top of the loop).
    if (first.kind === 'parked') {
      const [db] = w.taskIds() as [string];
      w.complete(db, report(db, 'database', 'INCOMPLETE', { status: 'stalled', error: 'cancelled', reason: 'cancelled' }));
      expect(resultOf(await w.process()).status).toBe('cancelled');
    } else expect(resultOf(first).status).toBe('cancelled');
    const kubernetes = w.eventsOf('agent.stalled').filter((e) => e.agent === 'kubernetes');
    expect(kubernetes.map((e) => e.data.kind)).toEqual(['cancelled']);
  });

  it('a lost run lock ends the pass as lost: nothing more is written for the run', async () => {
    const w = new World(routeTo('kubernetes'));
    w.fenced = true;
    w.local = new Map([
      [
        'kubernetes',
        localSpecialist(async (task) => {
          throw new LockLostError(`task ${task.taskId}`);
        }),
      ],
    ]);
    w.publish();
    expect((await w.process()).kind).toBe('lost');
    expect(w.children.size).toBe(0);
    expect((await w.checkpoint()).delegations[0]).toMatchObject({ local: true });
  });
});
