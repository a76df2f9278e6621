import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Role, TaskState, type Message, type Part } from '@a2a-js/sdk';
import { A2aConfig } from '@bosun/config';
import type { A2aTaskRecord, RunResult } from '@bosun/contract';
import { Caller, TokenTable, requestCaller, requireCaller } from './auth.js';
import { incidentFrom, incidentIdFor } from './intake.js';
import { runModeOf } from './modes.js';
import { allowedPushUrl, headerProblem } from './push.js';
import { envelopeProblem } from './server.js';
import { approvalText, artifactsOf, stateOf, taskOf } from './view.js';

const text = (value: string): Part => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: 'text/plain' });
const data = (value: unknown): Part => ({
  content: { $case: 'data', value },
  metadata: undefined,
  filename: '',
  mediaType: 'application/json',
});
const message = (parts: Part[], messageId = 'm-1'): Message => ({
  messageId,
  contextId: '',
  taskId: '',
  role: Role.ROLE_USER,
  parts,
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});
const sha = (s: string) => createHash('sha256').update(s).digest('hex');

describe('tokens', () => {
  const table = new TokenTable(
    A2aConfig.parse({
      port: 1,
      tokens: [
        { sha256: sha('good'), tenant: 'a', operator: true },
        { sha256: sha('other'), tenant: 'b' },
      ],
    }),
  );

  it('resolves a known token to its tenant and rights; refuses a wrong one and a missing one', () => {
    expect(table.resolve('Bearer good')).toEqual(new Caller('a', true));
    expect(table.resolve('bearer other')).toMatchObject({ tenant: 'b', operator: false });
    expect(table.resolve('Bearer nope')).toBe('invalid');
    expect(table.resolve('Bearer ')).toBe('invalid');
    expect(table.resolve(undefined)).toBe('missing');
    expect(table.resolve('Basic Zm9vOmJhcg==')).toBe('missing');
  });

  it("keeps the client's address on the caller, from the request's socket, so a decision records it", () => {
    expect(table.resolve('Bearer good', '10.1.2.3')).toMatchObject({ tenant: 'a', operator: true, address: '10.1.2.3' });
    const req = { headers: { authorization: 'Bearer good' }, socket: { remoteAddress: '::ffff:10.9.8.7' } };
    let admitted = false;
    requireCaller(table)(req as never, {} as never, () => (admitted = true));
    expect(admitted).toBe(true);
    expect(requestCaller(req as never)).toMatchObject({ tenant: 'a', address: '::ffff:10.9.8.7' });
  });

  it('anonymous callers only when allowed, never operators, and never with a wrong token', () => {
    const open = new TokenTable(A2aConfig.parse({ port: 1, allowAnonymous: true }));
    expect(open.resolve(undefined)).toMatchObject({ tenant: 'anonymous', operator: false, isAuthenticated: false });
    expect(open.resolve('Bearer nope')).toBe('invalid');
  });
});

describe('a message → an incident', () => {
  it('text becomes the summary; the id comes from tenant and message id; the tenant is the caller’s', () => {
    const i = incidentFrom(message([text('pods restart')]), { tenant: 't1', maxBytes: 1000 });
    expect(i).toMatchObject({ id: incidentIdFor('t1', 'm-1'), source: 'a2a', reason: 'A2AMessage', summary: 'pods restart', tenant: 't1' });
    expect(incidentIdFor('t1', 'm-1')).not.toBe(incidentIdFor('t2', 'm-1'));
  });

  it('a DataPart gives the fields; a client-sent id or tenant is replaced', () => {
    const i = incidentFrom(message([data({ reason: 'OOMKilled', summary: 's', id: 'mine', tenant: 'other', labels: { service: 'x' } })]), {
      tenant: 't1',
      maxBytes: 1000,
    });
    expect(i).toMatchObject({ reason: 'OOMKilled', id: incidentIdFor('t1', 'm-1'), tenant: 't1', labels: { service: 'x' } });
  });

  it('refuses what is not an incident, naming it', () => {
    const opts = { tenant: 't', maxBytes: 150 };
    expect(() => incidentFrom(undefined, opts)).toThrow(/message: required/);
    expect(() => incidentFrom(message([]), opts)).toThrow(/at least one part/);
    expect(() => incidentFrom(message([text('x'.repeat(200))]), opts)).toThrow(/over the limit of 150 bytes/);
    expect(() => incidentFrom(message([text('  ')]), opts)).toThrow(/text is empty/);
    expect(() => incidentFrom(message([data([1])]), opts)).toThrow(/must hold an object/);
    expect(() => incidentFrom(message([data({ severity: 'huge' })]), opts)).toThrow(/severity/);
    const url: Part = { content: { $case: 'url', value: 'https://x' }, metadata: undefined, filename: '', mediaType: '' };
    expect(() => incidentFrom(message([url]), opts)).toThrow(/only text and data parts/);
  });
});

describe('run modes', () => {
  const config = A2aConfig.parse({ port: 1, runModes: { text: 'message', data: 'dynamic', messageReasons: ['HighLatency'] } });
  const inc = (reason: string) => incidentFrom(message([data({ reason, summary: '' })]), { tenant: 't', maxBytes: 1000 });
  it('by kind of request, and for dynamic by the incident reason', () => {
    expect(runModeOf(config, message([text('x')]), inc('X'))).toBe('message');
    expect(runModeOf(config, message([data({})]), inc('HighLatency'))).toBe('message');
    expect(runModeOf(config, message([data({})]), inc('OOMKilled'))).toBe('task');
    expect(runModeOf(A2aConfig.parse({ port: 1 }), message([text('x')]), inc('X'))).toBe('task');
  });
});

describe('the task of a run', () => {
  const record: A2aTaskRecord = {
    v: 1,
    tenant: 't',
    taskId: 'r1',
    runId: 'r1',
    incidentId: 'i1',
    contextId: 'c1',
    messageId: 'm-1',
    createdAt: new Date(0).toISOString(),
    history: [message([text('hi')]) as unknown as Record<string, unknown>],
  };
  const result = (status: RunResult['status']): RunResult => ({
    v: 1,
    runId: 'r1',
    incidentId: 'i1',
    status,
    answer: 'the answer',
    specialists: [
      { name: 'kubernetes', status: 'completed', output: {}, attempts: 1 },
      { name: 'database', status: 'stalled', output: {}, attempts: 1 },
    ],
    stalled: 1,
    startedAt: '',
    finishedAt: '',
  });

  it('maps the job state and the result status to A2A states', () => {
    expect(stateOf({ since: '', jobState: 'waiting' })).toBe(TaskState.TASK_STATE_SUBMITTED);
    expect(stateOf({ since: '', jobState: 'active' })).toBe(TaskState.TASK_STATE_WORKING);
    expect(stateOf({ since: '', jobState: 'waiting-children' })).toBe(TaskState.TASK_STATE_WORKING);
    const approval = { id: 'ap-1', agent: 'k', reason: 'r', createdAt: '', timeoutAt: '', calls: [] };
    expect(stateOf({ since: '', jobState: 'waiting-children', approval })).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(stateOf({ since: '', jobState: 'completed', result: result('partial') })).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(stateOf({ since: '', jobState: 'completed', result: result('cancelled') })).toBe(TaskState.TASK_STATE_CANCELED);
    expect(stateOf({ since: '', jobState: 'completed', result: result('failed') })).toBe(TaskState.TASK_STATE_FAILED);
    expect(stateOf({ since: '', jobState: 'failed' })).toBe(TaskState.TASK_STATE_FAILED);
    expect(stateOf({ since: '', jobState: 'missing' })).toBe(TaskState.TASK_STATE_FAILED);
  });

  it('a partial run says plainly which parts are INCOMPLETE, in its status message and its artifacts', () => {
    const task = taskOf(record, { since: '', jobState: 'completed', result: result('partial') });
    const said = task.status?.message?.parts[0]?.content;
    expect(said?.$case === 'text' && said.value).toContain('PARTIAL. INCOMPLETE parts: database (stalled)');
    const artifacts = artifactsOf(result('partial'));
    expect(artifacts.map((a) => a.metadata?.incomplete)).toEqual([['database (stalled)'], ['database (stalled)']]);
    expect(task.history).toHaveLength(2);
    expect(taskOf(record, { since: '', jobState: 'active' }, 0).history).toEqual([]);
  });

  it("an approval's input-required message: the timeout, the other specialists' findings, the earlier steps and the progress", () => {
    const approval = {
      id: 'ap-1',
      agent: 'kubernetes',
      reason: 'roll back',
      createdAt: '',
      timeoutAt: '2026-01-01T00:05:00.000Z',
      calls: [{ index: 0, tool: 'demo__rollback', args: { to: 'v41' }, needsApproval: true }],
      progress: '0 of 1',
      specialists: [
        { taskId: 't2', agent: 'database', status: 'completed' as const, finding: 'the pool\nis exhausted' },
        { taskId: 't3', agent: 'network', status: 'queued' as const },
      ],
      steps: [{ tool: 'demo__get_logs', args: { pod: 'p' }, result: 'x'.repeat(500), isError: true }],
    };
    const text = approvalText(approval);
    expect(text).toContain('waits for an operator until 2026-01-01T00:05:00.000Z');
    expect(text).toContain('Other specialists of the run:\n  database (completed): the pool is exhausted\n  network (queued)\n');
    expect(text).toContain(`Earlier steps of kubernetes:\n  demo__get_logs {"pod":"p"} -> error: ${'x'.repeat(159)}…\n`);
    expect(text).toContain('Approvals: 0 of 1.');
    const two = approvalText({ ...approval, required: 2, approvedBy: ['alice'], progress: '1 of 2' });
    expect(two).toContain('Needs 2 different people: 1 of 2 approved (alice).');
    expect(two).not.toContain('Approvals:');
  });
});

describe('the push allowlist', () => {
  const settings = { allowedUrls: ['https://hooks.example.com/a2a/'], timeoutMs: 1000 };
  it('accepts only http(s) URLs under an allowed one', () => {
    expect(allowedPushUrl(settings, 'https://hooks.example.com/a2a/task-1')).toBe(true);
    expect(allowedPushUrl(settings, 'https://hooks.example.com/other')).toBe(false);
    expect(allowedPushUrl(settings, 'https://hooks.example.com.evil.net/a2a/')).toBe(false);
    expect(allowedPushUrl(settings, 'http://169.254.169.254/latest')).toBe(false);
    expect(allowedPushUrl(settings, 'file:///etc/passwd')).toBe(false);
    expect(allowedPushUrl(settings, 'not a url')).toBe(false);
  });
});

describe('push header values', () => {
  it('refuses a token or credentials that would break a header, and an auth scheme that is not a token; accepts the rest', () => {
    expect(headerProblem({ token: 'ok-token', authentication: { scheme: 'Bearer', credentials: 'c' } })).toBeUndefined();
    expect(headerProblem({ token: '', authentication: undefined })).toBeUndefined();
    expect(headerProblem({ token: 'a\r\nX-Evil: 1', authentication: undefined })).toMatch(/^token: /);
    expect(headerProblem({ token: 't', authentication: { scheme: 'Bearer', credentials: 'c\nd' } })).toMatch(
      /^authentication.credentials: /,
    );
    expect(headerProblem({ token: 't', authentication: { scheme: 'Bea rer', credentials: 'c' } })).toMatch(/^authentication.scheme: /);
  });
});

describe('the JSON-RPC envelope', () => {
  it('names what makes a body not a request object (JSON-RPC 2.0 §4): those get -32600', () => {
    expect(envelopeProblem({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: {} })).toBeUndefined();
    expect(envelopeProblem({ jsonrpc: '2.0', id: null, method: 'GetTask' })).toBeUndefined();
    expect(envelopeProblem({ jsonrpc: '1.0', id: 1, method: 'GetTask' })).toMatch(/jsonrpc/);
    expect(envelopeProblem({ jsonrpc: '2.0', id: 1 })).toMatch(/method/);
    expect(envelopeProblem({ jsonrpc: '2.0', id: { bad: 1 }, method: 'GetTask' })).toMatch(/id/);
    expect(envelopeProblem([{ jsonrpc: '2.0', id: 1, method: 'GetTask' }])).toMatch(/batch/);
    expect(envelopeProblem('GetTask')).toMatch(/request object/);
  });
});
