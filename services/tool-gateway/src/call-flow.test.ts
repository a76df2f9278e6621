import { describe, expect, it } from 'vitest';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { toolCallDigest, type CatalogTool, type ToolCallJob, type ToolCallResult } from '@bosun/contract';
import { createLogger, parseClusterConfig } from '@bosun/config';
import type { Approval } from '@bosun/transport';

import { LEASE_POLL_MS, ToolCallFlow, type CallAnswer } from './call-flow.js';
import { CallNotSentError, type McpCallOutcome } from './mcp.js';
import type { ToolRecords } from './ports.js';
import {
  FakeMcpServers,
  JournalEventSink,
  ManualClock,
  MemoryApprovals,
  MemoryAuditLog,
  MemoryDeadLetters,
  MemoryToolRecords,
  settle,
  type Faults,
  type Journal,
} from './testing/memory.js';

// The gateway's call flow with every port in memory: records (by the rules of the Lua scripts),
// approvals, audit, MCP servers, dead letters, events and the clock. Each port notes its effects
// in one journal, so the order the code's comments promise is asserted, not assumed. A gateway
// that "crashes" is a flow that never goes on: its server never answers and its clock (its lease
// renewals) never moves.

const REPORT = { type: 'object', required: ['summary'], properties: { summary: { type: 'string' } } };
const LEASE_MS = 400;

const config = parseClusterConfig(
  {
    coordinator: { routes: {}, defaultRoute: ['ops'] },
    specialists: { ops: { description: 'ops', tools: ['demo__*'], outputSchema: REPORT, mode: 'read-write' } },
    mcpServers: { demo: { transport: 'stdio', command: 'node', args: ['never-started.js'], tools: { scale: 'ask', drop_db: 'off' } } },
    gateway: { callTimeoutMs: 1_000 },
  },
  { file: 'unit.json', env: {} },
);

function tool(remoteName: string, readOnlyHint: boolean): CatalogTool {
  return {
    name: `demo__${remoteName}`,
    server: 'demo',
    remoteName,
    description: '',
    inputSchema: { type: 'object' },
    annotations: { readOnlyHint },
  };
}

/** One cluster's ports in memory, shared by every gateway (flow) made from it. */
function world() {
  const journal: Journal = [];
  const faults: Faults = new Set();
  const clock = new ManualClock();
  const records = new MemoryToolRecords({ clock, journal, faults, leaseMs: LEASE_MS });
  const approvals = new MemoryApprovals(journal);
  const audit = new MemoryAuditLog({ journal, faults });
  const servers = new FakeMcpServers(journal, [
    tool('get_pods', true),
    tool('restart_pod', false),
    tool('scale', false),
    tool('drop_db', false),
  ]);
  const deadLetters = new MemoryDeadLetters({ journal, faults });
  const events = new JournalEventSink(journal);
  const log = createLogger({ service: 'call-flow-test', level: 'silent' });
  /** A gateway over these ports; `clock` its own (a crashed gateway's never moves), `records` a view of the shared ones. */
  const gateway = (own: { clock?: ManualClock; records?: ToolRecords } = {}) =>
    new ToolCallFlow({
      records: own.records ?? records,
      approvals,
      audit,
      servers,
      events,
      deadLetters,
      config,
      prefix: 'unit',
      log,
      clock: own.clock ?? clock,
      leaseMs: LEASE_MS,
    });
  const eventsOf = (key: string) => events.sink.events.filter((e) => e.data.key === key).map((e) => e.type);
  const auditOf = (key: string) => audit.entries.filter((e) => e.key === key).map((e) => e.status);
  return { journal, faults, clock, records, approvals, audit, servers, deadLetters, events, gateway, eventsOf, auditOf };
}

function call(key: string, remoteName: string, extra: Partial<ToolCallJob> = {}): ToolCallJob {
  return { v: 1, key, runId: 'r-unit', incidentId: 'inc-unit', agent: 'ops', tool: `demo__${remoteName}`, args: { pod: 'p1' }, ...extra };
}

/** A server answer the test gives when it wants to: `answer` settles the call. */
function held(): { promise: Promise<McpCallOutcome>; answer(outcome?: McpCallOutcome): void; fail(err: unknown): void } {
  let answer!: (o: McpCallOutcome) => void;
  let fail!: (err: unknown) => void;
  const promise = new Promise<McpCallOutcome>((resolve, reject) => {
    answer = resolve;
    fail = reject;
  });
  return { promise, answer: (o = { isError: false, text: 'held ok' }) => answer(o), fail };
}

/** Starts an execute and notes when it answers. */
function started(flow: ToolCallFlow, c: ToolCallJob): { answer: Promise<CallAnswer>; done(): boolean } {
  let finished = false;
  const answer = flow.execute(c).finally(() => (finished = true));
  return { answer, done: () => finished };
}

/** The journal from `from` on, without lease renewals (they come whenever the clock moves). */
const since = (journal: Journal, from: number) => journal.slice(from).filter((j) => j !== 'records.renewLease');

describe('exactly once', () => {
  it('answers a second call under the same key from its record: the server is called once, nothing is announced or audited again', async () => {
    const w = world();
    const first = await w.gateway().execute(call('k-once', 'restart_pod'));
    expect(first.result).toMatchObject({ status: 'ok', text: 'restart_pod ok' });
    const mark = w.journal.length;
    const again = await w.gateway().execute(call('k-once', 'restart_pod'));
    expect(again.result).toEqual(first.result);
    expect(w.servers.sent).toEqual(['demo__restart_pod']);
    expect(since(w.journal, mark)).toEqual(['records.claim']);
    expect(w.auditOf('k-once')).toEqual(['ok']);
  });

  it('waits for a duplicate running under a live lease (renewed while it runs) and answers with its outcome: sent once, not in doubt', async () => {
    const w = world();
    const slow = held();
    w.servers.handlers.set('demo__restart_pod', () => slow.promise);
    const a = started(w.gateway(), call('k-dup', 'restart_pod'));
    await settle();
    const b = started(w.gateway(), call('k-dup', 'restart_pod'));
    // Three leases pass while A renews: B keeps waiting, never declares the call in doubt.
    for (let t = 0; t < 3 * LEASE_MS; t += LEASE_POLL_MS) await w.clock.advance(LEASE_POLL_MS);
    expect(b.done()).toBe(false);
    expect(w.journal).toContain('records.renewLease');
    expect(w.journal).not.toContain('records.markInDoubt');
    slow.answer({ isError: false, text: 'restarted once' });
    await w.clock.advance(LEASE_POLL_MS);
    expect((await b.answer).result).toMatchObject({ status: 'ok', text: 'restarted once' });
    expect((await a.answer).result).toMatchObject({ status: 'ok', text: 'restarted once' });
    expect(w.servers.sent).toEqual(['demo__restart_pod']);
    expect(w.eventsOf('k-dup')).not.toContain('tool.in_doubt');
  });

  it('answers a recorded call from its record before the policy refuses it (the record is read first)', async () => {
    const w = world();
    const recorded: ToolCallResult = {
      v: 1,
      key: 'k-off',
      tool: 'demo__drop_db',
      status: 'ok',
      isError: false,
      text: 'dropped before',
      durationMs: 3,
    };
    w.records.records.set('k-off', { state: 'done', result: recorded, digest: toolCallDigest('k-off', 'demo__drop_db', { pod: 'p1' }) });
    const answer = await w.gateway().execute(call('k-off', 'drop_db'));
    expect(answer).toMatchObject({ result: recorded, decision: 'recorded' });
    expect(w.servers.sent).toEqual([]);
    expect(w.audit.entries).toEqual([]);
  });

  it('does not record a refusal: the same key runs later, under an approval that covers it', async () => {
    const w = world();
    const refused = await w.gateway().execute(call('k-ask', 'scale'));
    expect(refused.result).toMatchObject({ code: 'needs_approval' });
    expect(w.records.records.has('k-ask')).toBe(false);
    expect(w.auditOf('k-ask')).toEqual(['refused']);
    w.approvals.approvals.set('ap-1', approvalOf('ap-1', 'k-ask'));
    const approved = await w.gateway().execute(call('k-ask', 'scale', { approvalId: 'ap-1' }));
    expect(approved.result).toMatchObject({ status: 'ok', text: 'scale ok' });
    expect(w.audit.entries.at(-1)).toMatchObject({ status: 'ok', approvalId: 'ap-1', approver: 'alice' });
    expect(w.servers.sent).toEqual(['demo__scale']);
  });
});

function approvalOf(id: string, key: string): Approval {
  return {
    id,
    status: 'approved',
    runId: 'r-unit',
    incidentId: 'inc-unit',
    agent: 'ops',
    taskId: 't-1',
    calls: [{ index: 0, tool: 'demo__scale', args: { pod: 'p1' }, needsApproval: true, key }],
    reason: 'scale it',
    createdAt: '2026-03-01T10:00:00.000Z',
    timeoutAt: '2026-03-01T11:00:00.000Z',
    approved: [0],
    decidedBy: 'alice',
  };
}

describe('in doubt', () => {
  it('a gateway that dies between claim and record leaves the claim: once its lease runs out, the next caller finds the call in doubt', async () => {
    const w = world();
    w.servers.handlers.set('demo__restart_pod', () => held().promise);
    const crashed = started(w.gateway({ clock: new ManualClock() }), call('k-crash', 'restart_pod'));
    await settle();
    expect(w.records.records.get('k-crash')?.state).toBe('inflight');
    await w.clock.advance(LEASE_MS + 1);
    const found = await w.gateway().execute(call('k-crash', 'restart_pod'));
    expect(found.result).toMatchObject({ code: 'in_doubt', inDoubt: true });
    expect(w.servers.sent).toEqual(['demo__restart_pod']);
    expect(w.records.records.get('k-crash')?.state).toBe('in-doubt');
    expect(w.records.inDoubtIndex.has('k-crash')).toBe(true);
    expect(w.auditOf('k-crash')).toEqual(['in-doubt']);
    expect(w.eventsOf('k-crash')).toEqual(['tool.started', 'tool.in_doubt']);
    expect(w.deadLetters.letters.map((l) => l.id)).toEqual(['in-doubt-k-crash']);
    // A later caller: in doubt again, its dead letter written again (one per key), no second audit or event.
    const mark = w.journal.length;
    expect((await w.gateway().execute(call('k-crash', 'restart_pod'))).result).toMatchObject({ inDoubt: true });
    expect(since(w.journal, mark)).toEqual(['records.claim', 'deadLetters.add in-doubt', 'records.read']);
    expect(w.deadLetters.letters).toHaveLength(1);
    expect(crashed.done()).toBe(false);
  });

  it('in doubt, later seen done: the outcome recorded after the declaration resolves the dead letter and leaves the index', async () => {
    const w = world();
    const slow = held();
    w.servers.handlers.set('demo__restart_pod', () => slow.promise);
    const cutOff = started(w.gateway({ clock: new ManualClock() }), call('k-seen', 'restart_pod'));
    await settle();
    await w.clock.advance(LEASE_MS + 1);
    expect((await w.gateway().execute(call('k-seen', 'restart_pod'))).result).toMatchObject({ inDoubt: true });
    slow.answer({ isError: false, text: 'it did run' });
    expect((await cutOff.answer).result).toMatchObject({ status: 'ok', text: 'it did run' });
    expect(w.records.records.get('k-seen')).toMatchObject({ state: 'done', seenDoneAt: expect.any(String) });
    expect(w.records.inDoubtIndex.has('k-seen')).toBe(false);
    expect(w.deadLetters.letters[0]?.resolution).toMatchObject({ action: 'seen-done' });
    const recordAt = w.journal.lastIndexOf('records.recordDone');
    expect(w.journal.indexOf('deadLetters.resolveInDoubt', recordAt)).toBeGreaterThan(recordAt);
  });

  it('a lapsed declaration that finds the lease renewed (its gateway came back) waits again, and answers with the outcome', async () => {
    const w = world();
    const slow = held();
    w.servers.handlers.set('demo__restart_pod', () => slow.promise);
    const a = started(w.gateway({ clock: new ManualClock() }), call('k-back', 'restart_pod'));
    await settle();
    await w.clock.advance(LEASE_MS + 1);
    // A's renewal lands between B's claim and B's declaration.
    const renewing: ToolRecords = Object.assign(Object.create(w.records) as MemoryToolRecords, {
      markInDoubt: async (key: string, by: { owner: string } | { lapsed: true }) => {
        const record = w.records.records.get(key)!;
        record.leaseUntil = w.clock.now() + LEASE_MS;
        return w.records.markInDoubt(key, by);
      },
    });
    const b = started(w.gateway({ records: renewing }), call('k-back', 'restart_pod'));
    await settle();
    expect(w.records.records.get('k-back')?.state).toBe('inflight');
    slow.answer({ isError: false, text: 'back and done' });
    await a.answer;
    await w.clock.advance(LEASE_POLL_MS);
    expect((await b.answer).result).toMatchObject({ status: 'ok', text: 'back and done' });
    expect(w.eventsOf('k-back')).not.toContain('tool.in_doubt');
  });

  it('declares a mutating call in doubt when its answer is lost (timeout, closed connection), and a read-only one merely failed', async () => {
    const w = world();
    w.servers.handlers.set('demo__restart_pod', () => Promise.reject(new McpError(ErrorCode.RequestTimeout, 'Request timed out')));
    w.servers.handlers.set('demo__scale', () => Promise.reject(new McpError(ErrorCode.ConnectionClosed, 'Connection closed')));
    w.servers.handlers.set('demo__get_pods', () => Promise.reject(new McpError(ErrorCode.RequestTimeout, 'Request timed out')));
    expect((await w.gateway().execute(call('k-to', 'restart_pod'))).result).toMatchObject({ code: 'in_doubt' });
    w.approvals.approvals.set('ap-2', approvalOf('ap-2', 'k-cc'));
    expect((await w.gateway().execute(call('k-cc', 'scale', { approvalId: 'ap-2' }))).result).toMatchObject({ code: 'in_doubt' });
    expect(w.audit.entries.find((e) => e.key === 'k-cc')).toMatchObject({ status: 'in-doubt', approvalId: 'ap-2', approver: 'alice' });
    expect((await w.gateway().execute(call('k-ro', 'get_pods'))).result).toMatchObject({ code: 'timeout' });
    expect(w.records.records.get('k-ro')).toMatchObject({ state: 'done', result: { code: 'timeout' } });
    expect(w.records.inDoubtIndex).toEqual(new Set(['k-to', 'k-cc']));
  });

  it('records a JSON-RPC error reply and a call never sent as ordinary failures, not in doubt', async () => {
    const w = world();
    w.servers.handlers.set('demo__restart_pod', () => Promise.reject(new McpError(ErrorCode.InvalidParams, 'bad pod')));
    w.servers.handlers.set('demo__scale', () => Promise.reject(new CallNotSentError('no connection')));
    expect((await w.gateway().execute(call('k-rpc', 'restart_pod'))).result).toMatchObject({ code: 'tool_error' });
    w.approvals.approvals.set('ap-3', approvalOf('ap-3', 'k-ns'));
    expect((await w.gateway().execute(call('k-ns', 'scale', { approvalId: 'ap-3' }))).result).toMatchObject({
      code: 'tool_error',
      error: 'no connection',
    });
    expect(w.records.records.get('k-rpc')?.state).toBe('done');
    expect(w.records.records.get('k-ns')?.state).toBe('done');
    expect(w.records.inDoubtIndex.size).toBe(0);
    expect(w.auditOf('k-rpc')).toEqual(['error']);
  });

  it('answers with an error, not in doubt, a call still running in another gateway well past its timeout', async () => {
    const w = world();
    const slow = held();
    w.servers.handlers.set('demo__restart_pod', () => slow.promise);
    started(w.gateway(), call('k-long', 'restart_pod'));
    await settle();
    const b = started(w.gateway(), call('k-long', 'restart_pod'));
    // callTimeoutMs 1 s, then two leases.
    for (let t = 0; t <= 1_000 + 2 * LEASE_MS + LEASE_POLL_MS && !b.done(); t += LEASE_POLL_MS) await w.clock.advance(LEASE_POLL_MS);
    expect((await b.answer).result).toMatchObject({ code: 'timeout', error: expect.stringContaining('still running in another gateway') });
    expect(w.records.records.get('k-long')?.state).toBe('inflight');
    slow.answer();
  });
});

describe('what runs again, and what never does', () => {
  it('sends a read-only call found in flight again (its earlier attempt died), and never a mutating one', async () => {
    const w = world();
    w.servers.handlers.set('demo__get_pods', () => held().promise);
    w.servers.handlers.set('demo__restart_pod', () => held().promise);
    started(w.gateway({ clock: new ManualClock() }), call('r-ro', 'get_pods'));
    started(w.gateway({ clock: new ManualClock() }), call('r-rw', 'restart_pod'));
    await settle();
    await w.clock.advance(LEASE_MS + 1);
    w.servers.handlers.clear();
    expect((await w.gateway().execute(call('r-ro', 'get_pods'))).result).toMatchObject({ status: 'ok', text: 'get_pods ok' });
    expect((await w.gateway().execute(call('r-rw', 'restart_pod'))).result).toMatchObject({ inDoubt: true });
    expect(w.servers.sent).toEqual(['demo__get_pods', 'demo__restart_pod', 'demo__get_pods']);
  });

  it('runs a call an operator asked to retry once more, then answers it from its record', async () => {
    const w = world();
    w.records.records.set('r-retry', {
      state: 'retry',
      tool: 'demo__restart_pod',
      digest: toolCallDigest('r-retry', 'demo__restart_pod', { pod: 'p1' }),
    });
    expect((await w.gateway().execute(call('r-retry', 'restart_pod'))).result).toMatchObject({ status: 'ok' });
    expect((await w.gateway().execute(call('r-retry', 'restart_pod'))).result).toMatchObject({ status: 'ok' });
    expect(w.servers.sent).toEqual(['demo__restart_pod']);
    expect(w.records.records.get('r-retry')?.state).toBe('done');
  });

  it('forwards MCP progress as tool.progress, at most two a second, always the last one', async () => {
    const w = world();
    const slow = held();
    w.servers.handlers.set('demo__get_pods', (_args, options) => {
      for (const progress of [1, 2, 3]) options.onProgress?.({ progress, total: 10 });
      return slow.promise;
    });
    const a = started(w.gateway(), call('r-progress', 'get_pods'));
    await settle();
    await w.clock.advance(500);
    expect(w.eventsOf('r-progress')).toEqual(['tool.started', 'tool.progress']);
    slow.answer();
    await a.answer;
    const last = held();
    w.servers.handlers.set('demo__get_pods', (_args, options) => {
      options.onProgress?.({ progress: 1, total: 2 });
      options.onProgress?.({ progress: 2, total: 2 });
      return last.promise;
    });
    const b = started(w.gateway(), call('r-progress-2', 'get_pods'));
    await settle();
    expect(
      w.events.sink.events.filter((e) => e.type === 'tool.progress' && e.data.key === 'r-progress-2').map((e) => e.data.progress),
    ).toEqual([1, 2]);
    last.answer();
    await b.answer;
  });
});

describe('the order of effects', () => {
  it('claim, tool.started, send, then record, tool.completed, audit: in that order', async () => {
    const w = world();
    await w.gateway().execute(call('o-ok', 'restart_pod'));
    expect(w.journal).toEqual([
      'records.claim',
      'event tool.started',
      'mcp.call demo__restart_pod',
      'records.recordDone',
      'event tool.completed',
      'audit ok',
    ]);
  });

  it('in doubt: the declaration first, then audit, dead letter and tool.in_doubt', async () => {
    const w = world();
    w.servers.handlers.set('demo__restart_pod', () => Promise.reject(new Error('socket hang up')));
    await w.gateway().execute(call('o-doubt', 'restart_pod'));
    expect(since(w.journal, w.journal.indexOf('mcp.call demo__restart_pod') + 1)).toEqual([
      'records.markInDoubt',
      'audit in-doubt',
      'deadLetters.add in-doubt',
      'records.read',
      'event tool.in_doubt',
    ]);
  });

  it('a failed call: audit, then its record, then tool.failed', async () => {
    const w = world();
    w.servers.handlers.set('demo__restart_pod', () => Promise.reject(new McpError(ErrorCode.InvalidParams, 'bad pod')));
    await w.gateway().execute(call('o-fail', 'restart_pod'));
    expect(since(w.journal, w.journal.indexOf('mcp.call demo__restart_pod') + 1)).toEqual([
      'audit error',
      'records.recordDone',
      'event tool.failed',
    ]);
  });

  it('another call under a recorded key: dead letter, audit, tool.failed; nothing sent or recorded', async () => {
    const w = world();
    await w.gateway().execute(call('o-key', 'restart_pod'));
    const mark = w.journal.length;
    const other = await w.gateway().execute({ ...call('o-key', 'restart_pod'), args: { pod: 'p2' } });
    expect(other).toMatchObject({ result: { code: 'refused' }, decision: 'mismatch' });
    expect(since(w.journal, mark)).toEqual(['records.claim', 'deadLetters.add poison', 'audit refused', 'event tool.failed']);
    expect(w.servers.sent).toEqual(['demo__restart_pod']);
  });

  it('audits before the caller hears the outcome; a failed audit write changes nothing of the outcome', async () => {
    const w = world();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const append = w.audit.append.bind(w.audit);
    w.audit.append = async (entry) => {
      await gate;
      return append(entry);
    };
    const a = started(w.gateway(), call('o-audit', 'restart_pod'));
    await settle();
    expect(a.done()).toBe(false);
    release();
    expect((await a.answer).result).toMatchObject({ status: 'ok' });
    expect(w.auditOf('o-audit')).toEqual(['ok']);
    w.faults.add('audit.append');
    expect((await w.gateway().execute(call('o-audit-2', 'restart_pod'))).result).toMatchObject({ status: 'ok', text: 'restart_pod ok' });
  });

  it('a refused call goes no further than the policy: no claim, nothing sent', async () => {
    const w = world();
    const answer = await w.gateway().execute({ ...call('o-ref', 'restart_pod'), agent: 'nobody' });
    expect(answer).toMatchObject({ result: { code: 'refused' }, decision: 'refuse' });
    expect(w.journal).toEqual(['records.recorded', 'audit refused', 'event tool.failed']);
  });
});

describe('when something fails unexpectedly', () => {
  it('a claim whose reply was lost is freed (nothing was sent): the next attempt runs the call', async () => {
    const w = world();
    w.faults.add('records.claim:reply');
    const lost = await w.gateway().execute(call('u-lost', 'restart_pod'));
    expect(lost.result).toMatchObject({ code: 'tool_error' });
    expect(w.journal).toContain('records.abandonClaim');
    expect(w.records.records.has('u-lost')).toBe(false);
    w.faults.clear();
    expect((await w.gateway().execute(call('u-lost', 'restart_pod'))).result).toMatchObject({ status: 'ok' });
    expect(w.servers.sent).toEqual(['demo__restart_pod']);
  });

  it('after a mutating call was sent, when its result cannot be recorded: in doubt, by its own gateway', async () => {
    const w = world();
    w.faults.add('records.recordDone');
    const answer = await w.gateway().execute(call('u-rec', 'restart_pod'));
    expect(answer.result).toMatchObject({ inDoubt: true, error: expect.stringContaining('failed before it recorded the result') });
    expect(w.records.records.get('u-rec')?.state).toBe('in-doubt');
    expect(w.eventsOf('u-rec')).toEqual(['tool.started', 'tool.in_doubt']);
    expect(w.auditOf('u-rec')).toEqual(['in-doubt']);
  });

  it('when nothing can be written: still answered in doubt, and found in doubt by the next attempt once the lease ran out', async () => {
    const w = world();
    w.faults.add('records.recordDone').add('records.markInDoubt');
    expect((await w.gateway().execute(call('u-down', 'restart_pod'))).result).toMatchObject({ inDoubt: true });
    expect(w.eventsOf('u-down')).toEqual(['tool.started', 'tool.in_doubt']);
    w.faults.clear();
    await w.clock.advance(LEASE_MS + 1);
    expect((await w.gateway().execute(call('u-down', 'restart_pod'))).result).toMatchObject({ inDoubt: true });
    expect(w.records.records.get('u-down')?.state).toBe('in-doubt');
    expect(w.servers.sent).toEqual(['demo__restart_pod']);
  });

  it('after a read-only call was sent, when nothing can be recorded: an error and tool.failed, not in doubt', async () => {
    const w = world();
    w.faults.add('records.recordDone');
    const answer = await w.gateway().execute(call('u-ro', 'get_pods'));
    expect(answer.result).toMatchObject({ code: 'tool_error', error: expect.stringContaining('could not process the call') });
    expect(answer.result.inDoubt).toBeUndefined();
    expect(w.eventsOf('u-ro')).toEqual(['tool.started', 'tool.failed']);
  });

  it('refuses a call from a stale owner of its task: nothing runs, nothing is recorded, announced or audited', async () => {
    const w = world();
    w.records.locks.set('unit:specialist-ops:t-stale:lock', 'the-new-owner');
    const stale = call('u-stale', 'restart_pod', { taskLock: { taskId: 't-stale', token: 'the-old-owner' } });
    expect(await w.gateway().execute(stale)).toMatchObject({ result: { code: 'refused' }, decision: 'stale' });
    expect(w.journal).toEqual(['records.claim']);
  });

  it('checks the run’s lock (its incident job’s) for a local task, which has no job of its own', async () => {
    const w = world();
    w.records.locks.set('unit:incidents:inc-9:lock', 'run-token');
    const local = (token: string) => ({ taskLock: { taskId: 't-local', token, run: { jobId: 'inc-9' } } });
    expect(await w.gateway().execute(call('u-local-stale', 'restart_pod', local('an-old-token')))).toMatchObject({ decision: 'stale' });
    const ran = await w.gateway().execute(call('u-local', 'get_pods', local('run-token')));
    expect(ran.result.code).toBeUndefined();
    expect(w.servers.sent).toEqual(['demo__get_pods']);
  });
});
