/**
 * Bosun's A2A request handler: the SDK's transports (JSON-RPC, HTTP+JSON) parse and answer the
 * protocol; this class maps each method onto runs. A task is a run (task id = run id), its
 * state and artifacts are read from the run, its updates from the run's NATS events. Nothing is
 * held in memory between requests, so every replica answers for every task.
 */
import { randomUUID } from 'node:crypto';
import {
  ExtendedAgentCardNotConfiguredError,
  PushNotificationNotSupportedError,
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
} from '@a2a-js/sdk/errors';
import type {
  AgentCard,
  CancelTaskRequest,
  GetTaskRequest,
  DeleteTaskPushNotificationConfigRequest,
  GetTaskPushNotificationConfigRequest,
  ListTaskPushNotificationConfigsRequest,
  ListTaskPushNotificationConfigsResponse,
  ListTasksRequest,
  ListTasksResponse,
  Message,
  SendMessageRequest,
  StreamResponse,
  SubscribeToTaskRequest,
  Task,
  TaskPushNotificationConfig,
} from '@a2a-js/sdk';
import type { A2ARequestHandler, ServerCallContext } from '@a2a-js/sdk/server';
import type { A2aConfig, Logger } from '@bosun/config';
import type { A2aTaskRecord } from '@bosun/contract';
import { RunControlError, type RunControl } from '@bosun/transport';
import { TaskState } from '@a2a-js/sdk';
import type { NatsConnection } from '@nats-io/transport-node';
import { Caller } from './auth.js';
import { incidentFrom } from './intake.js';
import { replyOf, runModeOf } from './modes.js';
import type { PushConfigs } from './push.js';
import type { RunReader } from './runs.js';
import type { A2aTaskStore } from './store.js';
import { RunStream } from './stream.js';
import { isTerminal, stateOf, taskOf } from './view.js';
import type { ApprovalAnswers } from './answers.js';

/** What the handler works with. */
export interface HandlerDeps {
  card: AgentCard;
  config: A2aConfig;
  store: A2aTaskStore;
  runs: RunReader;
  control: RunControl;
  answers: ApprovalAnswers;
  /** Push registrations, when `a2a.pushNotifications` is configured. */
  push?: PushConfigs;
  nats: () => NatsConnection | null;
  prefix: string;
  log: Logger;
}

const CANCEL_WAIT_MS = 30_000;
const LIST_PAGE_MAX = 100;
const NO_PUSH = 'push notifications are not offered by this server';

/** The caller the auth middleware put on the request (the tenant comes from it, never from the request). */
export function callerOf(context: ServerCallContext): Caller {
  const user = context.user;
  if (!(user instanceof Caller)) throw new RequestMalformedError('the request has no authenticated caller');
  return user;
}

export class BosunA2AHandler implements A2ARequestHandler {
  readonly streams: RunStream;

  constructor(private readonly deps: HandlerDeps) {
    this.streams = new RunStream(deps);
  }

  getAgentCard(): Promise<AgentCard> {
    return Promise.resolve(this.deps.card);
  }

  getAuthenticatedExtendedAgentCard(): Promise<AgentCard> {
    return Promise.reject(new ExtendedAgentCardNotConfiguredError('this agent has no extended card'));
  }

  /** A new message starts a run (a repeated message id finds the same one); a message on an existing task answers its approval. */
  private async start(
    params: SendMessageRequest,
    context: ServerCallContext,
  ): Promise<{ record: A2aTaskRecord; mode: 'message' | 'task' }> {
    const caller = callerOf(context);
    const message = params.message;
    if (message?.taskId) {
      const record = await this.mustGet(caller.tenant, message.taskId);
      return { record: await this.deps.answers.answer(record, message, caller), mode: 'task' };
    }
    const incident = incidentFrom(message, { tenant: caller.tenant, maxBytes: this.deps.config.maxMessageBytes });
    const m = message!;
    const mode = runModeOf(this.deps.config, m, incident);
    const existing = await this.deps.store.byMessage(caller.tenant, m.messageId);
    if (existing) return { record: existing, mode };
    const pushConfig = params.configuration?.taskPushNotificationConfig;
    // Checked before anything is published: a refused registration starts no run.
    if (pushConfig?.url) this.pushConfigs().check(pushConfig.url);
    const { runId, createdAt } = await this.deps.runs.publish(incident);
    const contextId = m.contextId || randomUUID();
    const stored = await this.deps.store.create({
      v: 1,
      tenant: caller.tenant,
      taskId: runId,
      runId,
      incidentId: incident.id,
      contextId,
      messageId: m.messageId,
      createdAt,
      history: [{ ...m, taskId: runId, contextId }],
    });
    this.deps.log.info(
      { tenant: caller.tenant, taskId: runId, incidentId: incident.id, contextId: stored.contextId, mode },
      'A2A task started',
    );
    return { record: stored, mode };
  }

  private async mustGet(tenant: string, taskId: string): Promise<A2aTaskRecord> {
    if (!taskId.trim()) throw new RequestMalformedError('id: required');
    const record = await this.deps.store.get(tenant, taskId);
    if (!record) throw new TaskNotFoundError(`task ${taskId} not found`);
    return record;
  }

  private async task(record: A2aTaskRecord, historyLength?: number): Promise<Task> {
    return taskOf(record, await this.deps.runs.view(record), historyLength);
  }

  /** Follows the run until it ends or needs input (at most `blockingWaitMs`). */
  private async settle(record: A2aTaskRecord): Promise<void> {
    const signal = AbortSignal.timeout(this.deps.config.blockingWaitMs);
    for await (const u of this.streams.follow(record, signal)) {
      const state = u.payload?.$case === 'statusUpdate' ? u.payload.value.status?.state : undefined;
      if (state !== undefined && (isTerminal(state) || state === TaskState.TASK_STATE_INPUT_REQUIRED)) break;
    }
  }

  /** The one reply of a `message`-mode request, once the run has ended (or needs input, or the wait is over). */
  private async reply(record: A2aTaskRecord): Promise<Message> {
    await this.settle(record);
    return replyOf(record, await this.deps.runs.view(record));
  }

  async sendMessage(params: SendMessageRequest, context: ServerCallContext): Promise<Message | Task> {
    const { record, mode } = await this.start(params, context);
    if (mode === 'message') return this.reply(record);
    const historyLength = params.configuration?.historyLength;
    if (params.configuration?.returnImmediately) return this.task(record, historyLength);
    await this.settle(record);
    return this.task(record, historyLength);
  }

  async *sendMessageStream(params: SendMessageRequest, context: ServerCallContext): AsyncGenerator<StreamResponse, void, undefined> {
    const { record, mode } = await this.start(params, context);
    if (mode === 'message') {
      yield { payload: { $case: 'message', value: await this.reply(record) } };
      return;
    }
    yield* this.streams.follow(record);
  }

  async *resubscribe(params: SubscribeToTaskRequest, context: ServerCallContext): AsyncGenerator<StreamResponse, void, undefined> {
    const record = await this.mustGet(callerOf(context).tenant, params.id);
    yield* this.streams.follow(record);
  }

  async getTask(params: GetTaskRequest, context: ServerCallContext): Promise<Task> {
    const record = await this.mustGet(callerOf(context).tenant, params.id);
    return this.task(record, params.historyLength);
  }

  async cancelTask(params: CancelTaskRequest, context: ServerCallContext): Promise<Task> {
    const caller = callerOf(context);
    const record = await this.mustGet(caller.tenant, params.id);
    const now = stateOf(await this.deps.runs.view(record));
    if (isTerminal(now)) throw new TaskNotCancelableError(`task ${record.taskId} has already ended (${TaskState[now]})`);
    const reason =
      typeof params.metadata?.reason === 'string' && params.metadata.reason.trim() ? params.metadata.reason : 'cancelled through A2A';
    try {
      await this.deps.control.cancel(record.runId, { by: `a2a:${caller.tenant}`, reason });
    } catch (err) {
      if (err instanceof RunControlError) throw new TaskNotCancelableError(`task ${record.taskId}: ${err.message}`);
      throw err;
    }
    this.deps.log.info({ tenant: caller.tenant, taskId: record.taskId }, 'A2A task cancelled');
    const deadline = Date.now() + CANCEL_WAIT_MS;
    let view = await this.deps.runs.view(record);
    while (!isTerminal(stateOf(view)) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      view = await this.deps.runs.view(record);
    }
    return taskOf(record, view);
  }

  async listTasks(params: ListTasksRequest, context: ServerCallContext): Promise<ListTasksResponse> {
    const tenant = callerOf(context).tenant;
    const pageSize = Math.min(Math.max(params.pageSize ?? 50, 1), LIST_PAGE_MAX);
    const offset = params.pageToken ? Number(params.pageToken) : 0;
    if (!Number.isSafeInteger(offset) || offset < 0) throw new RequestMalformedError('pageToken: not a token this server gave');
    const { ids, total } = await this.deps.store.list(tenant, { contextId: params.contextId || undefined, offset, count: pageSize });
    const tasks: Task[] = [];
    for (const id of ids) {
      const record = await this.deps.store.get(tenant, id);
      if (!record) continue;
      const task = await this.task(record, params.historyLength ?? 0);
      if (params.status && task.status?.state !== params.status) continue;
      tasks.push(params.includeArtifacts ? task : { ...task, artifacts: [] });
    }
    const next = offset + ids.length < total ? String(offset + ids.length) : '';
    return { tasks, nextPageToken: next, pageSize: tasks.length, totalSize: total };
  }

  private pushConfigs(): PushConfigs {
    if (!this.deps.push) throw new PushNotificationNotSupportedError(NO_PUSH);
    return this.deps.push;
  }

  async createTaskPushNotificationConfig(
    params: TaskPushNotificationConfig,
    context: ServerCallContext,
  ): Promise<TaskPushNotificationConfig> {
    const push = this.pushConfigs();
    const record = await this.mustGet(callerOf(context).tenant, params.taskId);
    return push.save(record, params, params.id || randomUUID());
  }

  async getTaskPushNotificationConfig(
    params: GetTaskPushNotificationConfigRequest,
    context: ServerCallContext,
  ): Promise<TaskPushNotificationConfig> {
    const push = this.pushConfigs();
    const record = await this.mustGet(callerOf(context).tenant, params.taskId);
    const found = (await push.list(record)).find((c) => c.id === params.id);
    if (!found) throw new TaskNotFoundError(`task ${params.taskId} has no push notification config ${params.id}`);
    return found;
  }

  async listTaskPushNotificationConfigs(
    params: ListTaskPushNotificationConfigsRequest,
    context: ServerCallContext,
  ): Promise<ListTaskPushNotificationConfigsResponse> {
    const push = this.pushConfigs();
    const record = await this.mustGet(callerOf(context).tenant, params.taskId);
    return { configs: await push.list(record), nextPageToken: '' };
  }

  async deleteTaskPushNotificationConfig(params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext): Promise<void> {
    const push = this.pushConfigs();
    const record = await this.mustGet(callerOf(context).tenant, params.taskId);
    await push.delete(record, params.id);
  }
}
