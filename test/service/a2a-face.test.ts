import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TaskState, type Task } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { A2AClient } from 'a2a-sdk-03/client';
import {
  a2aClient,
  a2aClient03,
  bearerFetch,
  collect,
  demoConfig,
  freePort,
  openContext,
  schema03,
  sendRequest,
  startService,
  textPart,
  tokenEntry,
  userMessage,
  writeConfig,
  type ServiceProcess,
  type TestContext,
} from '../helpers/index.js';

// The A2A server's own surface, as one service (two replicas of it) with real Redis and NATS and
// no cluster: nothing here needs a run to move. The card as 0.3 and 1.0 clients see it, auth,
// the protocol's error shapes for bad input (and nothing published), tenants, one task per
// message id under racing sends, push registrations, ListTasks' filters and checks, the
// contextId check, and timestamps that do not move while the run does not. The behaviour of a
// task whose run moves is in a2a-conformance.test.ts.

const ALPHA = 'alpha-token-0123456789';
const BETA = 'beta-token-0123456789';

let ctx: TestContext;
const replicas: ServiceProcess[] = [];
let bases: [string, string];
let alpha: Client;
let beta: Client;
let receiver: Server;
let hooks: string;

const incidentJobs = async () => {
  const { Queue } = await import('bullmq');
  const q = new Queue('incidents', { connection: ctx.redis, prefix: ctx.prefix });
  try {
    return Object.values(
      await q.getJobCounts('wait', 'active', 'completed', 'failed', 'waiting-children', 'delayed', 'prioritized'),
    ).reduce((a, b) => a + b, 0);
  } finally {
    await q.close();
  }
};

/** A raw JSON-RPC call to a replica (1.0 unless `headers` say otherwise). */
async function rpc(body: unknown, options: { headers?: Record<string, string>; base?: string; raw?: boolean; query?: string } = {}) {
  const res = await fetch(`${options.base ?? bases[0]}/a2a/jsonrpc${options.query ?? ''}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ALPHA}`, 'a2a-version': '1.0', ...options.headers },
    body: options.raw ? (body as string) : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as { id?: unknown; result?: any; error?: { code: number; message: string } } };
}
const call = (method: string, params: unknown, headers?: Record<string, string>) =>
  rpc({ jsonrpc: '2.0', id: 1, method, params }, { headers });
const msg = (parts: unknown[], extra: Record<string, unknown> = {}) => ({
  messageId: `m-${Math.random()}`,
  role: 'ROLE_USER',
  parts,
  ...extra,
});
const sendRaw = (message: unknown, configuration: Record<string, unknown> = { returnImmediately: true }) =>
  call('SendMessage', { message, configuration });

beforeAll(async () => {
  ctx = await openContext('a2a-face');
  receiver = createServer((_req, res) => res.end()).listen(0, '127.0.0.1');
  await new Promise((r) => receiver.once('listening', r));
  hooks = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hooks/`;
  const ports = [await freePort(), await freePort()];
  const config = demoConfig();
  config.a2a = {
    port: ports[0],
    tokens: [tokenEntry(ALPHA, 'alpha', true), tokenEntry(BETA, 'beta')],
    maxMessageBytes: 4096,
    pushNotifications: { allowedUrls: [hooks] },
  };
  const env = { ...ctx.env, LOG_LEVEL: 'info', BOSUN_CONFIG: writeConfig(ctx, config) };
  for (const [i, port] of ports.entries())
    replicas.push(startService('a2a', env, { name: `a2a-${i + 1}`, args: ['--port', String(port)] }));
  await Promise.all(replicas.map((r) => r.ready()));
  bases = [`http://127.0.0.1:${ports[0]}`, `http://127.0.0.1:${ports[1]}`];
  alpha = await a2aClient(bases[0], ALPHA);
  beta = await a2aClient(bases[0], BETA);
}, 60_000);

afterAll(async () => {
  await Promise.all(replicas.map((r) => r.stop()));
  receiver?.close();
  await ctx?.close();
});

describe('the agent card', () => {
  it('is one card: valid against the official 0.3 JSON schema, with the 1.0 interfaces beside the 0.3 fields', async () => {
    const res = await fetch(`${bases[0]}/.well-known/agent-card.json`);
    expect(res.status).toBe(200);
    const card = (await res.json()) as Record<string, any>;
    expect(schema03()('AgentCard', card)).toBeUndefined();
    expect(card.url).toBe(`${bases[0]}/a2a/jsonrpc`);
    expect(card.skills.map((s: { id: string }) => s.id).sort()).toEqual([
      'specialist-database',
      'specialist-kubernetes',
      'specialist-triage',
      'triage',
    ]);
    expect(card.supportedInterfaces.map((i: any) => `${i.protocolBinding} ${i.protocolVersion}`)).toEqual([
      'JSONRPC 1.0',
      'HTTP+JSON 1.0',
      'JSONRPC 0.3',
      'HTTP+JSON 0.3',
    ]);
    // The same bytes whatever version the client names: nothing to negotiate.
    const asked10 = await (await fetch(`${bases[0]}/.well-known/agent-card.json`, { headers: { 'a2a-version': '1.0' } })).text();
    expect(asked10).toBe(JSON.stringify(card));
  });

  it('an @a2a-js/sdk 0.3.14 client discovers it from its URL: A2AClient.fromCardUrl and ClientFactory, JSON-RPC and HTTP+JSON', async () => {
    const legacy = await A2AClient.fromCardUrl(`${bases[0]}/.well-known/agent-card.json`, { fetchImpl: bearerFetch(ALPHA) });
    expect((await legacy.getAgentCard()).url).toBe(`${bases[0]}/a2a/jsonrpc`);
    for (const transport of ['JSONRPC', 'HTTP+JSON'] as const) {
      const client = await a2aClient03(bases[0], ALPHA, transport);
      await expect(client.getTask({ id: 'r00000000000000000000' })).rejects.toThrow(/not found/i);
    }
  });

  it('a 1.x client discovers it too, on both bindings', async () => {
    for (const transport of ['JSONRPC', 'HTTP+JSON'] as const) {
      const client = await a2aClient(bases[0], ALPHA, transport);
      expect((await client.getAgentCard()).capabilities?.streaming).toBe(true);
      await expect(client.getTask({ tenant: '', id: 'r00000000000000000000' })).rejects.toThrow(/not found/i);
    }
  });
});

describe('auth', () => {
  it('no token or a wrong one → 401 with a bearer challenge, on both bindings, and nothing is published', async () => {
    const before = await incidentJobs();
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage([textPart('x')]) } });
    const none = await fetch(`${bases[0]}/a2a/jsonrpc`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Bearer realm="bosun-a2a"');
    const wrong = await fetch(`${bases[0]}/a2a/jsonrpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer not-a-token' },
      body,
    });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('www-authenticate')).toContain('invalid_token');
    const rest = await fetch(`${bases[0]}/a2a/rest/tasks/r00000000000000000000`);
    expect(rest.status).toBe(401);
    expect(await rest.json()).toMatchObject({ error: { code: 401, status: 'UNAUTHENTICATED' } });
    await expect((await a2aClient(bases[0], null)).getTask({ tenant: '', id: 'x' })).rejects.toThrow();
    expect(await incidentJobs()).toBe(before);
  });
});

describe('bad input gets the protocol error codes, and nothing is published', () => {
  it('JSON-RPC: malformed JSON, unknown method, missing parts, oversized message, unsupported content', async () => {
    const before = await incidentJobs();
    expect((await rpc('{"jsonrpc": "2.0", "id": 1, "method": ', { raw: true })).body.error?.code).toBe(-32700);
    expect((await call('NoSuchMethod', {})).body.error?.code).toBe(-32601);
    const noParts = await sendRaw(msg([]));
    expect(noParts.body.error?.code).toBe(-32602);
    expect(noParts.body.error?.message).toMatch(/parts/);
    const big = await sendRaw(msg([{ text: 'x'.repeat(5000) }]));
    expect(big.body.error?.code).toBe(-32602);
    expect(big.body.error?.message).toMatch(/over the limit of 4096 bytes/);
    const huge = await sendRaw(msg([{ text: 'x'.repeat(200_000) }]));
    expect(huge.status).toBe(413);
    expect(huge.body.error?.code).toBe(-32600);
    expect((await sendRaw(msg([{ url: 'https://example.com/dump.bin', mediaType: 'application/octet-stream' }]))).body.error?.code).toBe(
      -32005,
    );
    const badIncident = await sendRaw(msg([{ data: { reason: 'x'.repeat(300) } }]));
    expect(badIncident.body.error?.code).toBe(-32602);
    expect(badIncident.body.error?.message).toMatch(/reason/);
    const wrongType = await rpc(
      { jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 'x' } },
      { headers: { 'content-type': 'text/plain' } },
    );
    expect(wrongType.body.error?.code).toBe(-32005);
    expect(await incidentJobs()).toBe(before);
  });

  it('JSON-RPC structure errors are -32600 (Invalid Request), in 1.0 and 0.3 alike: a wrong jsonrpc, no method, an object id, a batch', async () => {
    const versions: Record<string, string>[] = [{}, { 'a2a-version': '' }];
    for (const headers of versions) {
      const cases: unknown[] = [
        { jsonrpc: '1.0', id: 1, method: 'SendMessage', params: {} },
        { jsonrpc: '2.0', id: 2, params: {} },
        { jsonrpc: '2.0', id: { bad: 'type' }, method: 'SendMessage', params: {} },
        [{ jsonrpc: '2.0', id: 3, method: 'GetTask', params: { id: 'x' } }],
      ];
      for (const body of cases) {
        const r = await rpc(body, { headers });
        expect(r.status).toBe(200);
        expect(r.body.error?.code, JSON.stringify(body)).toBe(-32600);
      }
      expect((await rpc({ jsonrpc: '1.0', id: 7, method: 'GetTask', params: {} }, { headers })).body.id).toBe(7);
    }
  });

  it('HTTP+JSON: malformed JSON and a text/plain body get 400 with the binding’s own error body (AIP-193), never a JSON-RPC body', async () => {
    const post = (body: string, contentType: string, version = '1.0') =>
      fetch(`${bases[0]}/a2a/rest/message:send`, {
        method: 'POST',
        headers: { 'content-type': contentType, authorization: `Bearer ${ALPHA}`, 'a2a-version': version },
        body,
      });
    const malformed = await post('{"message": ', 'application/json');
    expect(malformed.status).toBe(400);
    const body = (await malformed.json()) as { error: { code: number; status: string; details: { reason: string }[] }; jsonrpc?: string };
    expect(body.jsonrpc).toBeUndefined();
    expect(body.error).toMatchObject({ code: 400, status: 'INVALID_ARGUMENT' });
    expect(body.error.details[0]).toMatchObject({ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'INVALID_PARAMS' });
    const text = await post('{}', 'text/plain');
    expect(text.status).toBe(400);
    expect(((await text.json()) as { error: { details: { reason: string }[] } }).error.details[0]?.reason).toBe(
      'CONTENT_TYPE_NOT_SUPPORTED',
    );
    const missing = await fetch(`${bases[0]}/a2a/rest/tasks/r00000000000000000000`, {
      headers: { authorization: `Bearer ${ALPHA}`, 'a2a-version': '1.0' },
    });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ error: { code: 404, status: 'NOT_FOUND', details: [{ reason: 'TASK_NOT_FOUND' }] } });
    // 0.3's binding (no version named) answers a malformed body 400 with its own {code, message}.
    const legacy = await fetch(`${bases[0]}/a2a/rest/v1/message:send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ALPHA}` },
      body: '{"message": ',
    });
    expect(legacy.status).toBe(400);
    expect(await legacy.json()).toMatchObject({ code: -32700 });
  });

  it('?A2A-Version=1.0 stands for the header (spec §3.6.1); without either the request is 0.3', async () => {
    const body = { jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 'r00000000000000000000' } };
    const viaQuery = await fetch(`${bases[0]}/a2a/jsonrpc?A2A-Version=1.0`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ALPHA}` },
      body: JSON.stringify(body),
    });
    expect(((await viaQuery.json()) as { error: { code: number } }).error.code).toBe(-32001);
    const legacy = await fetch(`${bases[0]}/a2a/jsonrpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ALPHA}` },
      body: JSON.stringify(body),
    });
    // "GetTask" is not a 0.3 method name.
    expect(((await legacy.json()) as { error: { code: number } }).error.code).toBe(-32601);
  });

  it('GetExtendedAgentCard, while the card says extendedAgentCard: false, is UnsupportedOperation (-32004), in 1.0 and 0.3', async () => {
    expect((await call('GetExtendedAgentCard', {})).body.error?.code).toBe(-32004);
    expect(
      (await rpc({ jsonrpc: '2.0', id: 1, method: 'agent/getAuthenticatedExtendedCard' }, { headers: { 'a2a-version': '' } })).body.error
        ?.code,
    ).toBe(-32004);
  });
});

describe('tasks, tenants and message ids', () => {
  it("a tenant gets 'task not found' for another tenant's task, on get, cancel, resubscribe and list alike", async () => {
    const task = (await alpha.sendMessage(sendRequest(userMessage([textPart('tenant check')]), { returnImmediately: true }))) as Task;
    await expect(beta.getTask({ tenant: '', id: task.id })).rejects.toThrow(/not found/i);
    await expect(beta.getTask({ tenant: 'alpha', id: task.id })).rejects.toThrow(/not found/i);
    await expect(beta.cancelTask({ tenant: '', id: task.id, metadata: undefined })).rejects.toThrow(/not found/i);
    await expect(collect(beta.resubscribeTask({ tenant: '', id: task.id }))).rejects.toThrow(/not found/i);
    const listed = await beta.listTasks({ tenant: '', contextId: '', status: 0, pageToken: '', statusTimestampAfter: undefined });
    expect(listed.tasks.map((x) => x.id)).not.toContain(task.id);
    const own = await alpha.listTasks({ tenant: '', contextId: '', status: 0, pageToken: '', statusTimestampAfter: undefined });
    expect(own.tasks.map((x) => x.id)).toContain(task.id);
  });

  it('four racing sends of one message id, on both replicas, give one task and one incident job, round after round', async () => {
    for (let round = 0; round < 5; round++) {
      const before = await incidentJobs();
      const contextId = `ctx-race-${round}-${Math.random()}`;
      const message = msg([{ text: `race ${round}` }], { messageId: `race-${round}-${Math.random()}`, contextId });
      const answers = await Promise.all(
        [0, 1, 0, 1].map((i) =>
          rpc(
            { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message, configuration: { returnImmediately: true } } },
            { base: bases[i] },
          ),
        ),
      );
      const ids = new Set(answers.map((a) => a.body.result?.task?.id as string));
      expect([...ids], JSON.stringify(answers.map((a) => a.body))).toHaveLength(1);
      const listed = await call('ListTasks', { contextId });
      expect(listed.body.result.tasks.map((t: { id: string }) => t.id)).toEqual([...ids]);
      expect(await incidentJobs()).toBe(before + 1);
    }
  });

  it('an error never names the prefix: cancelling a task whose run is gone answers -32002 in the protocol’s words', async () => {
    const task = (await alpha.sendMessage(sendRequest(userMessage([textPart('phantom')]), { returnImmediately: true }))) as Task;
    const { Queue } = await import('bullmq');
    const q = new Queue('incidents', { connection: ctx.redis, prefix: ctx.prefix });
    await (await q.getJob(String(task.metadata?.incidentId)))?.remove();
    await q.close();
    const r = await call('CancelTask', { id: task.id });
    expect(r.body.error?.code).toBe(-32002);
    expect(r.body.error?.message).not.toContain(ctx.prefix);
    expect(r.body.error?.message).not.toMatch(/BOSUN_PREFIX/);
  });

  it('a message on a task with a contextId that is not the task’s is refused (-32602), and changes nothing', async () => {
    const task = (await alpha.sendMessage(sendRequest(userMessage([textPart('context check')]), { returnImmediately: true }))) as Task;
    const foreign = await sendRaw(msg([{ data: { decision: 'approve' } }], { taskId: task.id, contextId: 'someone-elses-context' }), {});
    expect(foreign.body.error?.code).toBe(-32602);
    expect(foreign.body.error?.message).toMatch(/contextId/);
    expect((await alpha.getTask({ tenant: '', id: task.id })).history).toHaveLength(1);
  });

  it('status.timestamp is when the state was reached: two reads of an unchanged task give the same one, and it is the task’s creation while submitted', async () => {
    const task = (await alpha.sendMessage(sendRequest(userMessage([textPart('timestamps')]), { returnImmediately: true }))) as Task;
    const first = await alpha.getTask({ tenant: '', id: task.id });
    await new Promise((r) => setTimeout(r, 1_200));
    const second = await alpha.getTask({ tenant: '', id: task.id });
    expect(second.status?.state).toBe(TaskState.TASK_STATE_SUBMITTED);
    expect(second.status?.timestamp).toBe(first.status?.timestamp);
    expect(task.status?.timestamp).toBe(first.status?.timestamp);
  });
});

describe('ListTasks', () => {
  it('filters before paging: pages hold only matching tasks and totalSize counts them; a filter that matches nothing gives one empty page', async () => {
    const contextId = `ctx-list-${Math.random()}`;
    for (let i = 0; i < 3; i++) await sendRaw(msg([{ text: `list ${i}` }], { contextId }));
    const pages: string[][] = [];
    let pageToken = '';
    do {
      const r = await call('ListTasks', { contextId, status: 'TASK_STATE_SUBMITTED', pageSize: 1, pageToken });
      expect(r.body.result.totalSize).toBe(3);
      pages.push(r.body.result.tasks.map((t: { id: string }) => t.id));
      pageToken = r.body.result.nextPageToken;
    } while (pageToken && pages.length < 5);
    expect(pages.map((p) => p.length)).toEqual([1, 1, 1]);
    const none = await call('ListTasks', { contextId, status: 'TASK_STATE_WORKING', pageSize: 1 });
    expect(none.body.result).toMatchObject({ tasks: [], totalSize: 0 });
    expect(none.body.result.nextPageToken ?? '').toBe('');
    const later = await call('ListTasks', { contextId, statusTimestampAfter: new Date(Date.now() + 60_000).toISOString() });
    expect(later.body.result).toMatchObject({ tasks: [], totalSize: 0 });
  });

  it('validates its parameters (-32602): a negative historyLength, an unknown status, a page size out of 1..100', async () => {
    for (const params of [
      { historyLength: -5 },
      { status: 'TASK_STATE_NONSENSE' },
      { pageSize: 0 },
      { pageSize: 101 },
      { statusTimestampAfter: 'yesterday' },
    ]) {
      const r = await call('ListTasks', params);
      expect(r.body.error?.code, JSON.stringify(params)).toBe(-32602);
    }
    expect((await call('GetTask', { id: 'r00000000000000000000', historyLength: -1 })).body.error?.code).toBe(-32602);
  });
});

describe('push registrations', () => {
  it('a registration made on the send is stored, with its token and authentication, before the run can start', async () => {
    const sent = await sendRaw(msg([{ text: 'push on send' }]), {
      returnImmediately: true,
      taskPushNotificationConfig: { url: `${hooks}t1`, token: 'tok-1', authentication: { scheme: 'Bearer', credentials: 'cred-1' } },
    });
    const taskId = sent.body.result.task.id as string;
    const listed = await call('ListTaskPushNotificationConfigs', { taskId });
    expect(listed.body.result.configs).toHaveLength(1);
    expect(listed.body.result.configs[0]).toMatchObject({
      url: `${hooks}t1`,
      token: 'tok-1',
      authentication: { scheme: 'Bearer', credentials: 'cred-1' },
    });
  });

  it('a token or credentials holding CR/LF are refused at registration (-32602), on the send (no run) and on create', async () => {
    const before = await incidentJobs();
    const onSend = await sendRaw(msg([{ text: 'crlf' }]), {
      returnImmediately: true,
      taskPushNotificationConfig: { url: `${hooks}x`, token: 'a\r\nX-Evil: 1' },
    });
    expect(onSend.body.error?.code).toBe(-32602);
    expect(await incidentJobs()).toBe(before);
    const task = (await alpha.sendMessage(sendRequest(userMessage([textPart('crlf create')]), { returnImmediately: true }))) as Task;
    const created = await call('CreateTaskPushNotificationConfig', {
      taskId: task.id,
      url: `${hooks}y`,
      authentication: { scheme: 'Bearer', credentials: 'c\nd' },
    });
    expect(created.body.error?.code).toBe(-32602);
    expect((await call('ListTaskPushNotificationConfigs', { taskId: task.id })).body.result.configs ?? []).toEqual([]);
  });
});
