import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Task } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import {
  a2aClient,
  dataPart,
  freePort,
  sendRequest,
  startClusterTest,
  startService,
  tokenEntry,
  userMessage,
  waitUntil,
  type ClusterTest,
} from '../helpers/index.js';

// Push notifications: a task's updates are POSTed to a URL its client registered (with
// CreateTaskPushNotificationConfig, or on the send), only when the URL is on the config's
// allowlist, with the registration's token and its authentication; a URL off the list is
// refused (and a send that carries one starts no run).

const TOKEN = 'push-token-0001';

let t: ClusterTest;
let client: Client;
let receiver: Server;
let hook: string;
const received: { token: string | undefined; authorization: string | undefined; url: string; body: string }[] = [];

beforeAll(async () => {
  const [port, hookPort] = [await freePort(), await freePort()];
  hook = `http://127.0.0.1:${hookPort}/hook`;
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (b: Buffer) => (body += b.toString()));
    req.on('end', () => {
      received.push({
        token: req.headers['x-a2a-notification-token'] as string | undefined,
        authorization: req.headers.authorization,
        url: req.url ?? '',
        body,
      });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(hookPort, '127.0.0.1', r));
  t = await startClusterTest('a2a-push', (config) => {
    config.a2a = { port, tokens: [tokenEntry(TOKEN, 'team')], pushNotifications: { allowedUrls: [`http://127.0.0.1:${hookPort}/hook`] } };
  });
  await t.cluster.add(startService('a2a', t.env)).ready();
  client = await a2aClient(`http://127.0.0.1:${port}`, TOKEN);
}, 120_000);

afterAll(async () => {
  await t?.close();
  await new Promise((r) => receiver?.close(r));
});

const slow = {
  source: 'a2a-test',
  reason: 'PodCrashLooping',
  summary: 'push',
  labels: { service: 'checkout' },
  payload: { fake: { slowMs: { kubernetes: 1_500 } } },
};

describe('push notifications', () => {
  it('the card offers them; a registered, allowed URL receives the task until it completes, with the token', async () => {
    expect((await client.getAgentCard()).capabilities?.pushNotifications).toBe(true);
    const task = (await client.sendMessage(sendRequest(userMessage([dataPart(slow)]), { returnImmediately: true }))) as Task;
    const config = await client.createTaskPushNotificationConfig({
      tenant: '',
      id: '',
      taskId: task.id,
      url: `${hook}/a`,
      token: 'hook-secret',
      authentication: undefined,
    });
    expect(config.id).not.toBe('');
    const listed = await client.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 10, pageToken: '' });
    expect(listed.configs.map((c) => c.url)).toEqual([`${hook}/a`]);
    await waitUntil(
      () => received.some((r) => r.body.includes(task.id) && r.body.includes('TASK_STATE_COMPLETED')),
      60_000,
      'the completed task was pushed',
    );
    expect(received.filter((r) => r.url === '/hook/a').every((r) => r.token === 'hook-secret')).toBe(true);
    // One replica, one push per event: no event was pushed twice.
    const bodies = received.filter((r) => r.url === '/hook/a').map((r) => r.body);
    expect(new Set(bodies).size).toBe(bodies.length);
  }, 90_000);

  it('a registration made on the send, with authentication: every push from the run’s start carries Authorization and the token', async () => {
    const request = sendRequest(userMessage([dataPart(slow)]), { returnImmediately: true });
    request.configuration!.taskPushNotificationConfig = {
      tenant: '',
      id: '',
      taskId: '',
      url: `${hook}/on-send`,
      token: 'send-secret',
      authentication: { scheme: 'Bearer', credentials: 'receiver-credential' },
    };
    const task = (await client.sendMessage(request)) as Task;
    await waitUntil(
      () => received.some((r) => r.url === '/hook/on-send' && r.body.includes('TASK_STATE_COMPLETED')),
      60_000,
      'the completed task was pushed to the URL registered on the send',
    );
    const mine = received.filter((r) => r.url === '/hook/on-send');
    expect(mine.every((r) => r.body.includes(task.id))).toBe(true);
    // Registered before the run was published: the push of its start (a working task) is there too.
    expect(mine.some((r) => r.body.includes('TASK_STATE_WORKING') || r.body.includes('TASK_STATE_SUBMITTED'))).toBe(true);
    expect(mine.every((r) => r.authorization === 'Bearer receiver-credential' && r.token === 'send-secret')).toBe(true);
  }, 90_000);

  it('a URL off the allowlist is refused, and a send that carries one starts no run', async () => {
    const task = (await client.sendMessage(
      sendRequest(userMessage([dataPart({ ...slow, payload: {} })]), { returnImmediately: true }),
    )) as Task;
    for (const url of ['http://169.254.169.254/latest/meta-data', 'http://127.0.0.1:1/hook', 'file:///etc/passwd']) {
      await expect(
        client.createTaskPushNotificationConfig({ tenant: '', id: '', taskId: task.id, url, token: '', authentication: undefined }),
      ).rejects.toThrow(/allowlist/);
    }
    const total = async () =>
      Object.values(await t.client.incidents.getJobCounts('wait', 'active', 'completed', 'failed', 'waiting-children', 'delayed')).reduce(
        (a, b) => a + b,
        0,
      );
    const before = await total();
    const request = sendRequest(userMessage([dataPart(slow)]));
    request.configuration!.taskPushNotificationConfig = {
      tenant: '',
      id: '',
      taskId: '',
      url: 'http://10.0.0.1/x',
      token: '',
      authentication: undefined,
    };
    await expect(client.sendMessage(request)).rejects.toThrow(/allowlist/);
    expect(await total()).toBe(before);
  }, 90_000);
});
