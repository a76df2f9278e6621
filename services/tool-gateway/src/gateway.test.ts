import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { UnrecoverableError, type Job } from 'bullmq';
import type { CatalogTool, ToolCallJob } from '@bosun/contract';
import { createLogger, parseClusterConfig } from '@bosun/config';
import { MemoryEventSink, keys, type DeadLetterInput, type RedisClient } from '@bosun/transport';
import { openContext, type TestContext } from '../../../test/helpers/context.js';
import { waitUntil } from '../../../test/helpers/wait.js';

import { ToolGateway } from './gateway.js';
import type { McpCallOutcome } from './mcp.js';

// ToolGateway.execute when things go wrong that nobody planned for: Redis failing at a given
// step (through a stand-in that fails chosen commands), over a stand-in MCP server. Whatever
// fails, the caller gets a result, and a mutating call that may have run is never answered as
// anything but in doubt.

let ctx: TestContext;
let gateway: ToolGateway;
let events: MemoryEventSink;
let deadLetters: { input: DeadLetterInput; id: string | undefined; resolution?: { action: string } }[];
/** Redis commands that fail while in this set (`multi` fails at `exec`). */
const failing = new Set<string>();
/** Calls the stand-in server received. */
let sent: string[];

const REPORT = { type: 'object', required: ['summary'], properties: { summary: { type: 'string' } } };

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

/** The context's Redis, with the commands in {@link failing} failing. */
function flakyRedis(redis: RedisClient): RedisClient {
  return new Proxy(redis, {
    get(target, prop) {
      if (typeof prop === 'string' && failing.has(prop)) {
        if (prop === 'multi') {
          const chain = { hset: () => chain, expire: () => chain, exec: () => Promise.reject(new Error('redis multi failed')) };
          return () => chain;
        }
        return () => Promise.reject(new Error(`redis ${prop} failed`));
      }
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

function call(key: string, remoteName: string): ToolCallJob {
  return { v: 1, key, runId: 'r-unit', incidentId: 'inc-unit', agent: 'ops', tool: `demo__${remoteName}`, args: { pod: 'p1' } };
}

const eventsOf = (key: string) => events.events.filter((e) => e.data.key === key).map((e) => e.type);
const stateOf = (key: string) => ctx.redis.hget(keys.toolCall(ctx.prefix, key), 'state');

async function audited(key: string): Promise<string[]> {
  const entries = (await ctx.redis.xrange(keys.audit(ctx.prefix), '-', '+')) as [string, string[]][];
  return entries.filter(([, f]) => f[f.indexOf('key') + 1] === key).map(([, f]) => f[f.indexOf('status') + 1]!);
}

beforeAll(async () => {
  ctx = await openContext('gateway-unit');
  const config = parseClusterConfig(
    {
      coordinator: { routes: {}, defaultRoute: ['ops'] },
      specialists: { ops: { description: 'ops', tools: ['demo__*'], outputSchema: REPORT, mode: 'read-write' } },
      mcpServers: { demo: { transport: 'stdio', command: 'node', args: ['never-started.js'] } },
    },
    { file: 'unit.json', env: {} },
  );
  events = new MemoryEventSink();
  gateway = new ToolGateway({
    redis: flakyRedis(ctx.redis),
    prefix: ctx.prefix,
    config,
    events,
    deadLetters: {
      add: (input, id) => {
        if (failing.has('deadLetters.add')) return Promise.reject(new Error('dead-letter queue unavailable'));
        deadLetters.push({ input, id });
        return Promise.resolve({ v: 1, kind: input.kind, marker: '', at: '', reason: input.reason });
      },
      resolveInDoubt: (key, resolution) => {
        const entry = deadLetters.find((d) => d.id === `in-doubt-${key}`);
        if (!entry || entry.resolution) return Promise.resolve(false);
        entry.resolution = resolution;
        return Promise.resolve(true);
      },
    },
    log: createLogger({ service: 'gateway-unit', level: 'silent' }),
    // Short leases: a lease left behind by a failed write runs out within the test.
    leaseMs: 400,
  });
  const server = gateway.servers[0]!;
  server.tools = [tool('get_pods', true), tool('restart_pod', false)];
  server.call = (remoteName): Promise<McpCallOutcome> => {
    sent.push(remoteName);
    return Promise.resolve({ isError: false, text: `${remoteName} ok` });
  };
});

beforeEach(() => {
  failing.clear();
  deadLetters = [];
  sent = [];
});

/** Set by the test of close (the last of the file): the gateway is closed already. */
let closed = false;

afterAll(async () => {
  if (!closed) await gateway?.close();
  await ctx?.close();
});

describe('ToolGateway.execute, when something fails unexpectedly', () => {
  it('before the claim: answers with an error and tool.failed, sends nothing and records nothing', async () => {
    failing.add('bosunClaimCall');
    const result = await gateway.execute(call('u-claim', 'restart_pod'));
    expect(result).toMatchObject({
      status: 'error',
      isError: true,
      error: 'the tool gateway could not process the call: redis bosunClaimCall failed',
    });
    expect(result.inDoubt).toBeUndefined();
    expect(eventsOf('u-claim')).toEqual(['tool.failed']);
    expect(sent).toEqual([]);
    expect(await stateOf('u-claim')).toBeNull();
    expect(deadLetters).toEqual([]);
  });

  it('after a mutating call was sent, when its result cannot be recorded: in doubt, with audit, record, dead letter and event', async () => {
    failing.add('bosunRecordCall');
    const result = await gateway.execute(call('u-record', 'restart_pod'));
    expect(sent).toEqual(['restart_pod']);
    expect(result.inDoubt).toBe(true);
    expect(result.code).toBe('in_doubt');
    expect(result.error).toMatch(
      /^IN DOUBT: the mutating call demo__restart_pod \(key u-record\) was sent to its server, but the gateway failed before it recorded the result \(redis bosunRecordCall failed\)\./,
    );
    expect(await stateOf('u-record')).toBe('in-doubt');
    expect(await audited('u-record')).toEqual(['in-doubt']);
    expect(deadLetters).toMatchObject([
      { id: 'in-doubt-u-record', input: { kind: 'in-doubt', input: { key: 'u-record', tool: 'demo__restart_pod' } } },
    ]);
    expect(eventsOf('u-record')).toEqual(['tool.started', 'tool.in_doubt']);
    // Asked again with Redis well: still in doubt, and not sent again.
    failing.clear();
    expect((await gateway.execute(call('u-record', 'restart_pod'))).inDoubt).toBe(true);
    expect(sent).toEqual(['restart_pod']);
  });

  it('after a mutating call was sent, when nothing can be written: still answered in doubt, and found in doubt by the next attempt', async () => {
    failing.add('bosunRecordCall').add('bosunMarkInDoubt').add('xadd');
    const result = await gateway.execute(call('u-down', 'restart_pod'));
    expect(result.inDoubt).toBe(true);
    expect(result.error).toMatch(/^IN DOUBT: .*redis bosunRecordCall failed/);
    expect(eventsOf('u-down')).toEqual(['tool.started', 'tool.in_doubt']);
    // The record stays in flight: once its lease has run out, the next attempt declares it in
    // doubt, with its dead letter, and does not send it.
    expect(await stateOf('u-down')).toBe('inflight');
    failing.clear();
    const again = await gateway.execute(call('u-down', 'restart_pod'));
    expect(again.inDoubt).toBe(true);
    expect(await stateOf('u-down')).toBe('in-doubt');
    expect(await ctx.redis.zscore(keys.inDoubt(ctx.prefix), 'u-down')).not.toBeNull();
    expect(new Set(deadLetters.map((d) => d.id))).toEqual(new Set(['in-doubt-u-down']));
    expect(sent).toEqual(['restart_pod']);
  });

  it('a call declared in doubt whose dead letter cannot be written gets it from the next attempt', async () => {
    // A mutating call whose connection failed mid-call is in doubt; the dead letter fails.
    gateway.servers[0]!.call = (remoteName): Promise<McpCallOutcome> => {
      sent.push(remoteName);
      return Promise.reject(new Error('connection reset'));
    };
    failing.add('deadLetters.add');
    try {
      const result = await gateway.execute(call('u-nodlq', 'restart_pod'));
      expect(result.inDoubt).toBe(true);
      // Declared (record and index in one script) before the dead letter, which failed.
      expect(await stateOf('u-nodlq')).toBe('in-doubt');
      expect(deadLetters).toEqual([]);
      failing.clear();
      const again = await gateway.execute(call('u-nodlq', 'restart_pod'));
      expect(again.inDoubt).toBe(true);
      expect(await stateOf('u-nodlq')).toBe('in-doubt');
      expect(deadLetters.map((d) => d.id)).toEqual(['in-doubt-u-nodlq']);
      expect(sent).toEqual(['restart_pod']);
    } finally {
      gateway.servers[0]!.call = (remoteName): Promise<McpCallOutcome> => {
        sent.push(remoteName);
        return Promise.resolve({ isError: false, text: `${remoteName} ok` });
      };
    }
  });

  it('after a read-only call was sent, when nothing can be recorded: an error and tool.failed, not in doubt', async () => {
    failing.add('bosunRecordCall');
    const result = await gateway.execute(call('u-ro', 'get_pods'));
    expect(result).toMatchObject({
      status: 'error',
      code: 'tool_error',
      error: 'the tool gateway could not process the call: redis bosunRecordCall failed',
    });
    expect(result.inDoubt).toBeUndefined();
    expect(eventsOf('u-ro')).toEqual(['tool.started', 'tool.failed']);
    expect(deadLetters).toEqual([]);
    // Read-only: run again next time.
    failing.clear();
    expect(await gateway.execute(call('u-ro', 'get_pods'))).toMatchObject({ status: 'ok', text: 'get_pods ok' });
    expect(sent).toEqual(['get_pods', 'get_pods']);
  });

  it('a corrupt recorded result: an error, and the call is not sent', async () => {
    await ctx.redis.hset(keys.toolCall(ctx.prefix, 'u-corrupt'), { state: 'done', result: 'not json' });
    const result = await gateway.execute(call('u-corrupt', 'restart_pod'));
    expect(result).toMatchObject({
      status: 'error',
      error: 'the tool gateway could not process the call: the recorded result of tool call u-corrupt is not valid JSON',
    });
    expect(sent).toEqual([]);
    expect(await stateOf('u-corrupt')).toBe('done');
  });
});

describe('a mutating call found in flight, its key, its caller', () => {
  /** Makes the stand-in server hold its next call until the returned function is called. */
  function holdNextCall(): () => void {
    let release: () => void = () => undefined;
    const held = new Promise<void>((r) => (release = r));
    const server = gateway.servers[0]!;
    const original = server.call.bind(server);
    server.call = async (remoteName): Promise<McpCallOutcome> => {
      sent.push(remoteName);
      server.call = original;
      await held;
      return { isError: false, text: `${remoteName} ok` };
    };
    return release;
  }

  it('waits for a call that runs under a live lease and answers with its outcome: not in doubt, sent once', async () => {
    const release = holdNextCall();
    const first = gateway.execute(call('l-live', 'restart_pod'));
    await waitUntil(() => sent.length === 1, 5_000, 'the server got the call');
    let answered = false;
    const again = gateway.execute(call('l-live', 'restart_pod')).finally(() => (answered = true));
    // Several leases (400 ms each) pass: the running gateway renews it, the second attempt waits.
    await new Promise((r) => setTimeout(r, 1_500));
    expect(answered).toBe(false);
    release();
    const [a, b] = await Promise.all([first, again]);
    expect(a).toMatchObject({ status: 'ok', text: 'restart_pod ok' });
    expect(b).toEqual(a);
    expect(sent).toEqual(['restart_pod']);
    expect(deadLetters).toEqual([]);
    expect(await audited('l-live')).toEqual(['ok']);
  });

  it('in doubt, later seen done: the outcome recorded after the declaration resolves the dead letter and the index', async () => {
    const release = holdNextCall();
    // The running gateway cannot renew its lease (cut off from Redis, as far as the lease goes).
    failing.add('bosunRenewCallLease');
    const first = gateway.execute(call('l-seen', 'restart_pod'));
    await waitUntil(() => sent.length === 1, 5_000, 'the server got the call');
    const found = await gateway.execute(call('l-seen', 'restart_pod'));
    expect(found.inDoubt).toBe(true);
    expect(await stateOf('l-seen')).toBe('in-doubt');
    expect(await ctx.redis.zscore(keys.inDoubt(ctx.prefix), 'l-seen')).not.toBeNull();
    expect(deadLetters.map((d) => [d.id, d.resolution])).toEqual([['in-doubt-l-seen', undefined]]);
    release();
    expect(await first).toMatchObject({ status: 'ok' });
    const record = await ctx.redis.hgetall(keys.toolCall(ctx.prefix, 'l-seen'));
    expect(record).toMatchObject({ state: 'done', inDoubtAt: expect.any(String), seenDoneAt: expect.any(String) });
    expect(await ctx.redis.zscore(keys.inDoubt(ctx.prefix), 'l-seen')).toBeNull();
    expect(deadLetters[0]?.resolution).toMatchObject({ action: 'seen-done', by: 'tool-gateway' });
    expect(await audited('l-seen')).toEqual(['in-doubt', 'ok']);
    // A later attempt gets the real result, not the declaration.
    expect(await gateway.execute(call('l-seen', 'restart_pod'))).toMatchObject({ status: 'ok', text: 'restart_pod ok' });
    expect(sent).toEqual(['restart_pod']);
  });

  it('refuses another call under a recorded key (another tool or other arguments), with a dead letter, and runs nothing', async () => {
    expect(await gateway.execute(call('k-same', 'restart_pod'))).toMatchObject({ status: 'ok' });
    const other = { ...call('k-same', 'restart_pod'), args: { pod: 'p2' } };
    const refused = await gateway.execute(other);
    expect(refused).toMatchObject({ status: 'error', isError: true, code: 'refused' });
    expect(refused.error).toMatch(/^tool call key k-same is recorded for another call \(demo__restart_pod with its own arguments\)/);
    expect(sent).toEqual(['restart_pod']);
    expect(deadLetters).toMatchObject([
      {
        input: {
          kind: 'poison',
          input: { key: 'k-same', tool: 'demo__restart_pod', args: { pod: 'p2' }, recordedTool: 'demo__restart_pod' },
        },
      },
    ]);
    expect(await audited('k-same')).toEqual(['ok', 'refused']);
  });

  it('refuses a call from a stale owner of its task: nothing runs, nothing is recorded or announced', async () => {
    const lockKey = `${ctx.prefix}:specialist-ops:t-stale:lock`;
    await ctx.redis.set(lockKey, 'the-new-owner');
    const stale = { ...call('s-stale', 'restart_pod'), taskLock: { taskId: 't-stale', token: 'the-old-owner' } };
    const result = await gateway.execute(stale);
    expect(result).toMatchObject({ status: 'error', isError: true, code: 'refused' });
    expect(result.error).toMatch(/^not executed: the specialist that sent it no longer holds task t-stale/);
    expect(result.inDoubt).toBeUndefined();
    expect(sent).toEqual([]);
    expect(await stateOf('s-stale')).toBeNull();
    expect(deadLetters).toEqual([]);
    expect(eventsOf('s-stale')).toEqual([]);
    // The owner's own call runs.
    expect(await gateway.execute({ ...stale, taskLock: { taskId: 't-stale', token: 'the-new-owner' } })).toMatchObject({ status: 'ok' });
    expect(sent).toEqual(['restart_pod']);
  });
});

describe('ToolGateway.process', () => {
  it('executes the call of a valid job', async () => {
    const result = await gateway.process({ id: 'p-ok', name: 'tool-call', data: call('p-ok', 'get_pods') } as Job);
    expect(result).toMatchObject({ key: 'p-ok', status: 'ok', text: 'get_pods ok' });
  });

  it('sends a poison job to the dead-letter queue with its data, and fails it without retries', async () => {
    const data = { v: 1, key: 'p-bad', tool: 42 };
    await expect(gateway.process({ id: 'p-bad', name: 'tool-call', data } as Job)).rejects.toThrow(UnrecoverableError);
    expect(deadLetters).toMatchObject([{ id: 'poison-p-bad', input: { kind: 'poison', input: data } }]);
    expect(deadLetters[0]!.input.reason).toMatch(/^invalid tool call: /);
    expect(sent).toEqual([]);
  });
});

describe('ToolGateway.close', () => {
  it('waits for a call of a specialist in its process (inProcess) to be answered and recorded before it closes the MCP servers', async () => {
    const server = gateway.servers[0]!;
    const order: string[] = [];
    let answer: (() => void) | undefined;
    server.call = (remoteName): Promise<McpCallOutcome> => {
      sent.push(remoteName);
      return new Promise((resolve) => (answer = () => resolve({ isError: false, text: `${remoteName} ok` })));
    };
    const closeServer = server.close.bind(server);
    server.close = () => {
      order.push('servers closed');
      return closeServer();
    };
    const pending = gateway.inProcess().execute(call('k-close-1', 'restart_pod'));
    await waitUntil(() => answer !== undefined, 5_000, 'the call sent to the MCP server');
    closed = true;
    const closing = gateway.close().then(() => order.push('gateway closed'));
    // A turn of the event loop: a close that did not wait would have closed the servers by now.
    await new Promise((resolve) => setImmediate(resolve));
    order.push('answered');
    answer!();
    await closing;
    expect(order).toEqual(['answered', 'servers closed', 'gateway closed']);
    expect((await pending).status).toBe('ok');
    expect(await stateOf('k-close-1')).toBe('done');
    expect(sent).toEqual(['restart_pod']);
  });
});
