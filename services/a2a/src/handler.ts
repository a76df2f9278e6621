/**
 * Bosun's A2A request handler: the SDK's transports (JSON-RPC, HTTP+JSON) parse and answer the
 * protocol; this class maps each method onto runs. A task is a run (task id = run id), its
 * state and artifacts are read from the run, its updates from the run's NATS events. Nothing is
 * held in memory between requests, so every replica answers for every task.
 */
import { randomUUID } from 'node:crypto';
import {
  PushNotificationNotSupportedError,
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
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
import { runIdFor, type A2aTaskRecord, sleep } from '@bosun/contract';
import { RunControlError, type RunControl } from '@bosun/transport';
import { TaskState } from '@a2a-js/sdk';
import type { NatsConnection } from '@nats-io/transport-node';
import { Caller } from './auth.js';
import { incidentFrom } from './intake.js';
import { replyOf, runModeOf } from './modes.js';
import type { PushConfigs } from './push.js';
import type { RunReader } from './runs.js';
import type { A2aTaskStore } from './store.js';
import { followRun } from './follow.js';
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
const LIST_PAGE_DEFAULT = 50;
/** How many tasks' runs a filtered `ListTasks` reads at once. */
const LIST_READ_BATCH = 20;
/** The states a `ListTasks` status filter may name (UNSPECIFIED: no filter). */
const FILTER_STATES = new Set<TaskState>([
  TaskState.TASK_STATE_UNSPECIFIED,
  TaskState.TASK_STATE_SUBMITTED,
  TaskState.TASK_STATE_WORKING,
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_INPUT_REQUIRED,
  TaskState.TASK_STATE_REJECTED,
  TaskState.TASK_STATE_AUTH_REQUIRED,
]);

/** `historyLength` as the spec allows it: absent, or a non-negative integer. */
function historyLengthOf(value: number | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!Number.isInteger(value) || value < 0)
    throw new RequestMalformedError(`historyLength: must be a non-negative integer (got ${value})`);
  return value;
}
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
    this.streams = new RunStream({ runs: deps.runs, events: (runId, signal) => followRun(deps.nats, deps.prefix, runId, signal) });
  }

  getAgentCard(): Promise<AgentCard> {
    return Promise.resolve(this.deps.card);
  }

  /** The card says `extendedAgentCard: false`: the method is not supported (spec: UnsupportedOperationError, -32004). */
  getAuthenticatedExtendedAgentCard(): Promise<AgentCard> {
    return Promise.reject(new UnsupportedOperationError('this agent has no extended agent card (capabilities.extendedAgentCard is false)'));
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
      // A message names one task in one context: a foreign context id is refused, not ignored.
      if (message.contextId && message.contextId !== record.contextId)
        throw new RequestMalformedError(`message.contextId: task ${record.taskId} belongs to another context than ${message.contextId}`);
      // The decision records the caller's address, as on every path.
      return { record: await this.deps.answers.answer(record, message, caller, caller.address), mode: 'task' };
    }
    const incident = incidentFrom(message, {
      tenant: caller.tenant,
      maxBytes: this.deps.config.maxMessageBytes,
      requestedBy: caller.person?.name ?? `a2a:${caller.tenant}`,
    });
    const m = message!;
    const mode = runModeOf(this.deps.config, m, incident);
    const existing = await this.deps.store.byMessage(caller.tenant, m.messageId);
    if (existing) return { record: existing, mode };
    const pushConfig = params.configuration?.taskPushNotificationConfig;
    // Checked before anything is claimed or published: a refused registration starts no run.
    if (pushConfig) this.pushConfigs().check(pushConfig);
    return { record: await this.claimAndPublish(caller.tenant, incident, m, pushConfig), mode };
  }

  /**
   * Decides the task of a new message id once, whatever the race (an atomic claim in Redis), then
   * registers its push config (before the run can start) and publishes its run. A send that lost
   * the race returns the winner's task.
   */
  private async claimAndPublish(
    tenant: string,
    incident: ReturnType<typeof incidentFrom>,
    m: Message,
    pushConfig: TaskPushNotificationConfig | undefined,
  ): Promise<A2aTaskRecord> {
    // The run id follows from the job's creation time, chosen here and given to the job; a job
    // already under this incident id (an earlier task's, expired since) keeps its own.
    const createdAtMs = Date.now();
    const runId = (await this.deps.runs.existingRun(incident.id)) ?? runIdFor(incident.id, createdAtMs);
    const contextId = m.contextId || randomUUID();
    const record: A2aTaskRecord = {
      v: 1,
      tenant,
      taskId: runId,
      runId,
      incidentId: incident.id,
      contextId,
      messageId: m.messageId,
      createdAt: new Date(createdAtMs).toISOString(),
      history: [{ ...m, taskId: runId, contextId }],
    };
    const claim = await this.deps.store.claim(record);
    if (!claim.won) {
      const winner = await this.deps.store.get(tenant, claim.taskId);
      if (!winner) throw new TaskNotFoundError(`message ${m.messageId} started task ${claim.taskId}, which is gone`);
      return winner;
    }
    try {
      if (pushConfig) await this.pushConfigs().save(record, pushConfig, pushConfig.id || randomUUID());
      const published = await this.deps.runs.publish(incident, createdAtMs);
      if (published !== runId) {
        this.deps.log.warn({ taskId: runId, runId: published }, 'A2A task: its incident job was already there under another run id');
        await this.deps.store.put({ ...record, runId: published });
      }
    } catch (err) {
      // Nothing was started: give the message id back, so that the client's retry can claim it.
      await this.deps.store.release(record);
      throw err;
    }
    this.deps.log.info({ tenant, taskId: runId, incidentId: incident.id, contextId }, 'A2A task started');
    return record;
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
    const historyLength = historyLengthOf(params.configuration?.historyLength);
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
    // Spec: subscribing to a task in a final state is an UnsupportedOperationError (-32004).
    const now = stateOf(await this.deps.runs.view(record));
    if (isTerminal(now))
      throw new UnsupportedOperationError(
        `task ${record.taskId} has ended (${TaskState[now]}): there is nothing to subscribe to; GetTask gives its outcome`,
      );
    yield* this.streams.follow(record);
  }

  async getTask(params: GetTaskRequest, context: ServerCallContext): Promise<Task> {
    const historyLength = historyLengthOf(params.historyLength);
    const record = await this.mustGet(callerOf(context).tenant, params.id);
    return this.task(record, historyLength);
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
      // Said in the protocol's words: the run control's message names Redis keys and the prefix.
      if (err instanceof RunControlError)
        throw new TaskNotCancelableError(
          err.code === 'finished' ? `task ${record.taskId} has already ended` : `task ${record.taskId} cannot be cancelled (${err.code})`,
        );
      throw err;
    }
    this.deps.log.info({ tenant: caller.tenant, taskId: record.taskId }, 'A2A task cancelled');
    const deadline = Date.now() + CANCEL_WAIT_MS;
    let view = await this.deps.runs.view(record);
    while (!isTerminal(stateOf(view)) && Date.now() < deadline) {
      await sleep(200);
      view = await this.deps.runs.view(record);
    }
    return taskOf(record, view);
  }

  /**
   * The caller's tasks, newest first, by context, state and status time. Filters apply before
   * paging (a page holds only matching tasks, `totalSize` counts them); a page token is an offset
   * into the filtered list.
   */
  async listTasks(params: ListTasksRequest, context: ServerCallContext): Promise<ListTasksResponse> {
    const tenant = callerOf(context).tenant;
    const pageSize = params.pageSize ?? LIST_PAGE_DEFAULT;
    if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > LIST_PAGE_MAX)
      throw new RequestMalformedError(`pageSize: must be an integer from 1 to ${LIST_PAGE_MAX} (got ${pageSize})`);
    const historyLength = historyLengthOf(params.historyLength) ?? 0;
    const status = params.status ?? TaskState.TASK_STATE_UNSPECIFIED;
    if (!FILTER_STATES.has(status)) throw new RequestMalformedError(`status: not a task state (got ${String(params.status)})`);
    const after = params.statusTimestampAfter ? Date.parse(params.statusTimestampAfter) : undefined;
    if (after !== undefined && Number.isNaN(after))
      throw new RequestMalformedError(`statusTimestampAfter: not an ISO 8601 time (got ${params.statusTimestampAfter})`);
    const offset = params.pageToken ? Number(params.pageToken) : 0;
    if (!Number.isSafeInteger(offset) || offset < 0) throw new RequestMalformedError('pageToken: not a token this server gave');
    const contextId = params.contextId || undefined;
    const shape = (t: Task): Task => (params.includeArtifacts ? t : { ...t, artifacts: [] });
    if (status === TaskState.TASK_STATE_UNSPECIFIED && after === undefined) {
      const { ids, total } = await this.deps.store.list(tenant, { contextId, offset, count: pageSize });
      const tasks = (await this.tasksOf(tenant, ids, historyLength)).map(shape);
      const next = offset + ids.length < total ? String(offset + ids.length) : '';
      return { tasks, nextPageToken: next, pageSize, totalSize: total };
    }
    // A filter on what the run is at: every task of the list is read, then paged.
    const { ids } = await this.deps.store.list(tenant, { contextId, offset: 0, count: -1 });
    const matching: Task[] = [];
    for (let i = 0; i < ids.length; i += LIST_READ_BATCH) {
      for (const t of await this.tasksOf(tenant, ids.slice(i, i + LIST_READ_BATCH), historyLength)) {
        if (status !== TaskState.TASK_STATE_UNSPECIFIED && t.status?.state !== status) continue;
        if (after !== undefined && !(Date.parse(t.status?.timestamp ?? '') > after)) continue;
        matching.push(t);
      }
    }
    const page = matching.slice(offset, offset + pageSize).map(shape);
    const next = offset + page.length < matching.length ? String(offset + page.length) : '';
    return { tasks: page, nextPageToken: next, pageSize, totalSize: matching.length };
  }

  /** The tasks of some ids, in their order (ids whose record is gone are left out). */
  private async tasksOf(tenant: string, ids: string[], historyLength: number): Promise<Task[]> {
    const records = await Promise.all(ids.map((id) => this.deps.store.get(tenant, id)));
    return Promise.all(records.filter((r): r is A2aTaskRecord => r !== undefined).map((r) => this.task(r, historyLength)));
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
