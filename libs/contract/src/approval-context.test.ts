import { describe, expect, it } from 'vitest';
import { APPROVAL_CONTEXT_LIMITS, findingText, runSpecialists, tasksToRead, type TaskRead } from './approval-context.js';
import type { RunCheckpoint } from './run-state.js';
import type { TaskCheckpointData } from './task-checkpoint.js';

// The run's other specialists as an approval shows them (issue 23 item 3): derived from the
// run's checkpoint, each with its status and last finding, cut and redacted.

const result = (taskId: string, agent: string, over: Record<string, unknown> = {}) => ({
  v: 1 as const,
  taskId,
  agent,
  status: 'completed' as const,
  output: { summary: `${agent} found it` },
  attempts: 1,
  reason: 'completed' as const,
  ...over,
});

function run(delegations: RunCheckpoint['delegations']): RunCheckpoint {
  return {
    v: 1,
    runId: 'r1',
    incidentId: 'inc-1',
    startedAt: '2026-01-01T00:00:00.000Z',
    deadlineAt: '2026-01-01T00:30:00.000Z',
    jobId: 'inc-1',
    mode: 'route',
    phase: 'waiting',
    round: 0,
    delegations,
    messages: [],
  };
}

const d = (taskId: string, agent: string, extra: Partial<RunCheckpoint['delegations'][number]> = {}) => ({
  taskId,
  agent,
  round: 0,
  task: 'look',
  ...extra,
});

function task(taskId: string, over: Partial<TaskCheckpointData> = {}): TaskCheckpointData {
  return {
    v: 1,
    taskId,
    step: 2,
    toolRounds: 1,
    invalidOutputs: 0,
    askedToFinish: false,
    messages: [
      { role: 'user', text: 'look' },
      { role: 'model', text: '', calls: [{ id: 'c1', name: 'demo__get_logs', args: {} }] },
      { role: 'tool', responses: [{ id: 'c1', name: 'demo__get_logs', output: 'connection pool exhausted' }] },
    ],
    ...over,
  };
}

describe('runSpecialists', () => {
  it('lists every delegation but the asking task, with its status and last finding', () => {
    const ckpt = run([
      d('t-k8s', 'kubernetes'),
      d('t-db', 'database', { result: result('t-db', 'database', { output: { summary: 'the pool is exhausted', apiKey: 'sk-123' } }) }),
      d('t-net', 'network'),
      d('t-q', 'queue'),
      d('t-log', 'logs', {
        result: result('t-log', 'logs', { status: 'stalled', reason: 'stall', output: null, error: 'ended its turn' }),
      }),
    ]);
    const tasks = new Map<string, TaskRead>([
      ['t-net', task('t-net')],
      ['t-q', null],
    ]);
    expect(tasksToRead(ckpt, 't-k8s')).toEqual(['t-net', 't-q']);
    expect(runSpecialists(ckpt, 't-k8s', tasks)).toEqual([
      { taskId: 't-db', agent: 'database', status: 'completed', reason: 'completed', finding: 'the pool is exhausted' },
      { taskId: 't-net', agent: 'network', status: 'running', finding: 'demo__get_logs: connection pool exhausted' },
      { taskId: 't-q', agent: 'queue', status: 'queued' },
      { taskId: 't-log', agent: 'logs', status: 'stalled', reason: 'stall', finding: 'ended its turn' },
    ]);
  });

  it('reads an output stored in the task checkpoint, and marks a task waiting for approval or unreadable', () => {
    const ckpt = run([
      d('t-db', 'database', { result: result('t-db', 'database', { output: null, outputIn: 'checkpoint' }) }),
      d('t-w', 'web'),
      d('t-bad', 'bad'),
    ]);
    const tasks = new Map<string, TaskRead>([
      ['t-db', task('t-db', { result: result('t-db', 'database', { output: 'replica lag 40 s' }) })],
      ['t-w', task('t-w', { pending: { kind: 'approval', step: 2, approvalId: 'ap-t-w-s2', at: '2026-01-01T00:01:00.000Z' } })],
      ['t-bad', { error: 'checkpoint task:t-bad cannot be used: v: expected 1' }],
    ]);
    expect(tasksToRead(ckpt, 'none')).toEqual(['t-db', 't-w', 't-bad']);
    expect(runSpecialists(ckpt, 'none', tasks)).toMatchObject([
      { agent: 'database', status: 'completed', finding: 'replica lag 40 s' },
      { agent: 'web', status: 'waiting for approval', finding: 'demo__get_logs: connection pool exhausted' },
      { agent: 'bad', status: 'unknown' },
    ]);
  });

  it('keeps the latest specialists only', () => {
    const many = Array.from({ length: APPROVAL_CONTEXT_LIMITS.specialists + 5 }, (_, i) =>
      d(`t${i}`, `a${i}`, { result: result(`t${i}`, `a${i}`) }),
    );
    const out = runSpecialists(run(many), 'x', new Map());
    expect(out).toHaveLength(APPROVAL_CONTEXT_LIMITS.specialists);
    expect(out[0]!.agent).toBe('a5');
  });
});

describe('findingText', () => {
  it('takes a summary field, else the whole output as JSON, redacted and cut', () => {
    expect(findingText({ diagnosis: 'disk full', extra: 1 })).toBe('disk full');
    expect(findingText({ pods: 3, token: 'abc' })).toBe('{"pods":3,"token":"[redacted]"}');
    expect(findingText(null)).toBeUndefined();
    expect(findingText('   ')).toBeUndefined();
    const long = findingText('x'.repeat(1000))!;
    expect(long).toHaveLength(APPROVAL_CONTEXT_LIMITS.finding);
    expect(long.endsWith('…')).toBe(true);
  });
});
