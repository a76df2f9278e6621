import { describe, expect, it } from 'vitest';
import {
  COORDINATOR_TIMERS_QUEUE,
  DEAD_LETTER_QUEUE,
  INCIDENTS_QUEUE,
  TOOLS_QUEUE,
  runIdFor,
  specialistQueue,
  taskIdFor,
} from '@bosun/contract';
import { keys } from './keys.js';

const PREFIX = '{bosun}';
const RUN = runIdFor('inc-1', 1_700_000_000_000);
const TASK = taskIdFor(RUN, 0, 'kubernetes');

/** Every key of `keys`, built with sample arguments. */
const all: Record<keyof typeof keys, string> = {
  seq: keys.seq(PREFIX, RUN),
  checkpoint: keys.checkpoint(PREFIX, `run:${RUN}`),
  catalog: keys.catalog(PREFIX),
  toolCall: keys.toolCall(PREFIX, `${TASK}-s1-c0`),
  events: keys.events(PREFIX),
  cancel: keys.cancel(PREFIX, TASK),
  cancelRun: keys.cancelRun(PREFIX, RUN),
  republish: keys.republish(PREFIX, 'inc-1'),
  approval: keys.approval(PREFIX, 'a1'),
  approvalDecision: keys.approvalDecision(PREFIX, 'a1'),
  approvalVotes: keys.approvalVotes(PREFIX, 'a1'),
  approvalViewers: keys.approvalViewers(PREFIX, 'a1'),
  slackMessageUpdated: keys.slackMessageUpdated(PREFIX, 'a1'),
  approvalsPending: keys.approvalsPending(PREFIX),
  approvalsOfRun: keys.approvalsOfRun(PREFIX, RUN),
  audit: keys.audit(PREFIX),
  deadLetterSeen: keys.deadLetterSeen(PREFIX, 'd1'),
  degraded: keys.degraded(PREFIX),
  inDoubt: keys.inDoubt(PREFIX),
  usage: keys.usage(PREFIX, RUN),
  rateLimit: keys.rateLimit(PREFIX, 'model'),
};

describe('keys', () => {
  it('puts every key under <prefix>: (one hash tag on Redis Cluster)', () => {
    for (const key of Object.values(all)) expect(key.startsWith(`${PREFIX}:`)).toBe(true);
  });

  it("never uses a queue's name as its first segment, so no key lands among BullMQ's <prefix>:<queue>:… keys", () => {
    const queues = [INCIDENTS_QUEUE, TOOLS_QUEUE, DEAD_LETTER_QUEUE, COORDINATOR_TIMERS_QUEUE, specialistQueue('kubernetes')];
    const segments = new Set(Object.values(all).map((k) => k.slice(PREFIX.length + 1).split(':')[0]));
    for (const q of queues) expect(segments.has(q)).toBe(false);
  });

  it('gives every kind of key its own name: no two builders make the same key', () => {
    expect(new Set(Object.values(all)).size).toBe(Object.keys(all).length);
  });

  it("keeps a task's cancel flag and its run's cancellation apart", () => {
    expect(keys.cancel(PREFIX, TASK)).toBe(`${PREFIX}:cancel:${TASK}`);
    expect(keys.cancelRun(PREFIX, RUN)).toBe(`${PREFIX}:cancel:run:${RUN}`);
    // A task id starts with its run id (r + hex), never with "run:".
    expect(keys.cancel(PREFIX, TASK)).not.toBe(keys.cancelRun(PREFIX, RUN));
    expect(TASK.startsWith('run:')).toBe(false);
  });

  it('names the keys that the docs and the CLI read', () => {
    expect(all.checkpoint).toBe(`${PREFIX}:ckpt:run:${RUN}`);
    expect(all.events).toBe(`${PREFIX}:stats:events`);
    expect(all.degraded).toBe(`${PREFIX}:stats:degraded`);
    expect(all.toolCall).toBe(`${PREFIX}:toolcall:${TASK}-s1-c0`);
  });
});
