import { describe, expect, it } from 'vitest';

import { RunCheckpoint, TimerJob, runCancelKey, runCheckpointId, runCheckpointKey, taskCancelKey, timerJobId } from './run-state.js';

describe('timer jobs', () => {
  it('have one job id per timer, so that adding one twice adds it once', () => {
    expect(timerJobId({ kind: 'run-timer', runId: 'r1', at: 1700000065000 })).toBe('run-timer-r1-1700000065000');
    expect(timerJobId({ kind: 'run-timer', runId: 'r1', at: 1700000065000, again: 2 })).toBe('run-timer-r1-1700000065000-a2');
    expect(timerJobId({ kind: 'run-deadline', runId: 'r1' })).toBe('run-deadline-r1');
    expect(timerJobId({ kind: 'task-deadline', runId: 'r1', taskId: 'r1-d0-db' })).toBe('task-deadline-r1-d0-db');
    expect(timerJobId({ kind: 'task-deadline', runId: 'r1', taskId: 'r1-d0-db', moved: 2 })).toBe('task-deadline-r1-d0-db-m2');
    expect(timerJobId({ kind: 'retry-task', runId: 'r1', taskId: 'r1-d0-db' })).toBe('retry-task-r1-d0-db');
    expect(timerJobId({ kind: 'cancel-run', runId: 'r1' })).toBe('cancel-run-r1');
    expect(timerJobId({ kind: 'cancel-run', runId: 'r1', again: 3 })).toBe('cancel-run-r1-a3');
  });

  it('are parsed by kind: a task timer names its task, an unknown kind is refused', () => {
    expect(TimerJob.parse({ kind: 'retry-task', runId: 'r1', taskId: 't' })).toEqual({ kind: 'retry-task', runId: 'r1', taskId: 't' });
    expect(TimerJob.safeParse({ kind: 'task-deadline', runId: 'r1' }).success).toBe(false);
    expect(TimerJob.safeParse({ kind: 'wake-up', runId: 'r1' }).success).toBe(false);
  });
});

describe('run checkpoints and cancel keys', () => {
  it('name their keys under the prefix', () => {
    expect(runCheckpointId('r1')).toBe('run:r1');
    expect(runCheckpointKey('bosun', 'r1')).toBe('bosun:ckpt:run:r1');
    expect(taskCancelKey('{b}', 'r1-d0-db')).toBe('{b}:cancel:r1-d0-db');
    expect(runCancelKey('{b}', 'r1')).toBe('{b}:cancel:run:r1');
  });

  it('parse a run checkpoint and refuse one of another version, naming the field', () => {
    const ckpt = {
      v: 1,
      runId: 'r1',
      incidentId: 'inc-1',
      startedAt: '2026-01-01T00:00:00.000Z',
      deadlineAt: '2026-01-01T00:30:00.000Z',
      jobId: 'inc-1',
      mode: 'delegate',
      phase: 'waiting',
      round: 1,
      delegations: [{ taskId: 'r1-d0-db', agent: 'db', round: 1, callId: 'c1', task: 'look' }],
      messages: [
        { role: 'user', text: 'go' },
        { role: 'model', calls: [{ id: 'c1', name: 'delegate_db', args: { task: 'look' } }] },
      ],
      routed: ['db'],
    };
    expect(RunCheckpoint.parse(ckpt)).toEqual(ckpt);
    const bad = RunCheckpoint.safeParse({ ...ckpt, v: 2 });
    expect(bad.success).toBe(false);
    expect(bad.error?.issues[0]?.path).toEqual(['v']);
  });
});
