import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue } from 'bullmq';
import { TOOLS_QUEUE } from '@bosun/contract';
import {
  callLog,
  openClient,
  runCli,
  startClusterTest,
  testLayout,
  waitUntil,
  type ClusterTest,
  type TestCluster,
  type CallLog,
  type TestContext,
} from '../helpers/index.js';

// Chaos 2: the gateway is killed while a slow mutating call is in progress. Nobody knows whether
// it took effect: it is declared in doubt, never re-sent automatically, shown to operators, and
// `bosun ack <key> --retry` sends it exactly once more. Over both paths of the tool calls: by the
// queue, BullMQ's stalled-job check gives the job to the new gateway; over NATS, the specialist
// hears no heartbeat and re-sends the call by the queue. Either way the new gateway finds it in
// flight. Co-located, the gateway is a function call away and dies with the task: the task
// resumes in another bosun serve and finds the call in flight, as the new gateway does when split.

let t: ClusterTest;
let ctx: TestContext;
let cluster: TestCluster;
let env: Record<string, string>;
let toolLog: CallLog;

const logged = (tool: string) => toolLog.count(tool);
const bosun = (args: string[]) => runCli(env, args);

describe.each(testLayout() === 'split' ? ['nats', 'queue'] : ['direct'])(
  'the gateway dies during a mutating call (gateway.transport: %s)',
  (transport) => {
    beforeAll(async () => {
      t = await startClusterTest(`chaos-gateway-${transport}`, (config, c) => {
        toolLog = callLog(join(c.dir, 'calls.jsonl'));
        // This test is about crashes, not approvals: let the mutating tools run unasked.
        config.mcpServers.demo.tools = {};
        config.mcpServers.demo.env = { DEMO_MCP_CALL_LOG: toolLog.path, DEMO_MCP_SLOW_MS: '4000' };
        config.workers = { lockDurationMs: 3_000, stalledIntervalMs: 1_000, maxStalledCount: 2 };
        if (transport !== 'direct') config.gateway = { ...config.gateway, transport };
      });
      ({ ctx, cluster, env } = t);
    });

    afterAll(async () => {
      await t?.close();
    });

    it('declares the call in doubt, does not call it again, and lets an operator retry it once', async () => {
      const client = await openClient(ctx);
      const incident = {
        id: 'gw-kill',
        source: 'chaos',
        reason: 'PodCrashLooping',
        summary: 'x',
        payload: {
          fake: { calls: { kubernetes: [{ tool: 'demo__restart_pod', args: { service: 'checkout', pod: 'checkout-7c9d6f8b4-9mz4q' } }] } },
        },
      };
      const { job, runId } = await client.publish(incident);
      const started = await client.events.waitFor((e) => e.runId === runId && e.type === 'tool.started', 20_000);
      const key = String(started.data.key);
      // Wait until the MCP server has received the call, then kill the gateway mid-call.
      await waitUntil(() => logged('restart_pod') > 0, 10_000, 'the MCP server received restart_pod', 20);
      expect(logged('restart_pod')).toBe(1);
      // Over NATS the call is no job (yet); by the queue it is the job of its key.
      const toolsQueue = new Queue(TOOLS_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
      expect(Boolean(await toolsQueue.getJob(key))).toBe(transport === 'queue');
      await toolsQueue.close();
      const victim = cluster.host('gateway');
      victim.kill('SIGKILL');
      await victim.exited;
      const gateway = cluster.replace('gateway');
      await gateway.ready();

      const result = await client.result(job);
      // The run ends; the agent was told plainly that the effect is unknown.
      expect(result.specialists[0]?.status).toBe('completed');
      expect(JSON.stringify(result.specialists[0]?.output)).toContain('IN DOUBT');
      // And the run says so in its structure and its answer, not only in the agent's words.
      expect(result.status).toBe('partial');
      expect(result.stalled).toBe(0);
      expect(result.inDoubt).toEqual({ count: 1, calls: [{ key, tool: 'demo__restart_pod', agent: 'kubernetes' }] });
      expect(result.answer).toContain(`IN DOUBT: 1 mutating tool call was sent, but whether it took effect is unknown`);
      expect(result.answer).toContain(`demo__restart_pod by kubernetes (key ${key})`);
      const completed = await client.events.waitFor((e) => e.runId === runId && e.type === 'run.completed', 10_000);
      expect(completed.data).toMatchObject({ status: 'partial', stalled: 0, inDoubt: result.inDoubt, answer: result.answer });
      const inDoubt = await client.events.waitFor((e) => e.runId === runId && e.type === 'tool.in_doubt', 10_000);
      expect(inDoubt.data.key).toBe(key);
      // Not re-sent: the server saw it once.
      expect(logged('restart_pod')).toBe(1);

      const entries = (await client.deadLetters()).filter((d) => d.kind === 'in-doubt');
      expect(entries).toEqual([expect.objectContaining({ runId, agent: 'kubernetes', input: expect.objectContaining({ key }) })]);

      // Audited as in doubt by the gateway that found it in flight (the killed one wrote nothing).
      const audit = async () => {
        const out = await bosun(['audit', '--run', runId, '--json']);
        expect(out.code, out.stderr).toBe(0);
        return (JSON.parse(out.stdout) as { key: string; status: string }[]).filter((e) => e.key === key).map((e) => e.status);
      };
      expect(await audit()).toEqual(['in-doubt']);

      const show = await bosun(['runs', 'show', runId]);
      expect(show.code).toBe(0);
      expect(show.stdout).toContain('in doubt (1)');
      expect(show.stdout).toContain(key);

      const ack = await bosun(['ack', key, '--retry', '--by', 'chaos-test']);
      expect(ack.code, ack.stderr).toBe(0);
      expect(logged('restart_pod')).toBe(2);
      const record = await ctx.redis.hgetall(`${ctx.prefix}:toolcall:${key}`);
      expect(record.state).toBe('done');
      expect(JSON.parse(record.result!)).toMatchObject({ status: 'ok', isError: false });
      expect(await audit()).toEqual(['ok', 'in-doubt']); // newest first
      const resolved = (await client.deadLetters()).find((d) => d.kind === 'in-doubt');
      expect(resolved?.resolution).toMatchObject({ action: 'retry', by: 'chaos-test' });
      // Resolved once: a second retry is refused.
      expect((await bosun(['ack', key, '--retry'])).code).toBe(1);
      expect(logged('restart_pod')).toBe(2);

      await client.close();
    }, 120_000);
  },
);
