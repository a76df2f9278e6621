import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STALL_MARKER } from '@bosun/contract';
import { callLog, startClusterTest, type CallLog, type ClusterTest, type ServiceProcess } from '../helpers/index.js';

// A task budget holds across a SIGKILL: the specialist running a task that would make 10 tool
// calls with a budget of 3 is killed during its second call; another process resumes the task
// from its checkpoint, which carries what was spent. The task still stops after 3 calls in all
// (the one in flight at the kill counted once), as an INCOMPLETE `budget` part with a dead letter.

let t: ClusterTest;
let toolLog: CallLog;

beforeAll(async () => {
  t = await startClusterTest(
    'budget-kill',
    (config, c) => {
      toolLog = callLog(join(c.dir, 'calls.jsonl'));
      config.mcpServers.demo.env = { DEMO_MCP_CALL_LOG: toolLog.path, DEMO_MCP_SLOW_MS: '800' };
      config.workers = { lockDurationMs: 3_000, stalledIntervalMs: 1_000, maxStalledCount: 10 };
      config.specialists.kubernetes.budget = { toolCalls: 3 };
    },
    { specialists: 2 },
  );
});

afterAll(async () => {
  await t?.close();
});

/** The process running task `taskId` now (its job's worker, or the serve process of a local task). */
function specialistHolding(taskId: string): Promise<ServiceProcess | undefined> {
  return t.cluster.taskHolder(t.ctx.redis, t.ctx.prefix, 'kubernetes', taskId);
}

describe('a task budget across a SIGKILL', () => {
  it('stops after 3 of 10 tool calls in all, although the task was resumed in another process', async () => {
    const calls = Array.from({ length: 10 }, (_, i) => ({ tool: 'demo__get_logs', args: { service: 'checkout', lines: i + 1 } }));
    const { job, runId } = await t.client.publish({
      id: 'budget-kill-1',
      source: 'chaos',
      reason: 'PodCrashLooping',
      summary: 'restarts',
      labels: { service: 'checkout' },
      payload: { fake: { calls: { kubernetes: calls } } },
    });
    const second = await t.client.events.waitFor(
      (e) => e.runId === runId && e.type === 'tool.started' && /-s2-c0$/.test(String(e.data.key)),
      30_000,
      'the second tool call',
    );
    const taskId = String(second.data.key).replace(/-s\d+-c\d+$/, '');
    const holder = await specialistHolding(taskId);
    expect(holder).toBeDefined();
    holder!.kill('SIGKILL');

    const result = await t.client.result(job, 90_000);
    expect(result.status).toBe('partial');
    const part = result.specialists[0]!;
    expect(part).toMatchObject({ name: 'kubernetes', status: 'stalled' });
    expect(JSON.stringify(part.output)).toContain(STALL_MARKER);
    expect(JSON.stringify(part.output)).toContain(
      'stopped at its budget: 1 more tool call(s) would cross the limit of 3 tool calls (3 made)',
    );
    expect(part.usage?.toolCalls).toBe(3);
    const lines = toolLog.calls('get_logs').map((c) => c.args.lines);
    if (t.cluster.layout === 'split') {
      // The MCP server ran 3 calls in all: the one in flight at the kill was answered from its record.
      expect(lines).toEqual([1, 2, 3]);
    } else {
      // Co-located, the gateway died with the task: the read-only call it found in flight was
      // sent again (a mutating one would be in doubt); the server saw it once or twice.
      expect(lines.filter((n) => n !== 2)).toEqual([1, 3]);
      expect(lines.filter((n) => n === 2).length).toBeGreaterThanOrEqual(1);
      expect(lines.filter((n) => n === 2).length).toBeLessThanOrEqual(2);
    }
    const events = await t.client.events.complete(runId);
    const keys = events.filter((e) => e.type === 'tool.started').map((e) => String(e.data.key));
    expect(new Set(keys)).toEqual(new Set([`${taskId}-s1-c0`, `${taskId}-s2-c0`, `${taskId}-s3-c0`]));
    expect(events.find((e) => e.type === 'agent.stalled')?.data).toMatchObject({ kind: 'budget', marker: STALL_MARKER });
    const letters = await t.client.deadLetters(runId);
    expect(letters.map((d) => [d.kind, d.taskId])).toEqual([['budget', taskId]]);
    // The process that resumed it was another one.
    expect(t.cluster.hosts('specialist')).toHaveLength(1);
  });
});
