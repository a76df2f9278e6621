import {
  BosunError,
  TaskCheckpoint,
  taskCheckpointId,
  type EventType,
  type TaskCheckpointData,
  type TaskJob,
  type TaskResult,
} from '@bosun/contract';
import { renderIncident } from '@bosun/models';
import { TaskStop } from './task-stop.js';
import { ToolView } from './task-tools.js';
import type { TaskAgentDeps, TaskAgentSpec, TaskAttempt } from './task-types.js';

/** What a {@link TaskRun} is made of. */
interface TaskRunInit {
  job: TaskJob;
  spec: TaskAgentSpec;
  deps: TaskAgentDeps;
  attempt: number;
  /** The attempt's own signal (BullMQ's processor signal), when it has one. */
  signal?: AbortSignal | undefined;
  state: TaskCheckpointData;
  dirty: boolean;
  tools: ToolView;
}

/**
 * One run of a task: its job, spec and ports, which attempt this is, its checkpointed state and
 * how that is saved, and its view of the tools. Every step of the loop works on it.
 */
export class TaskRun {
  readonly job: TaskJob;
  readonly spec: TaskAgentSpec;
  readonly deps: TaskAgentDeps;
  readonly attempt: number;
  /** The checkpoint id: `task:<taskId>`. */
  readonly ckptId: string;
  readonly tools: ToolView;
  /** The task's one stop signal (a lost lock, the drain, a cancel, the deadline): see {@link TaskStop}. */
  readonly stop: TaskStop;
  state: TaskCheckpointData;
  /**
   * What is in memory but not yet in the checkpoint. The state is saved before every effect
   * (tool calls, an approval request, the result) and before a hand-over — not after each model
   * call or tool round: a model call has no effect to protect, and tool results are answered
   * again from the gateway's records under the same keys if the task resumes elsewhere.
   */
  dirty: boolean;
  private cancelCheck: Promise<boolean> | undefined;

  constructor(init: TaskRunInit) {
    this.job = init.job;
    this.spec = init.spec;
    this.deps = init.deps;
    this.attempt = init.attempt;
    this.ckptId = taskCheckpointId(init.job.taskId);
    this.tools = init.tools;
    this.state = init.state;
    this.dirty = init.dirty;
    this.stop = new TaskStop(this, { signal: init.signal, drain: init.deps.drain });
  }

  /** The time, from the deps' clock (the system clock by default). */
  now(): number {
    return this.deps.clock ? this.deps.clock.now() : Date.now();
  }

  /** Emits an event of this task's run and agent. */
  emit(type: EventType, data: Record<string, unknown>): void {
    this.deps.events.emit({ runId: this.job.runId, incidentId: this.job.incidentId, agent: this.spec.name, type, data });
  }

  /** Writes the checkpoint. */
  async save(): Promise<void> {
    await this.deps.checkpoints.save(this.ckptId, this.state);
    this.dirty = false;
  }

  /** Writes the checkpoint when the state has changed since the last write. */
  async saveIfDirty(): Promise<void> {
    if (this.dirty) await this.save();
  }

  /** Records the task's result (with the calls in doubt, however it ended) and returns it. */
  async finish(result: TaskResult): Promise<TaskResult> {
    const { inDoubt, usage } = this.state;
    this.state.result = { ...result, ...(inDoubt && inDoubt.length > 0 ? { inDoubt } : {}), ...(usage ? { usage } : {}) };
    // The run's ledger gets the task's final total (a repeated write replaces it: counted once).
    if (usage && this.deps.runBudget) await this.deps.runBudget.ledger.record(this.job.runId, this.job.taskId, usage);
    await this.save();
    return this.state.result;
  }

  /** When the task must be done; see {@link taskDeadline}. */
  deadline(): number {
    return taskDeadline(this.job.deadlineAt, this.state, this.now());
  }

  /** The last message of the conversation: the model's turn, or what it answers next. */
  lastMessage(): TaskCheckpointData['messages'][number] {
    const last = this.state.messages[this.state.messages.length - 1];
    if (!last) throw new BosunError('corrupt_checkpoint', `checkpoint ${this.ckptId} has no messages`);
    return last;
  }

  /** The text of the model's last turn that had one ('' when none had). */
  lastWords(): string {
    const { messages } = this.state;
    for (let i = messages.length - 1; i >= 0; i--) {
      const m = messages[i];
      if (m && m.role === 'model' && m.text) return m.text;
    }
    return '';
  }

  /** A new model turn is acted on: whether the task was cancelled is asked again, once. */
  newTurn(): void {
    this.cancelCheck = undefined;
  }

  /**
   * Whether the coordinator has given up on this task or an operator cancelled its run: asked
   * once per model turn acted on (the answer is shared by every effect of that turn).
   */
  isCancelled(): Promise<boolean> {
    const { deps, job } = this;
    return (this.cancelCheck ??= deps.isCancelled ? deps.isCancelled(job.taskId, job.runId) : Promise.resolve(false));
  }

  /** The approval store and its waiter; throws when the task has either missing. */
  approvals(): { store: NonNullable<TaskAgentDeps['approvals']>; waiter: NonNullable<TaskAgentDeps['approvalWaiter']> } {
    const { approvals: store, approvalWaiter: waiter } = this.deps;
    if (!store || !waiter)
      throw new BosunError(
        'no_approvals',
        `agent ${this.spec.name} called a tool that needs approval, but no approval ${store ? 'waiter' : 'store'} is configured`,
      );
    return { store, waiter };
  }
}

/**
 * Opens a run of a task: from its checkpoint when one exists (unless this is the job's first
 * pickup), else from the job (emitting `agent.started`). Returns the saved result instead when
 * the task already has one.
 */
export async function openTaskRun(job: TaskJob, spec: TaskAgentSpec, deps: TaskAgentDeps, at: TaskAttempt): Promise<TaskRun | TaskResult> {
  const ckptId = taskCheckpointId(job.taskId);
  const loaded = at.firstPickup ? null : TaskCheckpoint.parse(await deps.checkpoints.load(ckptId), ckptId);
  if (loaded?.result) return loaded.result;
  let state: TaskCheckpointData;
  if (loaded) {
    state = loaded;
    deps.log.info({ taskId: job.taskId, step: state.step }, 'resuming task from its checkpoint');
  } else {
    state = {
      v: 1,
      taskId: job.taskId,
      step: 0,
      toolRounds: 0,
      invalidOutputs: 0,
      askedToFinish: false,
      messages: [{ role: 'user', text: `${job.task}\n\n${renderIncident(job.incident)}` }],
    };
    deps.events.emit({
      runId: job.runId,
      incidentId: job.incidentId,
      agent: spec.name,
      type: 'agent.started',
      data: { taskId: job.taskId, task: job.task },
    });
  }
  const tools = await ToolView.load(spec, deps);
  if (!state.routing) {
    const routing = tools.initialRouting();
    if (routing) state.routing = routing;
  }
  return new TaskRun({ job, spec, deps, attempt: at.attempt, signal: at.signal, state, dirty: !loaded, tools });
}

/**
 * When a task must be done: its job's `deadlineAt`, moved by the time it has spent parked for
 * approvals (decided ones, and the one it waits for now). A task waiting for an operator is not
 * running out of time; the run's own deadline still applies.
 */
export function taskDeadline(
  deadlineAt: string | undefined,
  state: Pick<TaskCheckpointData, 'approvalWaitMs' | 'pending'> | null,
  now = Date.now(),
): number {
  if (!deadlineAt) return Number.POSITIVE_INFINITY;
  const waiting = state?.pending?.kind === 'approval' ? Math.max(0, now - Date.parse(state.pending.at)) : 0;
  return Date.parse(deadlineAt) + (state?.approvalWaitMs ?? 0) + waiting;
}
