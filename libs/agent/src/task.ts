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
import { buildStallPayload, toolAllowed, validateAgainstSchema, type Logger } from '@bosun/config';
import { ModelError, renderIncident, type Message, type Model, type ToolDeclaration, type ToolResponse } from '@bosun/models';
import type { CheckpointStore, DeadLetters, EventSink, ToolClient } from '@bosun/transport';
import { TaskCheckpoint, type TaskCheckpointData } from './checkpoint.js';

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
  /** Whether the coordinator has given up on this task (deadline passed). Checked before each step. */
  isCancelled?: (taskId: string) => Promise<boolean>;
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

/**
 * Runs one delegation as a task-mode loop: model → tools → model … until `finish_task` with an
 * output that validates against the specialist's schema. The conversation is checkpointed after
 * every step, so the loop resumes where it stopped when another process picks the job up.
 * Always returns a result — completed, stalled or failed — except for a retryable model error,
 * which it throws so the job is retried.
 */
export async function runTask(job: TaskJob, spec: TaskAgentSpec, deps: TaskAgentDeps, attempt: number): Promise<TaskResult> {
  const { model, tools, checkpoints, events, log } = deps;
  const base = { runId: job.runId, incidentId: job.incidentId, agent: spec.name };
  const ckptId = `task:${job.taskId}`;
  const loaded = TaskCheckpoint.parse(await checkpoints.load(ckptId), ckptId);
  let state: TaskCheckpointData;
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
    await checkpoints.save(ckptId, state);
  }

  const catalog = await tools.catalog();
  const allowed = catalog.tools.filter((t) => toolAllowed(spec.tools, t.name));
  const declarations: ToolDeclaration[] = [...allowed.map(declare), finishDeclaration(spec.outputSchema)];

  const finish = async (result: TaskResult): Promise<TaskResult> => {
    state.result = result;
    await checkpoints.save(ckptId, state);
    return result;
  };

  const deadline = job.deadlineAt ? Date.parse(job.deadlineAt) : Number.POSITIVE_INFINITY;
  for (;;) {
    const last = state.messages[state.messages.length - 1];
    if (!last) throw new BosunError('corrupt_checkpoint', `checkpoint ${ckptId} has no messages`);
    // Step boundary: the state is saved, so this is where a task may stop or be handed over.
    if (Date.now() >= deadline) {
      return finish(await incomplete('timeout', job, spec, deps, state, attempt, `did not finish before its deadline (${job.deadlineAt ?? ''})`));
    }
    if (deps.isCancelled && (await deps.isCancelled(job.taskId))) {
      log.info({ taskId: job.taskId }, 'task cancelled by the coordinator');
      return finish({ v: 1, taskId: job.taskId, agent: spec.name, status: 'stalled', output: buildStallPayload(spec, spec.name, lastWordsOf(state.messages), 'cancelled by the coordinator'), attempts: attempt, error: 'cancelled' });
    }
    if (deps.shouldYield?.()) throw new YieldError(job.taskId);

    if (last.role !== 'model') {
      // The model's turn.
      if (state.toolRounds >= spec.maxToolRounds && !state.askedToFinish) {
        state.askedToFinish = true;
        state.messages.push({ role: 'user', text: ASK_TO_FINISH });
      }
      // Once asked to finish, only finish_task is offered (and an invalid output may be retried).
      const offered = state.askedToFinish ? declarations.filter((d) => d.name === FINISH_TASK_TOOL) : declarations;
      state.pending = { kind: 'model', step: state.step + 1, at: new Date().toISOString() };
      await checkpoints.save(ckptId, state);
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
      await checkpoints.save(ckptId, state);
      continue;
    }

    // The model has spoken; act on it.
    const calls = last.calls ?? [];
    if (calls.length === 0) {
      return finish(await incomplete('stall', job, spec, deps, state, attempt, 'ended its turn without calling finish_task'));
    }
    const finishCall = calls.find((c) => c.name === FINISH_TASK_TOOL);
    if (finishCall) {
      const problem = validateAgainstSchema(spec.outputSchema, finishCall.args);
      if (problem === null) {
        const result: TaskResult = { v: 1, taskId: job.taskId, agent: spec.name, status: 'completed', output: finishCall.args, attempts: attempt };
        events.emit({ ...base, type: 'agent.completed', data: { taskId: job.taskId, steps: state.step, output: finishCall.args } });
        return finish(result);
      }
      state.invalidOutputs++;
      if (state.invalidOutputs > spec.maxInvalidOutputs) {
        return finish(await failTask(job, spec, deps, state, attempt, `finish_task output did not match the output schema ${state.invalidOutputs} times: ${problem}`));
      }
      state.messages.push({
        role: 'tool',
        responses: calls.map((c) =>
          c === finishCall
            ? { id: c.id, name: c.name, isError: true, output: `Your output does not match the required schema: ${problem}. Call finish_task again with a conforming output.` }
            : { id: c.id, name: c.name, isError: true, output: 'Not executed: finish_task was called in the same turn.' },
        ),
      });
      await checkpoints.save(ckptId, state);
      continue;
    }

    if (state.askedToFinish) {
      // Asked once to finish and it reached for tools again: nothing it was not offered runs.
      return finish(await incomplete('stall', job, spec, deps, state, attempt, `did not call finish_task after the last of its ${spec.maxToolRounds} tool rounds`));
    }

    // Tool calls. Each carries an idempotency key from its place in the run, so a resumed
    // task sends the same keys and the gateway answers repeats from its record.
    state.toolRounds++;
    const step = state.step;
    state.pending = { kind: 'tools', step, keys: calls.map((_, i) => toolCallKey(job.taskId, step, i)), at: new Date().toISOString() };
    await checkpoints.save(ckptId, state);
    const toolTimeout = Math.max(1_000, Math.min(deps.toolTimeoutMs ?? Number.POSITIVE_INFINITY, deadline - Date.now()));
    const byName = new Map<string, CatalogTool>(allowed.map((t) => [t.name, t]));
    const responses: ToolResponse[] = await Promise.all(
      calls.map(async (call, index): Promise<ToolResponse> => {
        if (!byName.has(call.name)) {
          return { id: call.id, name: call.name, isError: true, output: `Tool "${call.name}" is not available to this agent. Use only the tools you were given.` };
        }
        let result: ToolCallResult;
        try {
          result = await tools.call(
            { v: 1, key: toolCallKey(job.taskId, step, index), runId: job.runId, incidentId: job.incidentId, agent: spec.name, tool: call.name, args: call.args },
            Number.isFinite(toolTimeout) ? { timeoutMs: toolTimeout } : {},
          );
        } catch (err) {
          return { id: call.id, name: call.name, isError: true, output: `The tool call could not be completed: ${(err as Error).message}` };
        }
        if (result.status === 'error') {
          return { id: call.id, name: call.name, isError: true, output: `The tool call failed: ${result.error ?? 'unknown error'}` };
        }
        return { id: call.id, name: call.name, isError: result.isError, output: result.structured ?? result.text };
      }),
    );
    state.messages.push({ role: 'tool', responses });
    delete state.pending;
    await checkpoints.save(ckptId, state);
  }
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
async function incomplete(kind: 'stall' | 'timeout', job: TaskJob, spec: TaskAgentSpec, deps: TaskAgentDeps, state: TaskCheckpointData, attempt: number, reason: string): Promise<TaskResult> {
  const lastWords = lastWordsOf(state.messages);
  const output = buildStallPayload(spec, spec.name, lastWords, reason);
  deps.events.emit({
    runId: job.runId,
    incidentId: job.incidentId,
    agent: spec.name,
    type: 'agent.stalled',
    data: { taskId: job.taskId, kind, reason, marker: STALL_MARKER, lastWords },
  });
  await deps.deadLetters.add(
    { kind, runId: job.runId, incidentId: job.incidentId, agent: spec.name, reason: `${spec.name} ${reason}`, lastWords, attempts: attempt },
    `${kind}-${job.taskId}`,
  );
  deps.log.warn({ taskId: job.taskId, kind, reason }, 'task incomplete');
  return { v: 1, taskId: job.taskId, agent: spec.name, status: 'stalled', output, attempts: attempt, lastWords, ...(kind === 'timeout' ? { error: reason } : {}) };
}

async function failTask(job: TaskJob, spec: TaskAgentSpec, deps: TaskAgentDeps, state: TaskCheckpointData, attempt: number, reason: string): Promise<TaskResult> {
  const lastWords = lastWordsOf(state.messages);
  const output = buildStallPayload(spec, spec.name, lastWords, reason);
  deps.events.emit({
    runId: job.runId,
    incidentId: job.incidentId,
    agent: spec.name,
    type: 'agent.failed',
    data: { taskId: job.taskId, reason, marker: STALL_MARKER },
  });
  await deps.deadLetters.add(
    { kind: 'failure', runId: job.runId, incidentId: job.incidentId, agent: spec.name, reason, lastWords, attempts: attempt },
    `failure-${job.taskId}`,
  );
  deps.log.warn({ taskId: job.taskId, reason }, 'task failed');
  return { v: 1, taskId: job.taskId, agent: spec.name, status: 'failed', output, attempts: attempt, error: reason, lastWords };
}
