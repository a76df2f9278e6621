import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchProcess, type ServiceProcess } from '@bosun/transport';
import { ROOT, callLog, startClusterTest, waitUntil, type CallLog, type ClusterTest } from '../helpers/index.js';

// A specialist SIGKILLed inside the send to a remote A2A agent: the agent has the task, the
// worker never saved its id. The fixtures (test/fixtures/a2a/agent.mjs, 1.0 with ListTasks, and
// agent-03.mjs, 0.3 without) hold their answer to the send while the test kills the real
// specialist process, and count every task they are sent. The worker that resumes the task
// must never send it a second time: it finds the task by its context on the 1.0 agent and
// follows it; on the 0.3 agent, which cannot say, it declares the delegation in doubt.

const TOKEN = 'remote-agent-token-0002';

let t: ClusterTest;
const fixtures: ServiceProcess[] = [];
let log: CallLog;
let dir: string;
let specialists = 1;

type Line = { event: string; messageId?: string; taskId?: string; contextId?: string; fixture?: string };
const lines = (event: string) => (log.calls() as unknown as Line[]).filter((l) => l.event === event);

const incident = (id: string, reason: string) => ({
  id,
  source: 'a2a-chaos-test',
  reason,
  summary: `remote send ${id}`,
  labels: { service: 'checkout' },
  payload: { remote: 'hold', remoteDelayMs: 1_500, remoteHoldMs: 8_000 },
});

/** Waits for the fixture to hold the answer to this run's send, then SIGKILLs the specialist and starts another. */
async function killInsideTheSend(runId: string): Promise<void> {
  await waitUntil(() => lines('holding').some((l) => l.messageId?.startsWith(runId)), 30_000, `the send of ${runId} is held`);
  t.cluster.host('specialist').kill('SIGKILL');
  specialists += 1;
  await t.cluster.replace('specialist', { name: `specialist-${specialists}`, env: { LOG_LEVEL: 'info' } }).ready();
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'bosun-a2a-send-'));
  const file = join(dir, 'sends.jsonl');
  const start = async (name: string, script: string) => {
    const p = launchProcess({
      name,
      script: join(ROOT, 'test/fixtures/a2a', script),
      env: { ...process.env, FIXTURE_PORT: '0', FIXTURE_LOG: file, FIXTURE_TOKEN: TOKEN, FIXTURE_STREAMING: '0' },
    });
    fixtures.push(p);
    return (JSON.parse(await p.waitForLine(/"fixture":"ready"/, 20_000)) as { port: number }).port;
  };
  const [v1Port, v03Port] = [await start('a2a-fixture-1.0', 'agent.mjs'), await start('a2a-fixture-0.3', 'agent-03.mjs')];
  log = callLog(file);
  process.env.BOSUN_TEST_REMOTE_TOKEN = TOKEN;
  t = await startClusterTest('a2a-remote-send', (config) => {
    const remote = (port: number) => ({
      description: 'A remote A2A agent',
      outputSchema: config.specialists.kubernetes.outputSchema,
      deadlineMs: 60_000,
      retries: 0,
      a2a: { url: `http://127.0.0.1:${port}`, token: '${BOSUN_TEST_REMOTE_TOKEN}', pollMs: 200 },
    });
    config.specialists.remote = remote(v1Port);
    config.specialists.remote03 = remote(v03Port);
    config.coordinator.routes.RemoteCheck = ['remote'];
    config.coordinator.routes.Remote03Check = ['remote03'];
    config.workers = { lockDurationMs: 3_000, stalledIntervalMs: 1_000, maxStalledCount: 2 };
  });
}, 120_000);

afterAll(async () => {
  await t?.close();
  await Promise.all(fixtures.map((f) => f.stop()));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('a specialist killed inside the send to a remote A2A agent', () => {
  it('1.0 agent: the resumed worker lists the send’s context, finds the task, follows it to completion, and the agent got one task', async () => {
    const { job, runId } = await t.client.publish(incident('send-kill-v1', 'RemoteCheck'));
    await killInsideTheSend(runId);
    const result = await t.client.result(job, 90_000);
    expect(result.status).toBe('completed');
    expect(result.specialists[0]).toMatchObject({
      name: 'remote',
      status: 'completed',
      output: { summary: `remote report on remote send send-kill-v1` },
    });
    const sent = lines('send').filter((l) => l.messageId?.startsWith(runId));
    expect(sent, 'tasks the agent was sent').toHaveLength(1);
    // Looked up by the send's context: the Bosun task id, this delegation's alone.
    expect(lines('list').map((l) => l.contextId)).toContain(sent[0]!.messageId);
    expect(sent[0]!.contextId).toBe(sent[0]!.messageId);
  }, 150_000);

  it('0.3 agent (no ListTasks): the delegation is declared in doubt, never sent again; the run ends partial naming it', async () => {
    const { job, runId } = await t.client.publish(incident('send-kill-v03', 'Remote03Check'));
    await killInsideTheSend(runId);
    const result = await t.client.result(job, 90_000);
    expect(result.status).toBe('partial');
    expect(result.specialists[0]).toMatchObject({ name: 'remote03', status: 'failed' });
    const taskId = `${runId}-d0-remote03`;
    expect(result.inDoubt?.calls).toEqual([expect.objectContaining({ key: taskId, agent: 'remote03' })]);
    expect(result.answer).toContain('IN DOUBT');
    const dl = (await t.client.deadLetters(runId)).find((d) => d.kind === 'in-doubt');
    expect(dl?.reason).toMatch(/cannot say/);
    expect(dl?.input).toMatchObject({ key: taskId, args: { messageId: taskId } });
    expect(
      lines('send').filter((l) => l.messageId?.startsWith(runId)),
      'tasks the agent was sent',
    ).toHaveLength(1);
  }, 150_000);
});
