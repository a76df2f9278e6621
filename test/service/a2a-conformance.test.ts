import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Role, TaskState, type Message, type StreamResponse, type Task, type TaskStatusUpdateEvent } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import type { Task as Task03 } from 'a2a-sdk-03';
import { RunResult, type RunEvent } from '@bosun/contract';
import {
  a2aClient,
  a2aClient03,
  collect,
  dataPart,
  freePort,
  schema03,
  sendRequest,
  startClusterTest,
  startService,
  textPart,
  tokenEntry,
  userMessage,
  userMessage03,
  waitUntil,
  type ClusterTest,
  type ServiceProcess,
} from '../helpers/index.js';

// Our A2A conformance suite, written from the A2A specification (1.0, and 0.3 for the legacy
// binding) and the categories of the A2A TCK (docs/a2a.md says which it covers): the A2A service
// as one process in front of one small cluster (gateway, coordinator, one specialist, the fake
// model) shared by the file, since these tasks run to their end. Both bindings (JSON-RPC and
// HTTP+JSON), both protocol versions, a 1.x SDK client (@a2a-js/sdk 1.3) and a 0.3 one
// (@a2a-js/sdk 0.3.14), and raw requests where a client would hide the wire.

const TOKEN = 'conformance-token-0123456789';

let t: ClusterTest;
let a2a: ServiceProcess;
let base: string;
const clients: Record<'JSONRPC' | 'HTTP+JSON', Client> = {} as never;
const check03 = schema03();

const incident = (reason: string, extra: Record<string, unknown> = {}) => ({
  source: 'a2a-conformance',
  reason,
  summary: `${reason} on checkout`,
  labels: { service: 'checkout' },
  ...extra,
});
const slow = () => incident('PodCrashLooping', { payload: { fake: { slowMs: { kubernetes: 20_000 } } } });
const jobTotal = async () =>
  Object.values(await t.client.incidents.getJobCounts('wait', 'active', 'completed', 'failed', 'waiting-children', 'delayed')).reduce(
    (a, b) => a + b,
    0,
  );
const statusesOf = (rs: StreamResponse[]): TaskStatusUpdateEvent[] =>
  rs.flatMap((r) => (r.payload?.$case === 'statusUpdate' ? [r.payload.value] : []));

/** The run events a stream documents as steps (stream.ts progressText). */
const DOCUMENTED = new Set([
  'run.started',
  'run.routed',
  'agent.delegated',
  'agent.started',
  'agent.completed',
  'agent.stalled',
  'agent.failed',
  'tool.started',
  'agent.progress',
  'approval.resolved',
]);

/** Every documented event of a run, once the collector has its end. */
async function documentedEvents(runId: string): Promise<RunEvent[]> {
  await waitUntil(
    () => t.client.events.forRun(runId).some((e) => e.type === 'run.completed' || e.type === 'run.failed'),
    30_000,
    `run ${runId} ended`,
  );
  return t.client.events.forRun(runId).filter((e) => DOCUMENTED.has(e.type));
}

async function rpc(method: string, params: unknown, version: string | null = '1.0') {
  const res = await fetch(`${base}/a2a/jsonrpc`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${TOKEN}`,
      ...(version === null ? {} : { 'a2a-version': version }),
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return (await res.json()) as { result?: any; error?: { code: number; message: string } };
}

beforeAll(async () => {
  const port = await freePort();
  t = await startClusterTest('a2a-conformance', (config) => {
    config.a2a = {
      port,
      tokens: [tokenEntry(TOKEN, 'conformance', true)],
      blockingWaitMs: 60_000,
      runModes: { text: 'task', data: 'dynamic', messageReasons: ['HighLatency'] },
    };
  });
  a2a = t.cluster.add(startService('a2a', { ...t.env, LOG_LEVEL: 'info' }));
  await a2a.ready();
  base = `http://127.0.0.1:${port}`;
  clients.JSONRPC = await a2aClient(base, TOKEN, 'JSONRPC');
  clients['HTTP+JSON'] = await a2aClient(base, TOKEN, 'HTTP+JSON');
}, 120_000);

afterAll(async () => {
  await t?.close();
});

describe.each(['JSONRPC', 'HTTP+JSON'] as const)('protocol 1.0 over %s, with the 1.x SDK client', (binding) => {
  const client = () => clients[binding];

  it('a blocking send completes with the run result and the answer; the same message id starts no second run', async () => {
    const message = userMessage([dataPart(incident('PodCrashLooping'))]);
    const before = await jobTotal();
    const task = (await client().sendMessage(sendRequest(message))) as Task;
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(task.id).toMatch(/^r[0-9a-f]{20}$/);
    const result = RunResult.parse(task.artifacts.find((a) => a.artifactId === 'run-result')!.parts[0]!.content!.value);
    expect(result.runId).toBe(task.id);
    const answer = task.artifacts.find((a) => a.artifactId === 'answer')!.parts[0]!.content;
    expect(answer?.$case === 'text' && answer.value).toBe(result.answer);
    // Finished: status.timestamp is when the run ended, the same at every read.
    expect(task.status?.timestamp).toBe(result.finishedAt);
    const again = (await client().sendMessage(sendRequest(message))) as Task;
    expect(again.id).toBe(task.id);
    expect(again.status?.timestamp).toBe(result.finishedAt);
    expect(await jobTotal()).toBe(before + 1);
    // Spec: subscribing to a task in a final state is UnsupportedOperation.
    await expect(collect(client().resubscribeTask({ tenant: '', id: task.id }))).rejects.toThrow(/ended|unsupported/i);
  }, 90_000);

  it('a non-blocking send returns at once; GetTask follows it to completed and honours historyLength', async () => {
    const task = (await client().sendMessage(
      sendRequest(userMessage([textPart('checkout pods keep restarting')]), { returnImmediately: true }),
    )) as Task;
    expect([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING]).toContain(task.status?.state);
    let got: Task | undefined;
    await waitUntil(
      async () => (got = await client().getTask({ tenant: '', id: task.id })).status?.state === TaskState.TASK_STATE_COMPLETED,
      60_000,
      'the task completed',
    );
    expect(got!.history.length).toBe(2);
    const one = await client().getTask({ tenant: '', id: task.id, historyLength: 1 });
    expect(one.history).toHaveLength(1);
    expect(one.history[0]!.messageId).toBe(got!.history[1]!.messageId);
    expect((await client().getTask({ tenant: '', id: task.id, historyLength: 0 })).history).toHaveLength(0);
  }, 90_000);

  it('a stream gives the task, every documented step, the artifacts and the final status; states and timestamps never go back', async () => {
    const responses = await collect(client().sendMessageStream(sendRequest(userMessage([dataPart(incident('OOMKilled'))]))));
    expect(responses[0]!.payload?.$case).toBe('task');
    const runId = responses[0]!.payload?.$case === 'task' ? responses[0]!.payload.value.id : '';
    const shown = statusesOf(responses);
    const states = shown.map((s) => s.status!.state);
    const firstWorking = states.indexOf(TaskState.TASK_STATE_WORKING);
    expect(firstWorking).toBeGreaterThanOrEqual(0);
    expect(states.slice(firstWorking)).not.toContain(TaskState.TASK_STATE_SUBMITTED);
    expect(states.at(-1)).toBe(TaskState.TASK_STATE_COMPLETED);
    const times = shown.map((s) => Date.parse(s.status!.timestamp!));
    expect([...times].sort((a, b) => a - b)).toEqual(times);
    expect(responses.filter((r) => r.payload?.$case === 'artifactUpdate')).toHaveLength(2);
    const seqs = new Set(shown.map((s) => s.metadata?.seq));
    for (const e of await documentedEvents(runId)) expect(seqs.has(e.seq), `${e.type} (seq ${e.seq}) in the stream`).toBe(true);
  }, 90_000);

  it('CancelTask cancels the run and the task ends canceled; a canceled task is not cancelable', async () => {
    const task = (await client().sendMessage(sendRequest(userMessage([dataPart(slow())]), { returnImmediately: true }))) as Task;
    await waitUntil(
      async () => (await client().getTask({ tenant: '', id: task.id })).status?.state === TaskState.TASK_STATE_WORKING,
      30_000,
      'the task is working',
    );
    const cancelled = await client().cancelTask({ tenant: '', id: task.id, metadata: { reason: 'not needed' } });
    expect(cancelled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    const said = cancelled.status?.message?.parts[0]?.content;
    // The REST binding's CancelTask carries no metadata, so only JSON-RPC brings the reason.
    expect(said?.$case === 'text' && said.value).toContain(
      binding === 'JSONRPC' ? 'cancelled by a2a:conformance: not needed' : 'cancelled by a2a:conformance',
    );
    await expect(client().cancelTask({ tenant: '', id: task.id, metadata: undefined })).rejects.toThrow(/cancel/i);
  }, 90_000);
});

describe('ListTasks on tasks that ran', () => {
  it('a state filter applies before paging: [canceled, completed, completed] by COMPLETED, one a page, gives 1, 1 and totalSize 2', async () => {
    const contextId = `ctx-${Math.random()}`;
    const c = clients.JSONRPC;
    for (let i = 0; i < 2; i++) await c.sendMessage(sendRequest(userMessage([dataPart(incident('PodCrashLooping'))], { contextId })));
    const slowTask = (await c.sendMessage(
      sendRequest(userMessage([dataPart(slow())], { contextId }), { returnImmediately: true }),
    )) as Task;
    await waitUntil(
      async () => (await c.getTask({ tenant: '', id: slowTask.id })).status?.state === TaskState.TASK_STATE_WORKING,
      30_000,
      'working',
    );
    await c.cancelTask({ tenant: '', id: slowTask.id, metadata: undefined });
    const sizes: number[] = [];
    let pageToken = '';
    do {
      const page = await c.listTasks({
        tenant: '',
        contextId,
        status: TaskState.TASK_STATE_COMPLETED,
        pageSize: 1,
        pageToken,
        statusTimestampAfter: undefined,
      });
      expect(page.totalSize).toBe(2);
      expect(page.tasks.every((x) => x.status?.state === TaskState.TASK_STATE_COMPLETED)).toBe(true);
      sizes.push(page.tasks.length);
      pageToken = page.nextPageToken;
    } while (pageToken && sizes.length < 5);
    expect(sizes).toEqual([1, 1]);
    const all = await c.listTasks({ tenant: '', contextId, status: 0, pageToken: '', statusTimestampAfter: undefined });
    const cancelledAt = all.tasks.find((x) => x.id === slowTask.id)!.status!.timestamp!;
    const after = await c.listTasks({
      tenant: '',
      contextId,
      status: 0,
      pageToken: '',
      statusTimestampAfter: new Date(Date.parse(cancelledAt) - 1).toISOString(),
    });
    expect(after.tasks.map((x) => x.id)).toContain(slowTask.id);
  }, 120_000);
});

describe('fast runs', () => {
  it('five streams of quick runs at once: every documented step of each run reaches its stream', async () => {
    const streams = await Promise.all(
      Array.from({ length: 5 }, () =>
        collect(clients.JSONRPC.sendMessageStream(sendRequest(userMessage([dataPart(incident('OOMKilled'))])))),
      ),
    );
    for (const responses of streams) {
      const runId = responses[0]!.payload?.$case === 'task' ? responses[0]!.payload.value.id : '';
      const seqs = new Set(statusesOf(responses).map((s) => s.metadata?.seq));
      const missing = (await documentedEvents(runId)).filter((e) => !seqs.has(e.seq)).map((e) => e.type);
      expect(missing, `run ${runId}`).toEqual([]);
    }
  }, 120_000);
});

describe.each(['JSONRPC', 'HTTP+JSON'] as const)('protocol 0.3 over %s, with the @a2a-js/sdk 0.3.14 client', (binding) => {
  it('send (blocking), get with history, stream and cancel, each answer valid against the 0.3 JSON schema', async () => {
    const c = await a2aClient03(base, TOKEN, binding);
    const sent = (await c.sendMessage({ message: userMessage03([{ kind: 'data', data: incident('PodCrashLooping') }]) })) as Task03;
    expect(check03('Task', sent)).toBeUndefined();
    expect(sent).toMatchObject({ kind: 'task', status: { state: 'completed' } });
    const got = await c.getTask({ id: sent.id, historyLength: 1 });
    expect(check03('Task', got)).toBeUndefined();
    expect(got.history).toHaveLength(1);

    const events: Record<string, any>[] = [];
    for await (const e of c.sendMessageStream({ message: userMessage03([{ kind: 'text', text: 'pods restart on checkout' }]) }))
      events.push(e);
    expect(events[0]?.kind).toBe('task');
    for (const e of events) {
      const def = e.kind === 'task' ? 'Task' : e.kind === 'status-update' ? 'TaskStatusUpdateEvent' : 'TaskArtifactUpdateEvent';
      expect(check03(def, e), JSON.stringify(e).slice(0, 300)).toBeUndefined();
    }
    const last = events.at(-1)!;
    expect(last).toMatchObject({ kind: 'status-update', final: true, status: { state: 'completed' } });

    const slowSent = (await c.sendMessage({
      message: userMessage03([{ kind: 'data', data: slow() }]),
      configuration: { blocking: false },
    })) as Task03;
    await waitUntil(async () => (await c.getTask({ id: slowSent.id })).status.state === 'working', 30_000, 'working');
    const cancelled = await c.cancelTask({ id: slowSent.id });
    expect(check03('Task', cancelled)).toBeUndefined();
    expect(cancelled.status.state).toBe('canceled');
  }, 120_000);
});

describe('more of protocol 1.0 and 0.3 on the wire', () => {
  it('a partial run is a completed task whose artifacts and status message name the INCOMPLETE part', async () => {
    const task = (await clients.JSONRPC.sendMessage(
      sendRequest(userMessage([dataPart(incident('ErrorRateHigh', { payload: { fake: { stall: ['database'] } } }))])),
    )) as Task;
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const status = task.status?.message?.parts[0]?.content;
    expect(status?.$case === 'text' && status.value).toMatch(/PARTIAL\. INCOMPLETE parts: database \(stalled\)/);
    const result = task.artifacts.find((a) => a.artifactId === 'run-result')!;
    expect(result.metadata?.incomplete).toEqual(['database (stalled)']);
  }, 90_000);

  it('run mode dynamic: an incident whose reason is in messageReasons is answered with one message that collects the run', async () => {
    const reply = await clients.JSONRPC.sendMessage(
      sendRequest(userMessage([dataPart(incident('HighLatency'))]), { returnImmediately: true }),
    );
    expect('messageId' in reply, JSON.stringify(reply).slice(0, 400)).toBe(true);
    const message = reply as Message;
    expect(message.role).toBe(Role.ROLE_AGENT);
    expect(message.metadata).toMatchObject({ status: 'completed', state: 'TASK_STATE_COMPLETED' });
    const result = RunResult.parse(message.parts[1]!.content!.value);
    expect(message.parts[0]!.content).toEqual({ $case: 'text', value: result.answer });
    const streamed = await collect(clients.JSONRPC.sendMessageStream(sendRequest(userMessage([dataPart(incident('HighLatency'))]))));
    expect(streamed.map((r) => r.payload?.$case)).toEqual(['message']);
  }, 90_000);

  it('raw 0.3 JSON-RPC without a version header: message/send, tasks/get, and tasks/resubscribe on a finished task is -32004', async () => {
    const sent = await rpc(
      'message/send',
      { message: userMessage03([{ kind: 'data', data: incident('PodCrashLooping') }], { messageId: `legacy-${Date.now()}` }) },
      null,
    );
    expect(sent.error).toBeUndefined();
    expect(check03('Task', sent.result)).toBeUndefined();
    expect(sent.result?.status.state).toBe('completed');
    const got = await rpc('tasks/get', { id: sent.result.id, historyLength: 1 }, null);
    expect(got.result?.history).toHaveLength(1);
    expect((await rpc('tasks/get', { id: 'r00000000000000000000' }, null)).error?.code).toBe(-32001);
    const res = await fetch(`${base}/a2a/jsonrpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tasks/resubscribe', params: { id: sent.result.id } }),
    });
    expect(await res.text()).toContain('-32004');
    expect((await rpc('SubscribeToTask', { id: sent.result.id })).error?.code).toBe(-32004);
  }, 90_000);
});
