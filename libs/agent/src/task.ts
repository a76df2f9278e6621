import {
  BosunError,
  FINISH_TASK_TOOL,
  STALL_MARKER,
  toolCallKey,
  type CatalogTool,
  type TaskJob,
  type TaskResult,
  type ToolCallResult,
} from '@bosun/contract';
import { buildStallPayload, validateAgainstSchema, type Logger } from '@bosun/config';
import { MAX_TOOLS_PER_REQUEST, isReadOnlyTool, toolAllowed, type ToolState } from '@bosun/policy';
import {
  ModelError,
  renderIncident,
  type Message,
  type Model,
  type ToolCall,
  type ToolDeclaration,
  type ToolResponse,
} from '@bosun/models';
import {
  ApprovalError,
  approvalRequestedEvent,
  approvalResolvedEvent,
  type Approval,
  type ApprovalStore,
  type CheckpointStore,
  type DeadLetters,
  type EventSink,
  type ToolClient,
} from '@bosun/transport';
import { TaskCheckpoint, type TaskCheckpointData } from './checkpoint.js';
import { LOAD_TOOLS, applyLoad, initialRouting, loadToolsDeclaration, routingGroups, type RoutingSpec } from './routing.js';

/** Opens the message that tells the model which proposed calls an operator approved. */
export const APPROVED_CALLS_MARKER = 'An operator has APPROVED the following calls';

/** The default system instruction of a task-mode specialist. */
export const DEFAULT_TASK_INSTRUCTION = [
  'You are a specialist on an unattended incident-response team. Nobody will answer questions:',
  'there is no person in this conversation. Investigate the incident in your domain with the tools',
  'you have, prefer reading before changing anything, and do not guess. When you are done, or when',
  'you cannot get further, call finish_task once with your structured report. Say plainly in the',
  'report what you could not check.',
].join(' ');

/** What a specialist's task loop needs to know about it. */
export interface TaskAgentSpec {
  name: string;
  instruction?: string | undefined;
  tools: readonly string[];
  outputSchema: Record<string, unknown>;
  stallPayload?: Record<string, unknown> | undefined;
  maxToolRounds: number;
  maxInvalidOutputs: number;
  /** `read-only`: only read-only tools are offered. Default `read-write`. */
  mode?: 'read-only' | 'read-write' | undefined;
  /** How long a call to an `ask` tool waits for an operator. Default 5 minutes. */
  approvalTimeoutMs?: number | undefined;
  /** In-band tool routing (`load_tools`); off when absent. */
  routing?: RoutingSpec | undefined;
}

/** The policy the loop applies to the catalog (the gateway enforces it again at call time). */
export interface TaskPolicy {
  /** The tools this agent may be offered. */
  offered(tools: readonly CatalogTool[]): CatalogTool[];
  /** `ask` tools need an operator's approval before they run. */
  stateOf(tool: CatalogTool): ToolState;
  approvalTimeoutMs(tool: CatalogTool): number;
}

/** The ports a task loop uses. */
export interface TaskAgentDeps {
  model: Model;
  tools: ToolClient;
  checkpoints: CheckpointStore;
  events: EventSink;
  deadLetters: Pick<DeadLetters, 'add'>;
  log: Logger;
  /** Per-call timeout for tools. */
  toolTimeoutMs?: number;
  /** True when the process is draining: the loop hands the task back at the next step. */
  shouldYield?: () => boolean;
  /**
   * Whether the coordinator has given up on this task (deadline passed), or an operator has
   * cancelled its run. Checked before the task's effects — tool calls, an approval request, an
   * INCOMPLETE report — not before model calls.
   */
  isCancelled?: (taskId: string, runId: string) => Promise<boolean>;
  /** Tool policy; default: the spec's patterns and mode, every tool `allow`. */
  policy?: TaskPolicy;
  /** Where approvals live; required when a tool is `ask`. */
  approvals?: Pick<ApprovalStore, 'request' | 'get' | 'decide'>;
}

/**
 * Thrown when the task must wait for an operator: the processor parks the job (delayed until
 * `until`, holding no worker) and a decision wakes it.
 */
export class ParkError extends BosunError {
  readonly approvalId: string;
  readonly until: number;
  constructor(approvalId: string, until: number) {
    super('park', `waiting for approval ${approvalId}`);
    this.name = 'ParkError';
    this.approvalId = approvalId;
    this.until = until;
  }
}

/** Thrown at a step boundary when the process is draining; the job goes back to the queue. */
export class YieldError extends BosunError {
  constructor(taskId: string) {
    super('yield', `task ${taskId} handed back: this process is stopping`);
    this.name = 'YieldError';
  }
}

/** A model failure that may pass if the task is tried again (BullMQ retries the job). */
export class RetryableTaskError extends BosunError {
  constructor(message: string, cause: unknown) {
    super('retryable', message, { cause });
    this.name = 'RetryableTaskError';
  }
}

const ASK_TO_FINISH =
  'You have used every tool round this task allows. Call finish_task now with what you found, ' +
  'and state in the report what you could not check.';

/** Options of {@link runTask}. */
export interface RunTaskOptions {
  /**
   * The task's job is being started for the first time (BullMQ's `attemptsStarted` is 1), so no
   * checkpoint can exist yet and none is read.
   */
  firstPickup?: boolean;
}

/**
 * Runs one delegation as a task-mode loop: model → tools → model … until `finish_task` with an
 * output that validates against the specialist's schema. The conversation is checkpointed after
 * every step, so the loop resumes where it stopped when another process picks the job up.
 * Always returns a result — completed, stalled or failed — except for a retryable model error,
 * which it throws so the job is retried.
 */
export async function runTask(
  job: TaskJob,
  spec: TaskAgentSpec,
  deps: TaskAgentDeps,
  attempt: number,
  options: RunTaskOptions = {},
): Promise<TaskResult> {
  const { model, tools, checkpoints, events, log } = deps;
  const base = { runId: job.runId, incidentId: job.incidentId, agent: spec.name };
  const ckptId = `task:${job.taskId}`;
  const loaded = options.firstPickup ? null : TaskCheckpoint.parse(await checkpoints.load(ckptId), ckptId);
  let state: TaskCheckpointData;
  // What is in memory but not yet in the checkpoint. The state is saved before every effect
  // (tool calls, an approval request, the result) and before a hand-over — not after each model
  // call or tool round: a model call has no effect to protect, and tool results are answered
  // again from the gateway's records under the same keys if the task resumes elsewhere.
  let dirty = false;
  const save = async (): Promise<void> => {
    await checkpoints.save(ckptId, state);
    dirty = false;
  };
  if (loaded) {
    state = loaded;
    if (state.result) return state.result;
    log.info({ taskId: job.taskId, step: state.step }, 'resuming task from its checkpoint');
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
    events.emit({ ...base, type: 'agent.started', data: { taskId: job.taskId, task: job.task } });
    dirty = true;
  }

  const catalog = await tools.catalog();
  const policy = deps.policy ?? defaultPolicy(spec);
  const allowed = policy.offered(catalog.tools);
  const byName = new Map<string, CatalogTool>(allowed.map((t) => [t.name, t]));
  const groups = spec.routing?.enabled ? routingGroups(spec.routing, allowed) : undefined;
  if (spec.routing && groups && groups.size > 0 && !state.routing) state.routing = initialRouting(spec.routing, groups);
  const finishDecl = finishDeclaration(spec.outputSchema);
  // With routing, the model sees the groups and what it has loaded; without, every tool.
  const declarationsNow = (): ToolDeclaration[] => {
    if (!groups || !state.routing) return [...allowed.map(declare), finishDecl];
    const loadedNow = new Set(state.routing.loaded);
    return [...allowed.filter((t) => loadedNow.has(t.name)).map(declare), loadToolsDeclaration(groups, allowed), finishDecl];
  };
  const routingStats = () =>
    state.routing
      ? {
          groupsOffered: state.routing.groupsOffered,
          groupsLoaded: state.routing.groupsLoaded,
          reloads: state.routing.reloads,
          // A group is skipped when none of its tools was ever loaded (as a group or one by one).
          skipped: state.routing.groupsOffered.filter((g) => !(groups?.get(g) ?? []).some((t) => state.routing!.loaded.includes(t))),
          nudged: state.routing.nudged,
        }
      : undefined;
  // Routing's one nudge: the model tries to answer before loading anything it could load.
  const shouldNudge = () =>
    !!state.routing && !state.routing.nudged && state.routing.groupsLoaded.length === 0 && state.routing.loaded.length === 0;

  // Every result carries the calls whose outcome is unknown, however the task ends.
  const finish = async (result: TaskResult): Promise<TaskResult> => {
    state.result = state.inDoubt && state.inDoubt.length > 0 ? { ...result, inDoubt: state.inDoubt } : result;
    await save();
    return state.result;
  };

  const deadline = (): number => taskDeadline(job.deadlineAt, state);
  for (;;) {
    const last = state.messages[state.messages.length - 1];
    if (!last) throw new BosunError('corrupt_checkpoint', `checkpoint ${ckptId} has no messages`);
    // Step boundary: where a task may stop (saving what it has) or be handed over.
    if (Date.now() >= deadline()) {
      const paused = state.approvalWaitMs ? `, moved by ${state.approvalWaitMs} ms spent waiting for approvals` : '';
      return finish(
        await incomplete(
          'timeout',
          job,
          spec,
          deps,
          state,
          attempt,
          `did not finish before its deadline (${job.deadlineAt ?? ''}${paused})`,
        ),
      );
    }
    if (deps.shouldYield?.()) {
      if (dirty) await save();
      throw new YieldError(job.taskId);
    }
    const cancelled = (): Promise<TaskResult> => {
      log.info({ taskId: job.taskId, runId: job.runId }, 'task cancelled (by the coordinator, or its run by an operator)');
      const why = 'cancelled: the coordinator gave up on this task, or an operator cancelled its run';
      return finish({
        v: 1,
        taskId: job.taskId,
        agent: spec.name,
        status: 'stalled',
        output: buildStallPayload(spec, spec.name, lastWordsOf(state.messages), why),
        attempts: attempt,
        error: 'cancelled',
      });
    };

    if (last.role !== 'model') {
      // The model's turn.
      if (state.toolRounds >= spec.maxToolRounds && !state.askedToFinish) {
        state.askedToFinish = true;
        state.messages.push({ role: 'user', text: ASK_TO_FINISH });
      }
      // Once asked to finish, only finish_task is offered (and an invalid output may be retried).
      const offered = state.askedToFinish ? [finishDecl] : declarationsNow();
      if (offered.length > MAX_TOOLS_PER_REQUEST) {
        const reason = `${offered.length} tools would be offered to the model in one request; the limit is ${MAX_TOOLS_PER_REQUEST}. Narrow specialists.${spec.name}.tools, or turn on routing.`;
        return finish(await failTask(job, spec, deps, state, attempt, reason));
      }
      // No cancellation check before a model call: it has no effect to prevent. A task the
      // coordinator gave up on stops before its next effect, below.
      const started = Date.now();
      let response;
      try {
        response = await model.generate({
          agent: spec.name,
          mode: 'task',
          system: spec.instruction ?? DEFAULT_TASK_INSTRUCTION,
          messages: state.messages,
          tools: offered,
        });
      } catch (err) {
        if (err instanceof ModelError && err.retryable) throw new RetryableTaskError(`model call failed: ${err.message}`, err);
        const reason = `model call failed: ${(err as Error).message}`;
        return finish(await failTask(job, spec, deps, state, attempt, reason));
      }
      state.step++;
      events.emit({
        ...base,
        type: 'model.called',
        data: {
          taskId: job.taskId,
          step: state.step,
          model: response.model ?? model.name,
          durationMs: Date.now() - started,
          calls: response.calls.map((c) => c.name),
          ...(response.usage ? { usage: response.usage } : {}),
        },
      });
      state.messages.push({
        role: 'model',
        ...(response.text ? { text: response.text } : {}),
        ...(response.calls.length > 0 ? { calls: response.calls } : {}),
      });
      delete state.pending;
      dirty = true;
      continue;
    }

    // The model has spoken; act on it — unless the coordinator has given up on this task: then
    // nothing it asks for may take effect. The check is awaited before each effect below.
    let cancelCheck: Promise<boolean> | undefined;
    const isCancelled = (): Promise<boolean> =>
      (cancelCheck ??= deps.isCancelled ? deps.isCancelled(job.taskId, job.runId) : Promise.resolve(false));
    const calls = last.calls ?? [];
    if (shouldNudge() && (calls.length === 0 || calls.some((c) => c.name === FINISH_TASK_TOOL))) {
      state.routing!.nudged = true;
      const nudge = `You have not loaded any tools yet. Load what you need with ${LOAD_TOOLS} (groups: ${state.routing!.groupsOffered.join(', ')}) before you answer; if none is relevant, call ${FINISH_TASK_TOOL} again.`;
      if (calls.length > 0)
        state.messages.push({
          role: 'tool',
          responses: calls.map((c) => ({ id: c.id, name: c.name, isError: true, output: `Not accepted yet. ${nudge}` })),
        });
      else state.messages.push({ role: 'user', text: nudge });
      events.emit({ ...base, type: 'tool.routing', data: { taskId: job.taskId, action: 'nudge', stats: routingStats() } });
      await save();
      continue;
    }
    if (calls.length === 0) {
      if (await isCancelled()) return cancelled();
      return finish(await incomplete('stall', job, spec, deps, state, attempt, 'ended its turn without calling finish_task'));
    }
    const finishCall = calls.find((c) => c.name === FINISH_TASK_TOOL);
    if (finishCall) {
      const problem = validateAgainstSchema(spec.outputSchema, finishCall.args);
      if (problem === null) {
        // No check here: a task the coordinator gave up on already has its INCOMPLETE part in the
        // run, and a late result for it is ignored there.
        const stats = routingStats();
        const result = await finish({
          v: 1,
          taskId: job.taskId,
          agent: spec.name,
          status: 'completed',
          output: finishCall.args,
          attempts: attempt,
        });
        events.emit({
          ...base,
          type: 'agent.completed',
          data: { taskId: job.taskId, steps: state.step, output: finishCall.args, ...(stats ? { routing: stats } : {}) },
        });
        return result;
      }
      state.invalidOutputs++;
      if (state.invalidOutputs > spec.maxInvalidOutputs) {
        return finish(
          await failTask(
            job,
            spec,
            deps,
            state,
            attempt,
            `finish_task output did not match the output schema ${state.invalidOutputs} times: ${problem}`,
          ),
        );
      }
      state.messages.push({
        role: 'tool',
        responses: calls.map((c) =>
          c === finishCall
            ? {
                id: c.id,
                name: c.name,
                isError: true,
                output: `Your output does not match the required schema: ${problem}. Call finish_task again with a conforming output.`,
              }
            : { id: c.id, name: c.name, isError: true, output: 'Not executed: finish_task was called in the same turn.' },
        ),
      });
      await save();
      continue;
    }

    if (state.askedToFinish) {
      // Asked once to finish and it reached for tools again: nothing it was not offered runs.
      if (await isCancelled()) return cancelled();
      return finish(
        await incomplete(
          'stall',
          job,
          spec,
          deps,
          state,
          attempt,
          `did not call finish_task after the last of its ${spec.maxToolRounds} tool rounds`,
        ),
      );
    }

    // Calls to `ask` tools wait for an operator: the whole turn is proposed as written, the task
    // parks, and resumes — in any process — with the decision.
    const asking = calls.filter((c) => byName.has(c.name) && policy.stateOf(byName.get(c.name)!) === 'ask');
    let approval: Approval | undefined;
    if (asking.length > 0) {
      // The approval is keyed by the step: the turn it asks about must be on record first, so a
      // resumed task acts on exactly the calls that were proposed, never on a new model turn.
      if (dirty) await save();
      if (await isCancelled()) return cancelled();
      approval = await awaitApproval(
        job,
        spec,
        deps,
        state,
        ckptId,
        calls,
        asking.map((c) => byName.get(c.name)!),
        policy,
      );
      // The wait for the operator is over: it moves the deadline, in the same write as the round.
      if (state.pending?.kind === 'approval') {
        const decided = approval.decidedAt ? Date.parse(approval.decidedAt) : Date.now();
        state.approvalWaitMs = (state.approvalWaitMs ?? 0) + Math.max(0, decided - Date.parse(state.pending.at));
      }
    }

    // Tool calls. Each carries an idempotency key from its place in the run, so a resumed
    // task sends the same keys and the gateway answers repeats from its record.
    const step = state.step;
    // A round resumed after a crash was already counted when it was first saved.
    if (!(state.pending?.kind === 'tools' && state.pending.step === step)) state.toolRounds++;
    state.pending = { kind: 'tools', step, keys: calls.map((_, i) => toolCallKey(job.taskId, step, i)), at: new Date().toISOString() };
    const cancelling = isCancelled();
    cancelling.catch(() => undefined);
    await save();
    if (await cancelling) return cancelled();
    const toolTimeout = Math.max(1_000, Math.min(deps.toolTimeoutMs ?? Number.POSITIVE_INFINITY, deadline() - Date.now()));
    const inDoubt: ({ key: string; tool: string } | undefined)[] = [];
    const responses: ToolResponse[] = await Promise.all(
      calls.map(async (call, index): Promise<ToolResponse> => {
        if (call.name === LOAD_TOOLS && groups && state.routing) {
          const outcome = applyLoad(state.routing, groups, allowed, call.args);
          events.emit({
            ...base,
            type: 'tool.routing',
            data: { taskId: job.taskId, action: 'load', loaded: outcome.loaded, unknown: outcome.unknown, stats: routingStats() },
          });
          return { id: call.id, name: call.name, isError: outcome.unknown.length > 0 && outcome.loaded.length === 0, output: outcome };
        }
        const tool = byName.get(call.name);
        if (tool && groups && state.routing && !state.routing.loaded.includes(call.name)) {
          return {
            id: call.id,
            name: call.name,
            isError: true,
            output: `Tool "${call.name}" is not loaded. Load it with ${LOAD_TOOLS} first.`,
          };
        }
        // A tool this agent was not offered (or that does not exist) still goes to the gateway:
        // policy is decided, audited and reported there (tool.failed), in one place.
        const notOffered = !tool;
        const needsApproval = approval?.calls.some((c) => c.index === index && c.needsApproval) ?? false;
        if (needsApproval && !(approval?.status === 'approved' && (approval.approved ?? []).includes(index))) {
          const why =
            approval?.status === 'denied'
              ? `the operator denied it${approval.denyReason ? `: ${approval.denyReason}` : ''}`
              : 'the operator did not approve this call';
          return { id: call.id, name: call.name, isError: true, output: `Not executed: ${why}.` };
        }
        let result: ToolCallResult;
        try {
          result = await tools.call(
            {
              v: 1,
              key: toolCallKey(job.taskId, step, index),
              runId: job.runId,
              incidentId: job.incidentId,
              agent: spec.name,
              tool: call.name,
              args: call.args,
              ...(needsApproval && approval ? { approvalId: approval.id } : {}),
            },
            Number.isFinite(toolTimeout) ? { timeoutMs: toolTimeout } : {},
          );
        } catch (err) {
          return { id: call.id, name: call.name, isError: true, output: `The tool call could not be completed: ${(err as Error).message}` };
        }
        if (result.inDoubt) inDoubt[index] = { key: toolCallKey(job.taskId, step, index), tool: call.name };
        if (notOffered && result.status === 'error') {
          return {
            id: call.id,
            name: call.name,
            isError: true,
            output: `Tool "${call.name}" is not available to this agent: ${result.error ?? 'refused'}. Use only the tools you were given.`,
          };
        }
        if (notOffered)
          log.warn(
            { taskId: job.taskId, tool: call.name },
            'the gateway ran a tool this agent was not offered: the specialist and the gateway disagree on the policy (different config files?)',
          );
        if (result.status === 'error') {
          return { id: call.id, name: call.name, isError: true, output: `The tool call failed: ${result.error ?? 'unknown error'}` };
        }
        return { id: call.id, name: call.name, isError: result.isError, output: result.structured ?? result.text };
      }),
    );
    state.messages.push({ role: 'tool', responses });
    // A round redone after a crash gets the same keys in doubt again: each is kept once.
    for (const c of inDoubt) if (c && !state.inDoubt?.some((d) => d.key === c.key)) (state.inDoubt ??= []).push(c);
    if (approval) state.messages.push({ role: 'user', text: describeDecision(approval) });
    delete state.pending;
    dirty = true;
  }
}

/** The default policy: the spec's patterns and mode; every tool runs without approval. */
function defaultPolicy(spec: TaskAgentSpec): TaskPolicy {
  return {
    offered: (tools) => tools.filter((t) => toolAllowed(spec.tools, t.name) && (spec.mode !== 'read-only' || isReadOnlyTool(t))),
    stateOf: () => 'allow',
    approvalTimeoutMs: () => spec.approvalTimeoutMs ?? 300_000,
  };
}

/**
 * Returns the decided approval of this turn, requesting it (and parking the task) first when
 * needed. An undecided request past its timeout resolves as denied with reason `timeout`.
 */
async function awaitApproval(
  job: TaskJob,
  spec: TaskAgentSpec,
  deps: TaskAgentDeps,
  state: TaskCheckpointData,
  ckptId: string,
  calls: readonly ToolCall[],
  askingTools: readonly CatalogTool[],
  policy: TaskPolicy,
): Promise<Approval> {
  const store = deps.approvals;
  if (!store)
    throw new BosunError('no_approvals', `agent ${spec.name} called a tool that needs approval, but no approval store is configured`);
  const id = `ap-${job.taskId}-s${state.step}`;
  let approval = await store.get(id);
  if (!approval) {
    const timeoutMs = Math.max(...askingTools.map((t) => policy.approvalTimeoutMs(t)));
    const asking = new Set(askingTools.map((t) => t.name));
    const last = state.messages[state.messages.length - 1];
    approval = await store.request({
      id,
      runId: job.runId,
      incidentId: job.incidentId,
      agent: spec.name,
      taskId: job.taskId,
      calls: calls.map((c, index) => ({
        index,
        tool: c.name,
        args: c.args,
        needsApproval: asking.has(c.name),
        key: toolCallKey(job.taskId, state.step, index),
      })),
      reason: last?.role === 'model' ? (last.text ?? '') : '',
      createdAt: new Date().toISOString(),
      timeoutAt: new Date(Date.now() + timeoutMs).toISOString(),
    });
    deps.events.emit(approvalRequestedEvent(approval));
    deps.log.info({ approvalId: id, taskId: job.taskId }, 'waiting for approval');
  }
  if (approval.status === 'pending') {
    if (Date.now() < Date.parse(approval.timeoutAt)) {
      // Parked since the first time (a task woken early keeps its original start of the wait).
      const since = state.pending?.kind === 'approval' && state.pending.approvalId === id ? state.pending.at : new Date().toISOString();
      state.pending = { kind: 'approval', step: state.step, approvalId: id, at: since };
      await deps.checkpoints.save(ckptId, state);
      throw new ParkError(id, Date.parse(approval.timeoutAt));
    }
    try {
      approval = await store.decide(id, { approve: false, reason: 'timeout', by: 'bosun (approval timeout)' });
      deps.events.emit(approvalResolvedEvent(approval));
    } catch (err) {
      if (!(err instanceof ApprovalError && err.code === 'already_decided')) throw err;
      approval = (await store.get(id)) ?? approval;
    }
  }
  return approval;
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

/** The message that tells the model what the operator decided. */
function describeDecision(a: Approval): string {
  const asking = a.calls.filter((c) => c.needsApproval);
  const approved = a.status === 'approved' ? asking.filter((c) => (a.approved ?? []).includes(c.index)) : [];
  const refused = asking.filter((c) => !approved.includes(c));
  const line = (c: Approval['calls'][number]) => `- [${c.index}] ${c.tool} ${JSON.stringify(c.args)}`;
  const parts: string[] = [];
  if (approved.length > 0)
    parts.push(
      `${APPROVED_CALLS_MARKER} (approval ${a.id}, by ${a.decidedBy ?? 'an operator'}); they were executed as written:`,
      ...approved.map(line),
    );
  if (refused.length > 0) {
    const why =
      a.status === 'denied'
        ? a.denyReason === 'timeout'
          ? 'nobody decided in time (timeout)'
          : `denied: ${a.denyReason ?? 'no reason given'}`
        : 'not included in the approval';
    parts.push(
      `An operator did NOT approve the following calls (${why}); they were not executed. Continue without them:`,
      ...refused.map(line),
    );
  }
  return parts.join('\n');
}

function declare(tool: CatalogTool): ToolDeclaration {
  return { name: tool.name, description: tool.description, parameters: tool.inputSchema };
}

function finishDeclaration(outputSchema: Record<string, unknown>): ToolDeclaration {
  return {
    name: FINISH_TASK_TOOL,
    description: 'Report the result of this task. Call it exactly once, when you are done or cannot get further.',
    parameters: outputSchema,
  };
}

function lastWordsOf(messages: readonly Message[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m && m.role === 'model' && m.text) return m.text;
  }
  return '';
}

/**
 * An INCOMPLETE result written on the agent's behalf: `stall` (it ended its turn without
 * reporting) or `timeout` (its deadline passed). Nothing is invented: the payload comes from
 * the configured or derived stall payload, with the agent's last words verbatim.
 */
async function incomplete(
  kind: 'stall' | 'timeout',
  job: TaskJob,
  spec: TaskAgentSpec,
  deps: TaskAgentDeps,
  state: TaskCheckpointData,
  attempt: number,
  reason: string,
): Promise<TaskResult> {
  const lastWords = lastWordsOf(state.messages);
  const output = buildStallPayload(spec, spec.name, lastWords, reason);
  // The dead letter first: an event that announces a stall always points at an entry that exists.
  await deps.deadLetters.add(
    {
      kind,
      runId: job.runId,
      incidentId: job.incidentId,
      agent: spec.name,
      taskId: job.taskId,
      reason: `${spec.name} ${reason}`,
      lastWords,
      attempts: attempt,
    },
    `${kind}-${job.taskId}`,
  );
  deps.events.emit({
    runId: job.runId,
    incidentId: job.incidentId,
    agent: spec.name,
    type: 'agent.stalled',
    data: { taskId: job.taskId, kind, reason, marker: STALL_MARKER, lastWords },
  });
  deps.log.warn({ taskId: job.taskId, kind, reason }, 'task incomplete');
  return {
    v: 1,
    taskId: job.taskId,
    agent: spec.name,
    status: 'stalled',
    output,
    attempts: attempt,
    lastWords,
    ...(kind === 'timeout' ? { error: reason } : {}),
  };
}

async function failTask(
  job: TaskJob,
  spec: TaskAgentSpec,
  deps: TaskAgentDeps,
  state: TaskCheckpointData,
  attempt: number,
  reason: string,
): Promise<TaskResult> {
  const lastWords = lastWordsOf(state.messages);
  const output = buildStallPayload(spec, spec.name, lastWords, reason);
  await deps.deadLetters.add(
    {
      kind: 'failure',
      runId: job.runId,
      incidentId: job.incidentId,
      agent: spec.name,
      taskId: job.taskId,
      reason,
      lastWords,
      attempts: attempt,
    },
    `failure-${job.taskId}`,
  );
  deps.events.emit({
    runId: job.runId,
    incidentId: job.incidentId,
    agent: spec.name,
    type: 'agent.failed',
    data: { taskId: job.taskId, reason, marker: STALL_MARKER },
  });
  deps.log.warn({ taskId: job.taskId, reason }, 'task failed');
  return { v: 1, taskId: job.taskId, agent: spec.name, status: 'failed', output, attempts: attempt, error: reason, lastWords };
}
