import { describe, expect, it } from 'vitest';
import type { RunCheckpoint, TaskResult } from '@bosun/contract';
import { MemoryEventSink } from '@bosun/transport';
import type { RunContext } from './run-parts.js';
import { transferRound } from './run-transfer.js';

const RUN_ID = 'r0123456789abcdef0aaa';

function transferred(taskId: string, agent: string): TaskResult {
  return { v: 1, taskId, agent: 'coder', status: 'stalled', output: {}, attempts: 1, transfer: { agent, reason: 'pods' } };
}

function ctx(maxRounds: number, round = 0): { ctx: RunContext; events: MemoryEventSink } {
  const events = new MemoryEventSink();
  const state: RunCheckpoint = {
    v: 1,
    runId: RUN_ID,
    incidentId: 'inc-t',
    startedAt: new Date(0).toISOString(),
    deadlineAt: new Date(60_000).toISOString(),
    jobId: 'inc-t',
    mode: 'route',
    phase: 'waiting',
    round,
    routed: ['coder'],
    delegations: [{ taskId: 't0', agent: 'coder', round, task: 'x', result: transferred('t0', 'kubernetes') }],
    messages: [],
  };
  const deps = { config: { coordinator: { maxRounds } }, events } as unknown as RunContext['deps'];
  return { ctx: { deps, state }, events };
}

describe('transferRound', () => {
  it('turns a transfer into a delegation of the next round that supersedes it', () => {
    const { ctx: c, events } = ctx(3);
    expect(transferRound(c)).toBe(true);
    expect(c.state.round).toBe(1);
    expect(c.state.delegations[1]).toMatchObject({ agent: 'kubernetes', round: 1, transferOf: 't0' });
    expect(c.state.delegations[1]?.task).toContain('coder handed this incident over to you: pods');
    expect(events.events.map((e) => [e.type, e.data.transfer])).toEqual([['run.routed', true]]);
    // Done once: the same transfer does not make another round.
    expect(transferRound(c)).toBe(false);
  });

  it('stays within maxRounds', () => {
    const { ctx: c } = ctx(2, 1);
    expect(transferRound(c)).toBe(false);
    expect(c.state.delegations).toHaveLength(1);
  });
});
