import { describe, expect, it } from 'vitest';
import { TaskState, type StreamResponse } from '@a2a-js/sdk';
import type { A2aTaskRecord, RunEvent, RunResult } from '@bosun/contract';
import type { FollowStep } from './follow.js';
import { RunStream, type RunEvents } from './stream.js';
import { stateOf, type RunView } from './view.js';

// The stream against in-memory ports: a run whose views are scripted and whose events are a list.

const record: A2aTaskRecord = {
  v: 1,
  tenant: 't',
  taskId: 'r1',
  runId: 'r1',
  incidentId: 'i1',
  contextId: 'c1',
  messageId: 'm1',
  createdAt: '2030-01-01T00:00:00.000Z',
  history: [],
};
const result: RunResult = {
  v: 1,
  runId: 'r1',
  incidentId: 'i1',
  status: 'completed',
  answer: 'all good',
  specialists: [],
  stalled: 0,
  startedAt: '2030-01-01T00:00:01.000Z',
  finishedAt: '2030-01-01T00:00:09.000Z',
};
const at = (s: number) => `2030-01-01T00:00:0${s}.000Z`;
const event = (seq: number, type: RunEvent['type'], data: Record<string, unknown> = {}, agent?: string): RunEvent => ({
  v: 1,
  type,
  runId: 'r1',
  incidentId: 'i1',
  seq,
  at: at(seq),
  data,
  ...(agent ? { agent } : {}),
});
const working: RunView = { jobState: 'active', since: at(1), processed: true };
const done: RunView = { jobState: 'completed', result, since: result.finishedAt, processed: true };

/** A stream over `events`, whose run is seen as `views` (the last one repeats). */
function streamOf(views: RunView[], events: RunEvent[]): RunStream {
  let read = 0;
  const runs = { view: () => Promise.resolve(views[Math.min(read++, views.length - 1)]!) };
  const follow: RunEvents = async function* (): AsyncGenerator<FollowStep> {
    for (const e of events) yield { kind: 'event', event: e };
    yield { kind: 'tick' };
  };
  return new RunStream({ runs, events: follow });
}

const collect = async (s: AsyncIterable<StreamResponse>) => {
  const out: StreamResponse[] = [];
  for await (const r of s) out.push(r);
  return out;
};
const statuses = (rs: StreamResponse[]) => rs.flatMap((r) => (r.payload?.$case === 'statusUpdate' ? [r.payload.value] : []));

const steps = [
  event(1, 'run.started'),
  event(2, 'run.routed', { specialists: ['kubernetes'] }),
  event(3, 'agent.started', {}, 'kubernetes'),
  event(4, 'tool.started', { tool: 'demo__get_pods' }, 'kubernetes'),
  event(5, 'agent.completed', {}, 'kubernetes'),
  event(6, 'run.completed'),
];

describe('a task stream', () => {
  it('a run that ends before the stream has read its events: every step still comes, then the artifacts and the end', async () => {
    // Working when the stream opens, over at every read after: the bug was to end at the first such read.
    const out = await collect(streamOf([working, done], steps).follow(record));
    const shown = statuses(out);
    const texts = shown.map((s) => (s.status?.message?.parts[0]?.content?.$case === 'text' ? s.status.message.parts[0].content.value : ''));
    expect(texts.slice(0, 5)).toEqual([
      'run started',
      'routed to kubernetes',
      'kubernetes: started',
      'kubernetes: calls demo__get_pods',
      'kubernetes: completed',
    ]);
    expect(shown.slice(0, 5).every((s) => s.status?.state === TaskState.TASK_STATE_WORKING)).toBe(true);
    expect(out.filter((r) => r.payload?.$case === 'artifactUpdate')).toHaveLength(2);
    expect(shown.at(-1)?.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
  });

  it('never goes back to submitted once working, and its timestamps never go back', async () => {
    // The incident job moved back to wait (a delegation) and one read lost the processed flag.
    const back: RunView = { jobState: 'waiting', since: at(0) };
    const out = await collect(streamOf([working, back, back, working, back, done], steps).follow(record));
    const shown = statuses(out);
    const states = shown.map((s) => s.status?.state);
    expect(states.indexOf(TaskState.TASK_STATE_SUBMITTED)).toBe(-1);
    const times = shown.map((s) => Date.parse(s.status!.timestamp!));
    expect([...times].sort((a, b) => a - b)).toEqual(times);
    expect(shown.at(-1)?.status?.timestamp).toBe(result.finishedAt);
  });

  it('a task already ended is the task alone, stamped when it ended', async () => {
    const out = await collect(streamOf([done], steps).follow(record));
    expect(out).toHaveLength(1);
    expect(out[0]!.payload?.$case === 'task' && out[0]!.payload.value.status?.timestamp).toBe(result.finishedAt);
  });
});

describe('a run’s state', () => {
  it('a job waiting or delayed again after a coordinator took it up is working, not submitted', () => {
    expect(stateOf({ jobState: 'delayed', since: at(1), processed: true })).toBe(TaskState.TASK_STATE_WORKING);
    expect(stateOf({ jobState: 'waiting', since: at(1), processed: true })).toBe(TaskState.TASK_STATE_WORKING);
    expect(stateOf({ jobState: 'waiting', since: at(1) })).toBe(TaskState.TASK_STATE_SUBMITTED);
  });
});
