/**
 * A specialist whose work a remote A2A agent does (`specialists.<name>.a2a`). The worker
 * resolves the agent's card (protocol 1.0 or 0.3: the SDK client's compat layer speaks both),
 * sends the task as one message, and follows the remote task to its end. The message id and the
 * context id are the task id; the remote task id is saved in the checkpoint right after the send,
 * so a worker that resumes the task (after a crash) follows the same remote task and never sends
 * it again. A worker that finds a send begun and no remote task id saved (its predecessor died
 * during the send) never sends blindly: it lists the agent's tasks of that context and follows
 * the one it finds, sends only when the agent answers that there is none, and declares the
 * delegation in doubt when the agent cannot list (protocol 0.3 has no ListTasks), as the gateway
 * does for a tool call whose outcome is unknown.
 *
 * Outcomes: completed → the output (a DataPart valid against the output schema, or the text);
 * failed, rejected or canceled → an INCOMPLETE `failure` with the remote's message as last
 * words; input-required → an INCOMPLETE stall quoting the remote's question (nothing invents an
 * answer); deadline → the remote task is cancelled and the result is an INCOMPLETE `timeout`.
 */
import { Role, TaskState, type Message, type Part, type SendMessageRequest, type Task } from '@a2a-js/sdk';
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
  type Client,
} from '@a2a-js/sdk/client';
import {
  BosunError,
  RemoteTaskCheckpoint,
  STALL_MARKER,
  remoteTaskCheckpointId,
  type DeadLetterKind,
  type TaskJob,
  type TaskResult,
  errorMessage,
  sleep,
} from '@bosun/contract';
import { ConfigError, buildStallPayload, validateAgainstSchema, type SpecialistConfig } from '@bosun/config';
import { YieldError, type TaskAgentDeps } from '@bosun/agent';

/** The ports a remote specialist uses: the task loop's, less the model and tools. */
export type RemoteDeps = Pick<TaskAgentDeps, 'checkpoints' | 'events' | 'deadLetters' | 'log' | 'shouldYield' | 'isCancelled'> & {
  name: string;
  spec: SpecialistConfig;
  /** The bearer token, resolved (never logged). */
  token?: string;
};

type Ending =
  | { kind: 'completed'; output: unknown }
  | { kind: 'failure' | 'stall' | 'timeout'; reason: string; lastWords: string }
  | { kind: 'in-doubt'; reason: string }
  | { kind: 'cancelled' };

/** What the agent said of a send whose answer was lost: its task, no task, or nothing it can say. */
type LookUp = { kind: 'found'; remoteTaskId: string } | { kind: 'absent' } | { kind: 'unknown'; why: string };

/** The longest wait on a remote stream between two looks at the task. */
const STREAM_WAIT_MS = 5_000;

const FAILED_STATES = new Set([TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_REJECTED, TaskState.TASK_STATE_CANCELED]);
const ASKING_STATES = new Set([TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED]);

const textOf = (parts: Part[] | undefined): string =>
  (parts ?? [])
    .map((p) => (p.content?.$case === 'text' ? p.content.value : ''))
    .filter(Boolean)
    .join('\n');

function firstData(parts: Part[]): unknown {
  const data = parts.find((p) => p.content?.$case === 'data');
  return data?.content?.$case === 'data' ? (data.content.value as unknown) : undefined;
}

/** A remote agent's token as configured: a `${VAR}` placeholder is read from the environment (an unset one is a config error). */
export function resolveRemoteToken(name: string, token: string | undefined, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (token === undefined) return undefined;
  const m = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/.exec(token);
  if (!m) return token;
  const value = env[m[1]!];
  if (value === undefined || value === '') throw new ConfigError(`specialists.${name}.a2a.token: environment variable ${m[1]} is not set`);
  return value;
}

export class RemoteSpecialist {
  private client?: Promise<Client>;
  /** The last state and message seen of each remote task followed by this process, and the task it does. */
  private readonly lastSeen = new Map<string, string>();
  private readonly current = new Map<string, TaskJob>();

  constructor(private readonly deps: RemoteDeps) {}

  private get remote() {
    return this.deps.spec.a2a!;
  }

  /** The SDK client, from the agent's card (resolved once, again after a failure). */
  private clientFor(): Promise<Client> {
    const token = this.deps.token;
    const fetchImpl: typeof fetch = (input, init) => {
      const headers = new Headers(init?.headers);
      if (token) headers.set('authorization', `Bearer ${token}`);
      return fetch(input, { ...init, headers });
    };
    // 0.3 agents too: their card is translated, and their interfaces get the 0.3 transports.
    const legacyCompat = { enabled: true };
    this.client ??= new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat }), new RestTransportFactory({ fetchImpl, legacyCompat })],
        cardResolver: new DefaultAgentCardResolver({ fetchImpl, legacyCompat }),
      }),
    )
      .createFromUrl(this.remote.url)
      .catch((err: unknown) => {
        this.client = undefined;
        throw err;
      });
    return this.client;
  }

  private async load(taskId: string): Promise<RemoteTaskCheckpoint | undefined> {
    const raw = await this.deps.checkpoints.load(remoteTaskCheckpointId(taskId));
    if (raw === null || raw === undefined) return undefined;
    const parsed = RemoteTaskCheckpoint.safeParse(raw);
    if (!parsed.success) throw new BosunError('bad_checkpoint', `checkpoint remote:${taskId} cannot be used: ${parsed.error.message}`);
    return parsed.data;
  }

  private save(ck: RemoteTaskCheckpoint): Promise<void> {
    return this.deps.checkpoints.save(remoteTaskCheckpointId(ck.taskId), ck);
  }

  /** Runs (or resumes) one task; returns its result. */
  async run(task: TaskJob, attempt: number): Promise<TaskResult> {
    let ck = await this.load(task.taskId);
    if (ck?.result) return ck.result;
    if (ck && !ck.remoteTaskId) {
      // A send was begun and its answer never saved: ask the agent before sending anything.
      const found = await this.lookUp(task, ck);
      if (found.kind === 'unknown')
        return this.end(task, ck, attempt, {
          kind: 'in-doubt',
          reason: `IN DOUBT: the task was being sent to the remote A2A agent when its worker stopped, and the agent cannot say whether it got it (${found.why}); it is not sent again: check the agent for message ${ck.messageId}`,
        });
      if (found.kind === 'found') {
        ck = { ...ck, remoteTaskId: found.remoteTaskId };
        await this.save(ck);
        this.deps.log.info(
          { taskId: task.taskId, remoteTaskId: found.remoteTaskId },
          'the remote task of an interrupted send was found; following it',
        );
      }
    }
    ck ??= {
      v: 1,
      taskId: task.taskId,
      url: this.remote.url,
      messageId: task.taskId,
      contextId: task.taskId,
      sendingAt: new Date().toISOString(),
    };
    if (!ck.remoteTaskId) {
      if (await this.cancelled(task)) return this.end(task, ck, attempt, { kind: 'cancelled' });
      // Saved before the send: a worker killed during it finds the send begun (see lookUp).
      await this.save(ck);
      const sent = await this.send(task, ck);
      if ('messageId' in sent)
        return this.end(task, ck, attempt, { kind: 'completed', output: firstData(sent.parts) ?? textOf(sent.parts) });
      ck = { ...ck, remoteTaskId: sent.id };
      // Right after the send: from now on the task follows this remote task, whoever runs it.
      await this.save(ck);
    }
    const remoteTaskId = ck.remoteTaskId!;
    this.current.set(remoteTaskId, task);
    try {
      return await this.end(task, ck, attempt, await this.follow(task, remoteTaskId));
    } finally {
      this.current.delete(remoteTaskId);
      this.lastSeen.delete(remoteTaskId);
    }
  }

  /**
   * Whether the agent got a send whose answer was lost: its tasks of the send's context (the
   * Bosun task id: this delegation's alone), the one holding the message id first. An agent that
   * cannot list (0.3 has no ListTasks, an agent may refuse it) or does not answer cannot say.
   */
  private async lookUp(task: TaskJob, ck: RemoteTaskCheckpoint): Promise<LookUp> {
    let tasks: Task[];
    try {
      const listed = await (
        await this.clientFor()
      ).listTasks({
        tenant: '',
        contextId: ck.contextId ?? task.runId,
        status: TaskState.TASK_STATE_UNSPECIFIED,
        pageSize: 100,
        pageToken: '',
        historyLength: 20,
        statusTimestampAfter: undefined,
        includeArtifacts: false,
      });
      tasks = listed.tasks;
    } catch (err) {
      return { kind: 'unknown', why: `ListTasks: ${errorMessage(err)}` };
    }
    const holding = tasks.find((t) => (t.history ?? []).some((m) => m.messageId === ck.messageId));
    // A context of its own (new checkpoints) holds only this delegation's tasks; the run's context (old ones) needs the message id.
    const found = holding ?? (ck.contextId ? tasks[0] : undefined);
    return found ? { kind: 'found', remoteTaskId: found.id } : { kind: 'absent' };
  }

  private async send(task: TaskJob, ck: RemoteTaskCheckpoint): Promise<Message | Task> {
    const message: Message = {
      messageId: ck.messageId,
      contextId: ck.contextId ?? task.runId,
      taskId: '',
      role: Role.ROLE_USER,
      parts: [
        { content: { $case: 'text', value: task.task }, metadata: undefined, filename: '', mediaType: 'text/plain' },
        {
          content: { $case: 'data', value: { incident: task.incident } },
          metadata: undefined,
          filename: '',
          mediaType: 'application/json',
        },
      ],
      metadata: { bosunTaskId: task.taskId, runId: task.runId },
      extensions: [],
      referenceTaskIds: [],
    };
    const request: SendMessageRequest = {
      tenant: '',
      message,
      configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: true },
      metadata: undefined,
    };
    this.emit(task, 'agent.started', { taskId: task.taskId, remote: this.remote.url, messageId: ck.messageId });
    this.deps.log.info({ taskId: task.taskId, remote: this.remote.url }, 'task sent to the remote A2A agent');
    return (await this.clientFor()).sendMessage(request);
  }

  private cancelled(task: TaskJob): Promise<boolean> {
    return this.deps.isCancelled?.(task.taskId, task.runId) ?? Promise.resolve(false);
  }

  /** Follows the remote task until it ends, asks for input, the deadline passes or the task is cancelled. */
  private async follow(task: TaskJob, remoteTaskId: string): Promise<Ending> {
    const deadline = task.deadlineAt ? Date.parse(task.deadlineAt) : Number.POSITIVE_INFINITY;
    for (;;) {
      if (Date.now() >= deadline) {
        await this.cancelRemote(remoteTaskId);
        return { kind: 'timeout', reason: `the remote agent did not finish before the deadline (${task.deadlineAt})`, lastWords: '' };
      }
      if (await this.cancelled(task)) {
        await this.cancelRemote(remoteTaskId);
        return { kind: 'cancelled' };
      }
      if (this.deps.shouldYield?.()) throw new YieldError(task.taskId);
      const ending = await this.look(remoteTaskId);
      if (ending) return ending;
      await this.waitForChange(remoteTaskId, deadline);
    }
  }

  /**
   * Waits until the remote task may have changed: with an agent that streams, until its next
   * update on `SubscribeToTask` (at most {@link STREAM_WAIT_MS}, so cancellations and the
   * deadline are still seen); otherwise `pollMs`. Never past the deadline.
   */
  private async waitForChange(remoteTaskId: string, deadline: number): Promise<void> {
    const left = Math.max(10, deadline - Date.now());
    const client = await this.streamingClient(remoteTaskId);
    if (!client) {
      await sleep(Math.min(this.remote.pollMs, left));
      return;
    }
    const signal = AbortSignal.timeout(Math.min(STREAM_WAIT_MS, left));
    try {
      let seen = 0;
      // The first response is the task as it is; the next one is a change.
      for await (const update of client.resubscribeTask({ tenant: '', id: remoteTaskId }, { signal })) {
        if (update.payload && ++seen >= 2) return;
      }
    } catch (err) {
      if (signal.aborted) return;
      this.deps.log.debug({ err, remoteTaskId }, 'the remote stream ended; polling');
      await sleep(Math.min(this.remote.pollMs, left));
    }
  }

  /**
   * The client of an agent whose card says it streams, or undefined (poll instead). A card that
   * cannot be read now is logged and polled past: the next look reports an agent that does not answer.
   */
  private async streamingClient(remoteTaskId: string): Promise<Client | undefined> {
    try {
      const client = await this.clientFor();
      return (await client.getAgentCard()).capabilities?.streaming ? client : undefined;
    } catch (err) {
      this.deps.log.debug({ err, remoteTaskId }, 'the remote agent card could not be read; polling');
      return undefined;
    }
  }

  /** One look at the remote task: its ending, or undefined while it works. */
  private async look(remoteTaskId: string): Promise<Ending | undefined> {
    let remote: Task;
    try {
      remote = await (await this.clientFor()).getTask({ tenant: '', id: remoteTaskId, historyLength: 0 });
    } catch (err) {
      this.deps.log.warn({ err, remoteTaskId, remote: this.remote.url }, 'the remote A2A agent did not answer; looking again');
      return undefined;
    }
    const state = remote.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED;
    const said = textOf(remote.status?.message?.parts);
    this.progress(remoteTaskId, state, said);
    if (state === TaskState.TASK_STATE_COMPLETED) return this.completed(remote);
    if (FAILED_STATES.has(state))
      return {
        kind: 'failure',
        reason: `the remote A2A agent ended its task ${TaskState[state]}: ${said || 'no message'}`,
        lastWords: said,
      };
    if (ASKING_STATES.has(state))
      return {
        kind: 'stall',
        reason: `the remote A2A agent asks: "${said || '(no question given)'}"; Bosun does not answer for an operator`,
        lastWords: said,
      };
    return undefined;
  }

  /** An `agent.progress` event when the remote task's state or message changed since the last look. */
  private progress(remoteTaskId: string, state: TaskState, said: string): void {
    const key = `${state}\n${said}`;
    if (this.lastSeen.get(remoteTaskId) === key) return;
    this.lastSeen.set(remoteTaskId, key);
    const task = this.current.get(remoteTaskId);
    if (task)
      this.emit(task, 'agent.progress', { taskId: task.taskId, remoteTaskId, state: TaskState[state], message: said.slice(0, 2_000) });
  }

  /** A completed remote task's output: a DataPart valid against the output schema, else the text. */
  private completed(remote: Task): Ending {
    const parts = remote.artifacts.flatMap((a) => a.parts);
    const data = firstData(parts);
    if (data !== undefined) {
      const problem = validateAgainstSchema(this.deps.spec.outputSchema, data);
      if (problem === null) return { kind: 'completed', output: data };
      return {
        kind: 'failure',
        reason: `the remote A2A agent's output does not match the output schema: ${problem}`,
        lastWords: JSON.stringify(data),
      };
    }
    const text = textOf(parts) || textOf(remote.status?.message?.parts);
    if (text) return { kind: 'completed', output: text };
    return { kind: 'failure', reason: 'the remote A2A agent completed its task without any output', lastWords: '' };
  }

  private async cancelRemote(remoteTaskId: string): Promise<void> {
    try {
      await (await this.clientFor()).cancelTask({ tenant: '', id: remoteTaskId, metadata: { reason: 'Bosun gave up on the task' } });
    } catch (err) {
      this.deps.log.warn({ err, remoteTaskId }, 'the remote task could not be cancelled');
    }
  }

  /**
   * A delegation whose send nobody can account for: an INCOMPLETE part naming the send as in
   * doubt (the run ends partial and lists it in `inDoubt`), and an `in-doubt` dead letter with
   * what an operator needs to check the agent. Never sent again.
   */
  private async inDoubt(
    task: TaskJob,
    ck: RemoteTaskCheckpoint,
    base: Pick<TaskResult, 'v' | 'taskId' | 'agent' | 'attempts'>,
    reason: string,
  ): Promise<TaskResult> {
    const call = { key: ck.messageId, tool: `a2a SendMessage ${this.remote.url}` };
    const output = buildStallPayload(this.deps.spec, this.deps.name, '', reason);
    await this.deps.deadLetters.add(
      {
        kind: 'in-doubt',
        runId: task.runId,
        incidentId: task.incidentId,
        agent: this.deps.name,
        taskId: task.taskId,
        reason,
        lastWords: '',
        attempts: base.attempts,
        input: {
          ...call,
          args: { url: this.remote.url, messageId: ck.messageId, contextId: ck.contextId ?? task.runId, sendingAt: ck.sendingAt },
        },
      },
      `in-doubt-${task.taskId}`,
    );
    this.deps.log.warn({ taskId: task.taskId, messageId: ck.messageId }, 'remote task in doubt');
    this.emit(task, 'agent.failed', { taskId: task.taskId, reason, marker: STALL_MARKER });
    return { ...base, status: 'failed', output, error: reason, reason: 'in_doubt', inDoubt: [call] };
  }

  private emit(
    task: TaskJob,
    type: 'agent.started' | 'agent.progress' | 'agent.completed' | 'agent.stalled' | 'agent.failed',
    data: Record<string, unknown>,
  ) {
    this.deps.events.emit({ type, runId: task.runId, incidentId: task.incidentId, agent: this.deps.name, data });
  }

  /** Records the result (dead letter first, then the event), saves it in the checkpoint and returns it. */
  private async end(task: TaskJob, ck: RemoteTaskCheckpoint, attempt: number, ending: Ending): Promise<TaskResult> {
    const result = await this.result(task, ck, attempt, ending);
    await this.save({ ...ck, result });
    return result;
  }

  private async result(task: TaskJob, ck: RemoteTaskCheckpoint, attempts: number, ending: Ending): Promise<TaskResult> {
    const base = { v: 1 as const, taskId: task.taskId, agent: this.deps.name, attempts };
    if (ending.kind === 'completed') {
      this.emit(task, 'agent.completed', { taskId: task.taskId, steps: 1, output: ending.output });
      return { ...base, status: 'completed', output: ending.output, reason: 'completed' };
    }
    if (ending.kind === 'in-doubt') return this.inDoubt(task, ck, base, ending.reason);
    const reason =
      ending.kind === 'cancelled' ? 'cancelled: the coordinator gave up on this task, or an operator cancelled its run' : ending.reason;
    const lastWords = ending.kind === 'cancelled' ? '' : ending.lastWords;
    const output = buildStallPayload(this.deps.spec, this.deps.name, lastWords, reason);
    if (ending.kind === 'cancelled') return { ...base, status: 'stalled', output, error: 'cancelled', reason: 'cancelled' };
    const kind: DeadLetterKind = ending.kind;
    await this.deps.deadLetters.add(
      { kind, runId: task.runId, incidentId: task.incidentId, agent: this.deps.name, taskId: task.taskId, reason, lastWords, attempts },
      `${kind}-${task.taskId}`,
    );
    this.deps.log.warn({ taskId: task.taskId, kind, reason }, 'remote task incomplete');
    if (ending.kind === 'failure') {
      this.emit(task, 'agent.failed', { taskId: task.taskId, reason, marker: STALL_MARKER });
      return { ...base, status: 'failed', output, lastWords, error: reason, reason: 'failure' };
    }
    this.emit(task, 'agent.stalled', { taskId: task.taskId, kind: ending.kind, reason, marker: STALL_MARKER, lastWords });
    return { ...base, status: 'stalled', output, lastWords, ...(ending.kind === 'timeout' ? { error: reason } : {}), reason: ending.kind };
  }
}
