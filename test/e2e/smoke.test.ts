import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TaskState, type Task } from '@a2a-js/sdk';
import { Job } from 'bullmq';
import { RunResult } from '@bosun/contract';
import {
  a2aClient,
  dataPart,
  freePort,
  runCli,
  sendRequest,
  startClusterTest,
  tokenEntry,
  userMessage,
  type ClusterTest,
} from '../helpers/index.js';

// One cluster with every kind of process Bosun ships — tool gateway (with the demo MCP server),
// coordinator, a specialist process serving task-loop and CodeAct specialists, the alert
// intake, the A2A server and the console — and one incident through each door: the CLI, an
// Alertmanager webhook, an A2A client, and the console's API. The smoke set of the Node.js 24
// pass of .ci/run (`npm run test:smoke`, docs/testing.md) starts with this file; the behaviour
// of each face is tested in depth elsewhere.

const INTAKE_TOKEN = 'smoke-intake-token';
const A2A_TOKEN = 'smoke-a2a-token-0123456789';
const CONSOLE_TOKEN = 'smoke-console-token-0123456789';

let t: ClusterTest;
const base = { intake: '', a2a: '', console: '' };

beforeAll(async () => {
  const [intakePort, a2aPort, consolePort] = await Promise.all([freePort(), freePort(), freePort()]);
  t = await startClusterTest(
    'smoke',
    (config) => {
      config.intake = {
        port: intakePort,
        host: '127.0.0.1',
        sources: { alertmanager: { format: 'alertmanager', auth: { bearer: INTAKE_TOKEN }, per: 'alert' } },
      };
      config.a2a = { port: a2aPort, tokens: [tokenEntry(A2A_TOKEN, 'smoke', true)] };
    },
    // The faces need nothing of the others to start: all six start at once.
    {
      more: [
        { kind: 'intake' },
        { kind: 'a2a' },
        { kind: 'console', env: { BOSUN_CONSOLE_TOKEN: CONSOLE_TOKEN }, args: ['--port', String(consolePort)] },
      ],
    },
  );
  base.intake = `http://127.0.0.1:${intakePort}`;
  base.a2a = `http://127.0.0.1:${a2aPort}`;
  base.console = `http://127.0.0.1:${consolePort}`;
});

afterAll(async () => {
  // SIGTERM drains: every process exits 0.
  const statuses = await Promise.all(t?.cluster.processes.map(async (p) => [p.name, (await p.stop()).code] as const) ?? []);
  await t?.close();
  expect(statuses.filter(([, code]) => code !== 0)).toEqual([]);
});

/** The run result of incident `id`, once its job has finished. */
async function resultOf(id: string): Promise<RunResult> {
  const job = await Job.fromId(t.client.incidents, id);
  expect(job, `incident job ${id}`).toBeDefined();
  return t.client.result(job!, 60_000);
}

describe('every process type, one incident through each door', () => {
  it('the CLI publishes an incident; coordinator, a task-loop specialist and the gateway answer it', async () => {
    const incident = { id: 'smoke-cli', source: 'smoke', reason: 'PodCrashLooping', summary: 'x', labels: { service: 'checkout' } };
    const pub = await runCli(t.env, ['publish', '-'], JSON.stringify(incident));
    expect(pub.code, pub.stderr).toBe(0);
    const result = await resultOf('smoke-cli');
    expect(result).toMatchObject({ runId: pub.stdout.trim(), status: 'completed' });
    expect(result.specialists).toEqual([expect.objectContaining({ name: 'kubernetes', status: 'completed' })]);
  });

  it('a CodeAct specialist answers with one script', async () => {
    const { job, runId } = await t.client.publish({
      id: 'smoke-codeact',
      source: 'smoke',
      reason: 'DiskPressure',
      summary: 'x',
      labels: { service: 'checkout' },
    });
    const result = await t.client.result(job, 60_000);
    expect(result.specialists).toEqual([expect.objectContaining({ name: 'triage', status: 'completed' })]);
    const events = await t.client.events.complete(runId);
    expect(events.filter((e) => e.type === 'codeact.result')).toHaveLength(1);
  });

  it('the intake turns an Alertmanager alert into a run', async () => {
    const alert = {
      status: 'firing',
      labels: { alertname: 'PodCrashLooping', service: 'checkout', severity: 'critical' },
      annotations: { summary: 'checkout crash-looping' },
      startsAt: '2026-11-30T21:00:00Z',
      fingerprint: 'a0b1c2d3e4f5a6b7',
    };
    const res = await fetch(`${base.intake}/alerts/alertmanager`, {
      method: 'POST',
      headers: { authorization: `Bearer ${INTAKE_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ version: '4', groupKey: '{}:{smoke}', status: 'firing', receiver: 'bosun', alerts: [alert] }),
    });
    expect(res.status, await res.clone().text()).toBe(202);
    const answer = (await res.json()) as { accepted: { incidentId: string; runId: string }[] };
    expect(answer.accepted).toHaveLength(1);
    const result = await resultOf(answer.accepted[0]!.incidentId);
    expect(result).toMatchObject({ runId: answer.accepted[0]!.runId, status: 'completed' });
  });

  it('the A2A server runs an incident for an A2A client', async () => {
    const client = await a2aClient(base.a2a, A2A_TOKEN);
    const incident = { source: 'smoke', reason: 'PodCrashLooping', summary: 'a2a', labels: { service: 'checkout' } };
    const task = (await client.sendMessage(sendRequest(userMessage([dataPart(incident)])))) as Task;
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const result = RunResult.parse(task.artifacts.find((a) => a.artifactId === 'run-result')!.parts[0]!.content!.value);
    expect(result).toMatchObject({ runId: task.id, status: 'completed' });
  });

  it('the console logs an operator in and lists the runs', async () => {
    const login = await fetch(`${base.console}/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: CONSOLE_TOKEN }).toString(),
    });
    expect(login.status).toBe(303);
    const cookie = login.headers.get('set-cookie')?.split(';')[0] ?? '';
    expect(cookie).not.toBe('');
    const runs = await fetch(`${base.console}/api/runs`, { headers: { cookie } });
    expect(runs.status).toBe(200);
    const listed = ((await runs.json()) as { incidentId: string }[]).map((r) => r.incidentId);
    expect(listed).toEqual(expect.arrayContaining(['smoke-cli', 'smoke-codeact']));
    expect((await fetch(`${base.console}/api/runs`)).status).toBe(401);
  });
});
