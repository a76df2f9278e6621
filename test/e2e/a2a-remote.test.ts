import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchProcess, type ServiceProcess } from '@bosun/transport';
import { ROOT, callLog, startClusterTest, startService, waitUntil, type CallLog, type ClusterTest } from '../helpers/index.js';

// Remote A2A agents as specialists: a fixture agent built with the SDK's server
// (test/fixtures/a2a/agent.mjs, @a2a-js/sdk 1.3) does the work of specialists `remote` (an
// instance that streams) and `remote-hang` (one that is polled); a protocol 0.3 fixture
// (test/fixtures/a2a/agent-03.mjs, @a2a-js/sdk 0.3.14's A2AExpressApp) that of `remote03`
// (streams) and `remote03-hang` (polled). A
// normal completion; a remote failure and a remote question become INCOMPLETE parts; a remote
// that hangs is cancelled at the deadline (INCOMPLETE timeout); a specialist SIGKILLed while it
// follows a remote task is resumed elsewhere and the message is sent once.

const TOKEN = 'remote-agent-token-0001';

let t: ClusterTest;
const fixtures: ServiceProcess[] = [];
let sends: CallLog;
let fixtureDir: string;

/** The fixture's log lines (sends and cancels), read afresh. */
const logged = (event: 'send' | 'cancel' | 'subscribe' | 'list', fixture?: '0.3') =>
  sends
    .calls()
    .filter(
      (l) =>
        (l as unknown as { event: string }).event === event &&
        (fixture === undefined || (l as unknown as { fixture?: string }).fixture === fixture),
    ) as unknown as {
    messageId: string;
    taskId: string;
  }[];

const incident = (id: string, reason: string, remote: string, extra: Record<string, unknown> = {}) => ({
  id,
  source: 'a2a-remote-test',
  reason,
  summary: `remote ${remote}`,
  labels: { service: 'checkout' },
  payload: { remote, ...extra },
});

beforeAll(async () => {
  fixtureDir = mkdtempSync(join(tmpdir(), 'bosun-a2a-fixture-'));
  const fixtureLog = join(fixtureDir, 'sends.jsonl');
  // Two instances of the fixture: one whose card says it streams (followed with
  // SubscribeToTask), one that does not (polled). Both append to the same log.
  const start = async (name: string, streaming: boolean, script = 'agent.mjs') => {
    const p = launchProcess({
      name,
      script: join(ROOT, 'test/fixtures/a2a', script),
      env: { ...process.env, FIXTURE_PORT: '0', FIXTURE_LOG: fixtureLog, FIXTURE_TOKEN: TOKEN, FIXTURE_STREAMING: streaming ? '1' : '0' },
    });
    fixtures.push(p);
    return (JSON.parse(await p.waitForLine(/"fixture":"ready"/, 20_000)) as { port: number }).port;
  };
  const streamingPort = await start('a2a-fixture-streaming', true);
  const pollingPort = await start('a2a-fixture-polling', false);
  const streaming03Port = await start('a2a-fixture-03-streaming', true, 'agent-03.mjs');
  const polling03Port = await start('a2a-fixture-03-polling', false, 'agent-03.mjs');
  sends = callLog(fixtureLog);
  process.env.BOSUN_TEST_REMOTE_TOKEN = TOKEN;
  t = await startClusterTest('a2a-remote', (config) => {
    const schema = config.specialists.kubernetes.outputSchema;
    const remote = (deadlineMs: number, port: number) => ({
      description: 'A remote A2A agent',
      outputSchema: schema,
      deadlineMs,
      retries: 0,
      a2a: { url: `http://127.0.0.1:${port}`, token: '${BOSUN_TEST_REMOTE_TOKEN}', pollMs: 200 },
    });
    config.specialists.remote = remote(60_000, streamingPort);
    config.specialists['remote-hang'] = remote(3_000, pollingPort);
    config.coordinator.routes.RemoteCheck = ['remote'];
    config.coordinator.routes.RemoteHang = ['remote-hang'];
    config.specialists.remote03 = remote(60_000, streaming03Port);
    config.specialists['remote03-hang'] = remote(3_000, polling03Port);
    config.coordinator.routes.Remote03Check = ['remote03'];
    config.coordinator.routes.Remote03Hang = ['remote03-hang'];
    config.workers = { lockDurationMs: 3_000, stalledIntervalMs: 1_000, maxStalledCount: 2 };
  });
}, 120_000);

afterAll(async () => {
  await t?.close();
  await Promise.all(fixtures.map((f) => f.stop()));
  if (fixtureDir) rmSync(fixtureDir, { recursive: true, force: true });
});

describe('a remote A2A agent as a specialist', () => {
  it('a normal completion: the remote DataPart, valid against the output schema, is the output; one send', async () => {
    const { job } = await t.client.publish(incident('remote-ok', 'RemoteCheck', 'complete'));
    const result = await t.client.result(job, 60_000);
    expect(result.status).toBe('completed');
    expect(result.specialists[0]).toMatchObject({
      name: 'remote',
      status: 'completed',
      output: { summary: 'remote report on remote complete' },
    });
    const mine = logged('send').filter((s) => s.messageId.startsWith(result.runId));
    expect(mine).toHaveLength(1);
    // The remote's progress shows as agent.progress events of the specialist.
    const progress = t.client.events.forRun(result.runId).filter((e) => e.type === 'agent.progress' && e.agent === 'remote');
    expect(progress.map((e) => e.data.state)).toContain('TASK_STATE_COMPLETED');
    // Its agent streams: the worker followed the remote task with SubscribeToTask.
    expect(logged('subscribe').filter((x) => x.taskId === mine[0]!.taskId).length).toBeGreaterThan(0);
  }, 90_000);

  it("a remote failure is an INCOMPLETE failure with the remote's message as last words", async () => {
    const { job, runId } = await t.client.publish(incident('remote-fail', 'RemoteCheck', 'fail'));
    const result = await t.client.result(job, 60_000);
    expect(result.status).toBe('partial');
    expect(result.specialists[0]).toMatchObject({ name: 'remote', status: 'failed' });
    const dl = (await t.client.deadLetters(runId)).find((d) => d.kind === 'failure');
    expect(dl?.lastWords).toBe('the remote database is unreachable');
    expect(dl?.reason).toMatch(/TASK_STATE_FAILED/);
  }, 90_000);

  it('a remote question (input-required) is an INCOMPLETE part quoting it; Bosun invents no answer', async () => {
    const { job, runId } = await t.client.publish(incident('remote-ask', 'RemoteCheck', 'ask'));
    const result = await t.client.result(job, 60_000);
    expect(result.specialists[0]).toMatchObject({ name: 'remote', status: 'stalled' });
    const dl = (await t.client.deadLetters(runId)).find((d) => d.kind === 'stall');
    expect(dl?.reason).toContain('the remote A2A agent asks: "Which cluster does checkout run in?"');
    expect(JSON.stringify(result.specialists[0]!.output)).toContain('Which cluster does checkout run in?');
  }, 90_000);

  it('a remote that hangs: at the deadline the remote task is cancelled and the part is an INCOMPLETE timeout', async () => {
    const { job, runId } = await t.client.publish(incident('remote-hang', 'RemoteHang', 'hang'));
    const result = await t.client.result(job, 60_000);
    expect(result.specialists[0]).toMatchObject({ name: 'remote-hang', status: 'stalled' });
    const dl = (await t.client.deadLetters(runId)).find((d) => d.kind === 'timeout');
    expect(dl?.reason).toMatch(/deadline/);
    const sent = logged('send').find((s) => s.messageId.startsWith(runId))!;
    await waitUntil(() => logged('cancel').some((c) => c.taskId === sent.taskId), 10_000, 'the remote task was cancelled');
    // That agent does not stream: the worker polled it.
    expect(logged('subscribe').filter((x) => x.taskId === sent.taskId)).toEqual([]);
  }, 90_000);

  it('a specialist SIGKILLed while it follows a remote task is resumed elsewhere, and the message is sent once', async () => {
    const { job, runId } = await t.client.publish(incident('remote-kill', 'RemoteCheck', 'slow', { remoteDelayMs: 8_000 }));
    await waitUntil(() => logged('send').some((s) => s.messageId.startsWith(runId)), 30_000, 'the remote task was sent');
    // The remote task id is saved right after the send: wait for the checkpoint to hold it.
    const ckKey = `${t.ctx.prefix}:ckpt:remote:${runId}-d0-remote`;
    await waitUntil(async () => ((await t.ctx.redis.get(ckKey)) ?? '').includes('remoteTaskId'), 10_000, 'the remote task id is saved');
    t.cluster.get('specialist-1').kill('SIGKILL');
    await t.cluster.add(startService('specialist', t.env, { name: 'specialist-2' })).ready();
    const result = await t.client.result(job, 60_000);
    expect(result.specialists[0]).toMatchObject({ name: 'remote', status: 'completed' });
    expect(logged('send').filter((s) => s.messageId.startsWith(runId))).toHaveLength(1);
  }, 120_000);
});

describe('a remote A2A agent that speaks protocol 0.3 (@a2a-js/sdk 0.3.14 A2AExpressApp) as a specialist', () => {
  it('a completion: its card is read as a 0.3 card, the task is sent once, followed on its stream, and its DataPart is the output', async () => {
    const { job } = await t.client.publish(incident('remote03-ok', 'Remote03Check', 'complete'));
    const result = await t.client.result(job, 60_000);
    expect(result.status).toBe('completed');
    expect(result.specialists[0]).toMatchObject({ name: 'remote03', status: 'completed', output: { evidence: ['fixture-0.3'] } });
    const mine = logged('send', '0.3').filter((s) => s.messageId.startsWith(result.runId));
    expect(mine).toHaveLength(1);
    expect(logged('subscribe', '0.3').filter((x) => x.taskId === mine[0]!.taskId).length).toBeGreaterThan(0);
  }, 90_000);

  it('a failure and a question are INCOMPLETE parts with the remote’s words', async () => {
    const failed = await t.client.publish(incident('remote03-fail', 'Remote03Check', 'fail'));
    const asked = await t.client.publish(incident('remote03-ask', 'Remote03Check', 'ask'));
    const [f, a] = await Promise.all([t.client.result(failed.job, 60_000), t.client.result(asked.job, 60_000)]);
    expect(f.specialists[0]).toMatchObject({ name: 'remote03', status: 'failed' });
    expect((await t.client.deadLetters(failed.runId)).find((d) => d.kind === 'failure')?.lastWords).toBe(
      'the remote database is unreachable',
    );
    expect(a.specialists[0]).toMatchObject({ name: 'remote03', status: 'stalled' });
    expect((await t.client.deadLetters(asked.runId)).find((d) => d.kind === 'stall')?.reason).toContain(
      'Which cluster does checkout run in?',
    );
  }, 90_000);

  it('one that hangs, polled: at the deadline its task is cancelled (tasks/cancel) and the part is an INCOMPLETE timeout', async () => {
    const { job, runId } = await t.client.publish(incident('remote03-hang', 'Remote03Hang', 'hang'));
    const result = await t.client.result(job, 60_000);
    expect(result.specialists[0]).toMatchObject({ name: 'remote03-hang', status: 'stalled' });
    expect((await t.client.deadLetters(runId)).find((d) => d.kind === 'timeout')?.reason).toMatch(/deadline/);
    const sent = logged('send', '0.3').find((s) => s.messageId.startsWith(runId))!;
    await waitUntil(() => logged('cancel', '0.3').some((c) => c.taskId === sent.taskId), 10_000, 'the remote task was cancelled');
    expect(logged('subscribe', '0.3').filter((x) => x.taskId === sent.taskId)).toEqual([]);
  }, 90_000);
});
