import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TaskState, type StreamResponse, type Task } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import {
  a2aClient,
  collect,
  dataPart,
  freePort,
  replayRun,
  sendRequest,
  startClusterTest,
  startService,
  tokenEntry,
  userMessage,
  waitUntil,
  type ClusterTest,
} from '../helpers/index.js';

// Two A2A server replicas in front of one cluster: a task created on one is read, resubscribed
// to and cancelled on the other; a client that drops its stream mid-run resubscribes (on the
// other replica) and, replayed from JetStream, misses no update.

const TOKEN = 'replica-token-0001';

let t: ClusterTest;
let one: Client;
let two: Client;

const slow = (ms: number) => ({
  source: 'a2a-test',
  reason: 'PodCrashLooping',
  summary: 'slow run',
  labels: { service: 'checkout' },
  payload: { fake: { slowMs: { kubernetes: ms } } },
});
const stateOf = (r: StreamResponse) => (r.payload?.$case === 'statusUpdate' ? r.payload.value.status?.state : undefined);
const seqOf = (r: StreamResponse) =>
  r.payload?.$case === 'statusUpdate' ? (r.payload.value.metadata?.seq as number | undefined) : undefined;

beforeAll(async () => {
  const [p1, p2] = [await freePort(), await freePort()];
  t = await startClusterTest('a2a-replicas', (config) => {
    config.a2a = { port: p1, tokens: [tokenEntry(TOKEN, 'team')], blockingWaitMs: 60_000 };
  });
  const a = t.cluster.add(startService('a2a', t.env, { name: 'a2a-1', args: ['--port', String(p1)] }));
  const b = t.cluster.add(startService('a2a', t.env, { name: 'a2a-2', args: ['--port', String(p2)] }));
  await Promise.all([a.ready(), b.ready()]);
  one = await a2aClient(`http://127.0.0.1:${p1}`, TOKEN);
  two = await a2aClient(`http://127.0.0.1:${p2}`, TOKEN, 'HTTP+JSON');
}, 120_000);

afterAll(async () => {
  await t?.close();
});

describe('two replicas', () => {
  it('a client drops its stream mid-run on one replica, resubscribes on the other, and misses no update', async () => {
    const drop = new AbortController();
    const first: StreamResponse[] = [];
    const stream = one.sendMessageStream(sendRequest(userMessage([dataPart(slow(3_000))])), { signal: drop.signal });
    await expect(
      (async () => {
        for await (const r of stream) {
          first.push(r);
          if (stateOf(r) === TaskState.TASK_STATE_WORKING) drop.abort();
        }
      })(),
    ).rejects.toThrow();
    const taskId = first[0]!.payload?.$case === 'task' ? first[0]!.payload.value.id : '';
    expect(taskId).toMatch(/^r[0-9a-f]{20}$/);

    const again = await collect(two.resubscribeTask({ tenant: '', id: taskId }));
    expect(again[0]!.payload?.$case).toBe('task');
    const states = again.map(stateOf).filter((s) => s !== undefined);
    expect(states[states.length - 1]).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(again.filter((r) => r.payload?.$case === 'artifactUpdate')).toHaveLength(2);
    // Replayed from the stream's start: the updates before the drop are there again, in order,
    // and every agent event of the run has its update.
    const seqs = again.map(seqOf).filter((s): s is number => s !== undefined);
    expect(seqs[0]).toBe(1);
    expect([...seqs].sort((a, b) => a - b)).toEqual(seqs);
    const { types, seqs: all } = await replayRun(t.ctx.nats, t.ctx.prefix, taskId);
    const agentSeqs = all.filter((_, i) => ['agent.delegated', 'agent.started', 'agent.completed'].includes(types[i]!));
    expect(agentSeqs.length).toBeGreaterThanOrEqual(3);
    for (const s of agentSeqs) expect(seqs).toContain(s);
  }, 120_000);

  it('a task created on one replica is read and cancelled on the other', async () => {
    const task = (await one.sendMessage(sendRequest(userMessage([dataPart(slow(20_000))]), { returnImmediately: true }))) as Task;
    await waitUntil(
      async () => (await two.getTask({ tenant: '', id: task.id })).status?.state === TaskState.TASK_STATE_WORKING,
      30_000,
      'the task is working, as the other replica reads it',
    );
    const cancelled = await two.cancelTask({ tenant: '', id: task.id, metadata: undefined });
    expect(cancelled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    const read = await one.getTask({ tenant: '', id: task.id });
    expect(read.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    const listed = await two.listTasks({
      tenant: '',
      contextId: task.contextId,
      status: 0,
      pageToken: '',
      statusTimestampAfter: undefined,
    });
    expect(listed.tasks.map((x) => x.id)).toEqual([task.id]);
  }, 120_000);
});
