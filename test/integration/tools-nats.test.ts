import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { Queue, Worker } from 'bullmq';
import type { Subscription } from '@nats-io/transport-node';
import { DEAD_LETTER_QUEUE, TOOLS_QUEUE, toolCallDigest, type ToolCallJob } from '@bosun/contract';
import { createLogger, parseClusterConfig } from '@bosun/config';
import {
  DeadLetters,
  EventPublisher,
  NatsToolClient,
  QueueToolClient,
  TOOL_CALL_QUEUE_GROUP,
  ToolCallRecords,
  serveToolCalls,
  toolCallSubject,
  type ToolCallResponder,
} from '@bosun/transport';
import { ToolGateway } from '@bosun/tool-gateway';
import { ENTRY, demoConfig, openContext, type TestContext } from '../helpers/index.js';

// Tool calls over NATS request/reply, against real NATS, Redis and the demo MCP server: the
// answer over NATS, the queue as fallback when no gateway answers, and the re-send by the queue
// when the gateway that took a call falls silent (answered from the record, or in doubt).

const log = createLogger({ service: 'tools-nats-test', level: 'silent' });
let ctx: TestContext;
let gateway: ToolGateway;
let events: EventPublisher;
let deadLetters: DeadLetters;
let records: ToolCallRecords;
let queueTools: QueueToolClient;
let natsTools: NatsToolClient;
let toolsQueue: Queue;
let worker: Worker | undefined;
let responder: ToolCallResponder | undefined;
let silent: Subscription | undefined;
let callLog: string;

const LAPSE_MS = 800;

function logged(tool: string): number {
  if (!existsSync(callLog)) return 0;
  return readFileSync(callLog, 'utf8')
    .split('\n')
    .filter((l) => l && (JSON.parse(l) as { tool: string }).tool === tool).length;
}

function job(key: string, tool: string, args: Record<string, unknown>): ToolCallJob {
  return { v: 1, key, runId: 'r-nats', incidentId: 'inc-nats', agent: 'ops', tool, args };
}

const restart = { service: 'checkout', pod: 'checkout-7c9d6f8b4-9mz4q' };

/** The BullMQ worker of the queue path (the fallback), as the gateway's main runs it. */
function startWorker(): Worker {
  worker = new Worker(TOOLS_QUEUE, (j) => gateway.process(j), { connection: ctx.redis, prefix: ctx.prefix, concurrency: 4 });
  return worker;
}

/**
 * A gateway that takes calls over NATS and falls silent: `then` runs on each request's data
 * (claims it, or runs it to its record) and no reply is ever sent, as when a gateway dies or its
 * NATS connection drops.
 */
function silentGateway(then: (call: ToolCallJob) => Promise<unknown>): void {
  silent = ctx.nats.subscribe(toolCallSubject(ctx.prefix), {
    queue: TOOL_CALL_QUEUE_GROUP,
    callback: (_err, msg) => void then(msg.json<ToolCallJob>()),
  });
}

beforeAll(async () => {
  ctx = await openContext('tools-nats');
  callLog = join(ctx.dir, 'calls.jsonl');
  const raw = demoConfig();
  raw.mcpServers = {
    demo: {
      transport: 'stdio',
      command: process.execPath,
      args: [ENTRY.demoMcp],
      env: { DEMO_MCP_CALL_LOG: callLog, DEMO_MCP_SLOW_MS: '1000' },
    },
  };
  raw.specialists = { ops: { ...raw.specialists.kubernetes, tools: ['demo__*'] } };
  raw.coordinator.routes = {};
  raw.coordinator.defaultRoute = ['ops'];
  raw.gateway = { concurrency: 4, callTimeoutMs: 10_000, maxResultChars: 5_000 };
  const config = parseClusterConfig(raw, { file: join(ctx.dir, 'inline.json') });
  events = new EventPublisher({ prefix: ctx.prefix, redis: ctx.redis, nats: ctx.nats, log });
  deadLetters = new DeadLetters({ redis: ctx.redis, prefix: ctx.prefix });
  // Short leases: a silent gateway's claim runs out within the test.
  records = new ToolCallRecords({ redis: ctx.redis, prefix: ctx.prefix, leaseMs: 500 });
  gateway = new ToolGateway({ redis: ctx.redis, prefix: ctx.prefix, config, events, deadLetters, log, leaseMs: 500 });
  await gateway.start();
  // Not opened here: its Queue and QueueEvents open on the first call that falls back.
  queueTools = new QueueToolClient({ redis: ctx.redis, prefix: ctx.prefix });
  natsTools = new NatsToolClient({
    nats: () => ctx.nats,
    prefix: ctx.prefix,
    catalog: queueTools,
    fallback: queueTools,
    log,
    lapseMs: LAPSE_MS,
  });
  toolsQueue = new Queue(TOOLS_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
});

/** The claim of a gateway that then dies: its lease runs out, unrenewed. */
function deadClaim(call: ToolCallJob) {
  return {
    ...call,
    shownArgs: call.args,
    argsRedacted: false,
    approvalId: undefined,
    digest: toolCallDigest(call.key, call.tool, call.args),
    owner: 'a-gateway-that-died',
  };
}

afterEach(async () => {
  await responder?.close();
  responder = undefined;
  silent?.unsubscribe();
  silent = undefined;
  await worker?.close();
  worker = undefined;
});

afterAll(async () => {
  natsTools?.close();
  await queueTools?.close();
  await toolsQueue?.close();
  await gateway?.close();
  await events?.flush();
  await deadLetters?.close();
  await ctx?.close();
});

describe('tool calls over NATS', () => {
  it('are answered over NATS, heartbeats keeping a call slower than the lapse alive, with no queue job', async () => {
    responder = serveToolCalls({
      nc: ctx.nats,
      prefix: ctx.prefix,
      concurrency: 4,
      handle: (d) => gateway.answer(d),
      log,
      heartbeatMs: 150,
    });
    await ctx.nats.flush();
    // The queue path stays closed while the calls go over NATS: no QueueEvents connection.
    const duplicate = vi.spyOn(ctx.redis, 'duplicate');
    // The demo server takes 1 s a call, longer than the client's lapse (800 ms): answered over
    // NATS only because the heartbeats keep coming.
    const [a, b] = await Promise.all([
      natsTools.call(job('n-read-1', 'demo__get_pods', { service: 'checkout' })),
      natsTools.call(job('n-restart-1', 'demo__restart_pod', restart)),
    ]);
    expect(a.error).toBeUndefined();
    expect(b.error).toBeUndefined();
    expect(a).toMatchObject({ key: 'n-read-1', status: 'ok', isError: false });
    expect(b).toMatchObject({ key: 'n-restart-1', status: 'ok', isError: false });
    expect(await toolsQueue.getJob('n-read-1')).toBeUndefined();
    expect(await toolsQueue.getJob('n-restart-1')).toBeUndefined();
    expect((await records.read('n-restart-1'))?.state).toBe('done');
    // Sent again (a replayed step): answered from the record, not executed again.
    expect(await natsTools.call(job('n-restart-1', 'demo__restart_pod', restart))).toEqual(b);
    expect(logged('restart_pod')).toBe(1);
    expect(duplicate).not.toHaveBeenCalled();
    duplicate.mockRestore();
  });

  it('go by the queue when no gateway is subscribed', async () => {
    startWorker();
    const result = await natsTools.call(job('n-noresp-1', 'demo__get_pods', { service: 'checkout' }));
    expect(result).toMatchObject({ key: 'n-noresp-1', status: 'ok' });
    expect(await (await toolsQueue.getJob('n-noresp-1'))?.isCompleted()).toBe(true);
  });

  it('re-send a mutating call by the queue when its gateway falls silent, which declares it in doubt and never re-sends it', async () => {
    startWorker();
    const before = logged('restart_pod');
    // The gateway claimed the call (and may have sent it), then died.
    silentGateway((call) => records.claim({ ...deadClaim(call), readOnly: false }));
    const result = await natsTools.call(job('n-lost-1', 'demo__restart_pod', restart));
    expect(result).toMatchObject({ key: 'n-lost-1', inDoubt: true, status: 'error' });
    expect(result.error).toContain('IN DOUBT');
    expect(logged('restart_pod')).toBe(before);
    expect((await records.read('n-lost-1'))?.state).toBe('in-doubt');
    const dlq = new Queue(DEAD_LETTER_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
    expect((await dlq.getJob('in-doubt-n-lost-1'))?.data).toMatchObject({ kind: 'in-doubt', input: { key: 'n-lost-1' } });
    await dlq.close();
  });

  it('re-run a read-only call found in flight after its gateway fell silent', async () => {
    startWorker();
    const before = logged('get_pods');
    silentGateway((call) => records.claim({ ...deadClaim(call), readOnly: true }));
    const result = await natsTools.call(job('n-lost-read-1', 'demo__get_pods', { service: 'checkout' }));
    expect(result).toMatchObject({ key: 'n-lost-read-1', status: 'ok', isError: false });
    expect(logged('get_pods')).toBe(before + 1);
  });

  it('answer from the record a call whose gateway recorded it and lost its NATS connection before replying', async () => {
    startWorker();
    const before = logged('restart_pod');
    let recorded: unknown;
    silentGateway(async (call) => (recorded = await gateway.execute(call)));
    // A lapse longer than the call (1 s): the gateway records it before the caller gives up on it.
    const patient = new NatsToolClient({
      nats: () => ctx.nats,
      prefix: ctx.prefix,
      catalog: queueTools,
      fallback: queueTools,
      log,
      lapseMs: 3_000,
    });
    const result = await patient.call(job('n-recorded-1', 'demo__restart_pod', restart));
    expect(result).toMatchObject({ key: 'n-recorded-1', status: 'ok', isError: false });
    expect(result).toEqual(recorded);
    expect(logged('restart_pod')).toBe(before + 1);
    expect(await (await toolsQueue.getJob('n-recorded-1'))?.isCompleted()).toBe(true);
    patient.close();
  });

  it('go by the queue while there is no NATS connection', async () => {
    startWorker();
    const offline = new NatsToolClient({ nats: () => null, prefix: ctx.prefix, catalog: queueTools, fallback: queueTools, log });
    const result = await offline.call(job('n-offline-1', 'demo__get_pods', { service: 'checkout' }));
    expect(result).toMatchObject({ key: 'n-offline-1', status: 'ok' });
    expect(await (await toolsQueue.getJob('n-offline-1'))?.isCompleted()).toBe(true);
    offline.close();
  });

  it("fail a call whose own timeout passes while its gateway's heartbeats still come, without re-sending it", async () => {
    responder = serveToolCalls({
      nc: ctx.nats,
      prefix: ctx.prefix,
      concurrency: 4,
      handle: (d) => gateway.answer(d),
      log,
      heartbeatMs: 150,
    });
    await ctx.nats.flush();
    await expect(natsTools.call(job('n-slow-1', 'demo__get_pods', { service: 'checkout' }), { timeoutMs: 300 })).rejects.toThrow(
      'did not finish within 300 ms',
    );
    expect(await toolsQueue.getJob('n-slow-1')).toBeUndefined();
  });

  it('refuse a request that is not a tool call, and send it to the dead-letter queue with its data', async () => {
    responder = serveToolCalls({ nc: ctx.nats, prefix: ctx.prefix, concurrency: 4, handle: (d) => gateway.answer(d), log });
    await ctx.nats.flush();
    const bad = { v: 1, key: 'n-bad-1', tool: 'demo__get_pods' };
    const reply = await ctx.nats.request(toolCallSubject(ctx.prefix), JSON.stringify(bad), { timeout: 5_000 });
    expect(reply.data.length).toBe(0);
    expect(reply.headers?.get('Bosun-Refused')).toContain('invalid tool call');
    const dlq = new Queue(DEAD_LETTER_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
    const entries = (await dlq.getJobs(['waiting', 'completed', 'failed', 'delayed'])).map(
      (j) => j.data as { kind: string; input: unknown },
    );
    expect(entries).toContainEqual(expect.objectContaining({ kind: 'poison', input: bad }));
    await dlq.close();
  });
});
