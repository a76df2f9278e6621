import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Role, TaskState, type Message, type Task } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { RunResult } from '@bosun/contract';
import {
  a2aClient,
  collect,
  dataPart,
  freePort,
  sendRequest,
  startClusterTest,
  startService,
  textPart,
  tokenEntry,
  userMessage,
  waitUntil,
  type ClusterTest,
  type ServiceProcess,
} from '../helpers/index.js';

// The A2A server (services/a2a) as its own process in front of a cluster, driven with the
// official SDK client: the card, blocking and non-blocking sends, a stream, get with history,
// cancel, a partial run, two tenants, 401s, and bad input with the protocol's error codes.

const ALPHA = 'alpha-token-0123456789';
const BETA = 'beta-token-0123456789';

let t: ClusterTest;
let a2a: ServiceProcess;
let base: string;
let alpha: Client;
let beta: Client;

const incident = (reason: string, extra: Record<string, unknown> = {}) => ({
  source: 'a2a-test',
  reason,
  summary: `${reason} on checkout`,
  labels: { service: 'checkout' },
  ...extra,
});

const incidentJobs = async () =>
  await t.client.incidents.getJobCounts('wait', 'active', 'completed', 'failed', 'waiting-children', 'delayed');
const jobTotal = async () => Object.values(await incidentJobs()).reduce((a, b) => a + b, 0);

beforeAll(async () => {
  const port = await freePort();
  t = await startClusterTest('a2a', (config) => {
    config.a2a = {
      port,
      tokens: [tokenEntry(ALPHA, 'alpha', true), tokenEntry(BETA, 'beta')],
      maxMessageBytes: 4096,
      blockingWaitMs: 60_000,
      // Incidents about latency are answered with one message; the rest with a task.
      runModes: { text: 'task', data: 'dynamic', messageReasons: ['HighLatency'] },
    };
  });
  a2a = t.cluster.add(startService('a2a', t.env));
  await a2a.ready();
  base = `http://127.0.0.1:${port}`;
  alpha = await a2aClient(base, ALPHA);
  beta = await a2aClient(base, BETA);
}, 120_000);

afterAll(async () => {
  await t?.close();
});

describe('the agent card', () => {
  it('is served at the well-known path: triage and one skill per specialist, JSON-RPC and REST, a bearer scheme', async () => {
    const res = await fetch(`${base}/.well-known/agent-card.json`);
    expect(res.status).toBe(200);
    const card = await alpha.getAgentCard();
    expect(card.skills.map((s) => s.id).sort()).toEqual(['specialist-database', 'specialist-kubernetes', 'specialist-triage', 'triage']);
    expect(card.supportedInterfaces.map((i) => `${i.protocolBinding} ${i.protocolVersion}`).sort()).toEqual([
      'HTTP+JSON 1.0',
      'JSONRPC 0.3',
      'JSONRPC 1.0',
    ]);
    expect(card.supportedInterfaces[0]!.url).toBe(`${base}/a2a/jsonrpc`);
    const scheme = card.securitySchemes.bearer?.scheme;
    expect(scheme?.$case).toBe('httpAuthSecurityScheme');
    expect(scheme?.$case === 'httpAuthSecurityScheme' ? scheme.value.scheme : '').toBe('bearer');
    expect(card.capabilities?.streaming).toBe(true);
  });
});

describe('sending', () => {
  it('a blocking send of an incident DataPart returns the completed task with the run result and the answer; the same message id starts no second run', async () => {
    const message = userMessage([dataPart(incident('PodCrashLooping'))]);
    const before = await jobTotal();
    const task = (await alpha.sendMessage(sendRequest(message))) as Task;
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(task.id).toMatch(/^r[0-9a-f]{20}$/);
    const result = RunResult.parse(task.artifacts.find((a) => a.artifactId === 'run-result')!.parts[0]!.content!.value);
    expect(result.runId).toBe(task.id);
    expect(result.status).toBe('completed');
    const answer = task.artifacts.find((a) => a.artifactId === 'answer')!.parts[0]!.content;
    expect(answer?.$case === 'text' && answer.value).toBe(result.answer);
    const again = (await alpha.sendMessage(sendRequest(message))) as Task;
    expect(again.id).toBe(task.id);
    expect(await jobTotal()).toBe(before + 1);
  }, 90_000);

  it('a non-blocking send of free text returns at once; tasks/get follows it to completed and honours historyLength', async () => {
    const task = (await alpha.sendMessage(
      sendRequest(userMessage([textPart('checkout pods keep restarting')]), { returnImmediately: true }),
    )) as Task;
    expect([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING]).toContain(task.status?.state);
    let got: Task | undefined;
    await waitUntil(
      async () => (got = await alpha.getTask({ tenant: '', id: task.id })).status?.state === TaskState.TASK_STATE_COMPLETED,
      60_000,
      'the task completed',
    );
    expect(got!.history.length).toBe(2);
    const first = got!.history[0]!.parts[0]!.content;
    expect(first?.$case === 'text' && first.value).toBe('checkout pods keep restarting');
    const one = await alpha.getTask({ tenant: '', id: task.id, historyLength: 1 });
    expect(one.history).toHaveLength(1);
    expect(one.history[0]!.messageId).toBe(got!.history[1]!.messageId);
    const none = await alpha.getTask({ tenant: '', id: task.id, historyLength: 0 });
    expect(none.history).toHaveLength(0);
  }, 90_000);

  it('message/stream gives the task, working updates from the run events, the artifacts, and the final status', async () => {
    const responses = await collect(alpha.sendMessageStream(sendRequest(userMessage([dataPart(incident('OOMKilled'))]))));
    expect(responses[0]!.payload?.$case).toBe('task');
    const updates = responses
      .filter((r) => r.payload?.$case === 'statusUpdate')
      .map((r) => (r.payload!.value as { status: { state: TaskState } }).status.state);
    expect(updates).toContain(TaskState.TASK_STATE_WORKING);
    expect(updates[updates.length - 1], JSON.stringify(responses[responses.length - 1])).toBe(TaskState.TASK_STATE_COMPLETED);
    const artifacts = responses.filter((r) => r.payload?.$case === 'artifactUpdate');
    expect(artifacts).toHaveLength(2);
    const last = responses[responses.length - 1]!;
    expect(last.payload?.$case).toBe('statusUpdate');
  }, 90_000);

  it('a partial run is a completed task whose artifacts and status message name the INCOMPLETE part', async () => {
    const task = (await alpha.sendMessage(
      sendRequest(userMessage([dataPart(incident('ErrorRateHigh', { payload: { fake: { stall: ['database'] } } }))])),
    )) as Task;
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const status = task.status?.message?.parts[0]?.content;
    expect(status?.$case === 'text' && status.value).toMatch(/PARTIAL\. INCOMPLETE parts: database \(stalled\)/);
    const result = task.artifacts.find((a) => a.artifactId === 'run-result')!;
    expect(result.metadata?.incomplete).toEqual(['database (stalled)']);
    expect(result.description).toContain('INCOMPLETE: database (stalled)');
  }, 90_000);
});

describe('run modes', () => {
  it('dynamic: an incident whose reason is in messageReasons is answered with one message that collects the run', async () => {
    const reply = await alpha.sendMessage(sendRequest(userMessage([dataPart(incident('HighLatency'))]), { returnImmediately: true }));
    expect('messageId' in reply, JSON.stringify(reply).slice(0, 400)).toBe(true);
    const message = reply as Message;
    expect(message.role).toBe(Role.ROLE_AGENT);
    expect(message.metadata).toMatchObject({ status: 'completed', state: 'TASK_STATE_COMPLETED' });
    const result = RunResult.parse(message.parts[1]!.content!.value);
    expect(message.parts[0]!.content).toEqual({ $case: 'text', value: result.answer });
    expect(message.metadata?.runId).toBe(result.runId);
    const streamed = await collect(alpha.sendMessageStream(sendRequest(userMessage([dataPart(incident('HighLatency'))]))));
    expect(streamed.map((r) => r.payload?.$case)).toEqual(['message']);
  }, 90_000);

  it('dynamic: any other reason is answered with a task', async () => {
    const task = await alpha.sendMessage(sendRequest(userMessage([dataPart(incident('OOMKilled'))]), { returnImmediately: true }));
    expect('status' in task && task.id).toMatch(/^r[0-9a-f]{20}$/);
  }, 90_000);
});

describe('cancelling', () => {
  it('tasks/cancel cancels the run and the task ends canceled', async () => {
    const task = (await alpha.sendMessage(
      sendRequest(userMessage([dataPart(incident('PodCrashLooping', { payload: { fake: { slowMs: { kubernetes: 20_000 } } } }))]), {
        returnImmediately: true,
      }),
    )) as Task;
    await waitUntil(
      async () => (await alpha.getTask({ tenant: '', id: task.id })).status?.state === TaskState.TASK_STATE_WORKING,
      30_000,
      'the task is working',
    );
    const cancelled = await alpha.cancelTask({ tenant: '', id: task.id, metadata: { reason: 'not needed' } });
    expect(cancelled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    const message = cancelled.status?.message?.parts[0]?.content;
    expect(message?.$case === 'text' && message.value).toContain('cancelled by a2a:alpha: not needed');
    await expect(alpha.cancelTask({ tenant: '', id: task.id, metadata: undefined })).rejects.toThrow(/not.*cancel|cancel/i);
  }, 90_000);
});

describe('tenants', () => {
  it("a tenant gets 'task not found' for another tenant's task, on get, cancel, resubscribe and list alike", async () => {
    const task = (await alpha.sendMessage(sendRequest(userMessage([textPart('tenant check')]), { returnImmediately: true }))) as Task;
    await expect(beta.getTask({ tenant: '', id: task.id })).rejects.toThrow(/not found/i);
    await expect(beta.getTask({ tenant: 'alpha', id: task.id })).rejects.toThrow(/not found/i);
    await expect(beta.cancelTask({ tenant: '', id: task.id, metadata: undefined })).rejects.toThrow(/not found/i);
    await expect(collect(beta.resubscribeTask({ tenant: '', id: task.id }))).rejects.toThrow(/not found/i);
    await expect(beta.getTask({ tenant: '', id: 'r00000000000000000000' })).rejects.toThrow(/not found/i);
    const listed = await beta.listTasks({ tenant: '', contextId: '', status: 0, pageToken: '', statusTimestampAfter: undefined });
    expect(listed.tasks.map((x) => x.id)).not.toContain(task.id);
    const own = await alpha.listTasks({ tenant: '', contextId: '', status: 0, pageToken: '', statusTimestampAfter: undefined });
    expect(own.tasks.map((x) => x.id)).toContain(task.id);
  }, 60_000);

  it('no token → 401, a wrong token → 401, and nothing is published', async () => {
    const before = await jobTotal();
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage([textPart('x')]) } });
    const none = await fetch(`${base}/a2a/jsonrpc`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Bearer realm="bosun-a2a"');
    const wrong = await fetch(`${base}/a2a/jsonrpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer not-a-token' },
      body,
    });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('www-authenticate')).toContain('invalid_token');
    const rest = await fetch(`${base}/a2a/rest/tasks/r00000000000000000000`);
    expect(rest.status).toBe(401);
    await expect((await a2aClient(base, null)).getTask({ tenant: '', id: 'x' })).rejects.toThrow();
    expect(await jobTotal()).toBe(before);
  });
});

describe('bad input gets the protocol error codes and nothing is published', () => {
  const rpc = async (body: string, headers: Record<string, string> = {}) => {
    const res = await fetch(`${base}/a2a/jsonrpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ALPHA}`, 'a2a-version': '1.0', ...headers },
      body,
    });
    return (await res.json()) as { error?: { code: number; message: string } };
  };
  const send = (message: unknown) => rpc(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message } }));
  const msg = (parts: unknown[]) => ({ messageId: `m-${Math.random()}`, role: 'ROLE_USER', parts });

  it('malformed JSON, unknown method, missing parts, oversized message, unsupported content', async () => {
    const before = await jobTotal();
    expect((await rpc('{"jsonrpc": "2.0", "id": 1, "method": ')).error?.code).toBe(-32700);
    expect((await rpc(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'NoSuchMethod', params: {} }))).error?.code).toBe(-32601);
    const noParts = await send(msg([]));
    expect(noParts.error?.code).toBe(-32602);
    expect(noParts.error?.message).toMatch(/parts/);
    const big = await send(msg([{ text: 'x'.repeat(5000) }]));
    expect(big.error?.code).toBe(-32602);
    expect(big.error?.message).toMatch(/over the limit of 4096 bytes/);
    const huge = await fetch(`${base}/a2a/jsonrpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ALPHA}`, 'a2a-version': '1.0' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: msg([{ text: 'x'.repeat(200_000) }]) } }),
    });
    expect(huge.status).toBe(413);
    expect(((await huge.json()) as { error: { code: number } }).error.code).toBe(-32600);
    const file = await send(msg([{ url: 'https://example.com/dump.bin', mediaType: 'application/octet-stream' }]));
    expect(file.error?.code).toBe(-32005);
    const badIncident = await send(msg([{ data: { reason: 'x'.repeat(300) } }]));
    expect(badIncident.error?.code).toBe(-32602);
    expect(badIncident.error?.message).toMatch(/reason/);
    const wrongType = await rpc(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 'x' } }), {
      'content-type': 'text/plain',
    });
    expect(wrongType.error?.code).toBe(-32005);
    expect(await jobTotal()).toBe(before);
  });
});

describe('protocol 0.3 on JSON-RPC (the SDK compat layer)', () => {
  const legacy = async (method: string, params: unknown) => {
    const res = await fetch(`${base}/a2a/jsonrpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ALPHA}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });
    return (await res.json()) as { result?: Record<string, any>; error?: { code: number; message: string } };
  };

  it('message/send and tasks/get work without an A2A-Version header', async () => {
    const sent = await legacy('message/send', {
      message: {
        kind: 'message',
        messageId: `legacy-${Date.now()}`,
        role: 'user',
        parts: [{ kind: 'data', data: incident('PodCrashLooping') }],
      },
    });
    expect(sent.error).toBeUndefined();
    expect(sent.result?.kind).toBe('task');
    expect(sent.result?.status.state).toBe('completed');
    const got = await legacy('tasks/get', { id: sent.result!.id, historyLength: 1 });
    expect(got.result?.id).toBe(sent.result!.id);
    expect(got.result?.history).toHaveLength(1);
    expect((await legacy('tasks/get', { id: 'r00000000000000000000' })).error?.code).toBe(-32001);
  }, 90_000);
});
