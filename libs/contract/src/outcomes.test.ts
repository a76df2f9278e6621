import { describe, expect, it } from 'vitest';

import { errorMessage } from './errors.js';
import { TaskCheckpoint } from './task-checkpoint.js';
import { TaskResult, ToolCallResult, taskEndReason } from './schemas.js';
import { ToolCallRecord, resolvedResult } from './tool-record.js';
import { abortable, sleep } from './time.js';

// Outcomes as data (additive in v1): `TaskResult.reason` and `ToolCallResult.code`. Results
// stored before the fields existed still parse, and read by their structure, never their text.

const oldTask = { v: 1, taskId: 't1', agent: 'kubernetes', status: 'stalled', output: {}, attempts: 1, error: 'cancelled' };
const oldCall = {
  v: 1,
  key: 'k1',
  tool: 'demo__restart_pod',
  status: 'error',
  isError: true,
  text: '',
  error: 'IN DOUBT: lost',
  inDoubt: true,
};

describe('structured outcomes', () => {
  it('parses task and tool-call results written before reason and code, in a checkpoint and a record too', () => {
    expect(TaskResult.parse(oldTask).reason).toBeUndefined();
    expect(ToolCallResult.parse(oldCall).code).toBeUndefined();
    const ckpt = {
      v: 1,
      taskId: 't1',
      step: 2,
      toolRounds: 1,
      invalidOutputs: 0,
      askedToFinish: false,
      messages: [{ role: 'user', text: 'look' }],
      result: oldTask,
    };
    expect(TaskCheckpoint.parse(ckpt, 'task:t1')?.result).toMatchObject({ status: 'stalled', error: 'cancelled' });
    const record = ToolCallRecord.parse({ state: 'done', tool: 'demo__restart_pod', result: JSON.stringify(oldCall) });
    expect(record.result).toMatchObject({ status: 'error', inDoubt: true });
  });

  it("reads a task checkpoint's result alone, without the conversation, and refuses one of another version or a bad result", () => {
    const ckpt = { v: 1, taskId: 't1', messages: 'not checked here', result: oldTask };
    expect(TaskCheckpoint.resultOf(ckpt, 'task:t1')).toMatchObject({ status: 'stalled', error: 'cancelled' });
    expect(TaskCheckpoint.resultOf({ v: 1, taskId: 't1' }, 'task:t1')).toBeUndefined();
    expect(TaskCheckpoint.resultOf(null, 'task:t1')).toBeNull();
    expect(() => TaskCheckpoint.resultOf({ ...ckpt, v: 2 }, 'task:t1')).toThrow(/checkpoint task:t1 cannot be used: v:/);
    expect(() => TaskCheckpoint.resultOf({ ...ckpt, result: { ...oldTask, status: 'maybe' } }, 'task:t1')).toThrow(/result\.status/);
    // The whole parse still refuses what resultOf does not look at.
    expect(() => TaskCheckpoint.parse(ckpt, 'task:t1')).toThrow(/cannot be used/);
  });

  it('refuses a reason or a code outside the contract', () => {
    expect(TaskResult.safeParse({ ...oldTask, reason: 'gave_up' }).success).toBe(false);
    expect(ToolCallResult.safeParse({ ...oldCall, code: 'oops' }).success).toBe(false);
  });

  it('reads why a task ended from its reason, else from its status and transfer: never from its error text', () => {
    expect(taskEndReason({ status: 'stalled', reason: 'budget' })).toBe('budget');
    expect(taskEndReason({ status: 'completed' })).toBe('completed');
    expect(taskEndReason({ status: 'failed' })).toBe('failure');
    expect(taskEndReason({ status: 'stalled', transfer: { agent: 'database', reason: '' } })).toBe('transfer');
    // The text of an old result says "cancelled", but text is not read.
    expect(taskEndReason(TaskResult.parse(oldTask))).toBe('stall');
  });

  it("gives an operator's resolution a code: skip is refused, done has none", () => {
    expect(resolvedResult('k', 't', 'skip').code).toBe('refused');
    expect(resolvedResult('k', 't', 'done').code).toBeUndefined();
  });
});

describe('errorMessage', () => {
  it("is an Error's message, or the thrown value as text", () => {
    expect(errorMessage(new Error('boom'))).toBe('boom');
    expect(errorMessage('plain')).toBe('plain');
    expect(errorMessage(42)).toBe('42');
  });
});

describe('sleep', () => {
  it('waits the whole time when nothing aborts it', async () => {
    expect(await sleep(5)).toBe(true);
  });

  it('ends at once when its signal aborts, and does not start for an aborted one', async () => {
    const controller = new AbortController();
    const started = Date.now();
    const waiting = sleep(60_000, controller.signal);
    controller.abort();
    expect(await waiting).toBe(false);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(await sleep(60_000, controller.signal)).toBe(false);
  });
});

describe('abortable', () => {
  it("is the work's outcome when nothing aborts, and an AbortError at once when the signal does", async () => {
    expect(await abortable(Promise.resolve(7), new AbortController().signal, 'w')).toBe(7);
    const controller = new AbortController();
    const waiting = abortable(new Promise<never>(() => undefined), controller.signal, 'the answer of k1');
    controller.abort('drain');
    await expect(waiting).rejects.toMatchObject({
      name: 'AbortError',
      message: 'the answer of k1: stopped waiting (aborted)',
      cause: 'drain',
    });
    await expect(abortable(Promise.resolve(1), controller.signal, 'late')).rejects.toMatchObject({ name: 'AbortError' });
  });
});
