import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { UnrecoverableError, type Job } from 'bullmq';
import { trace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import type { RunResult } from '@bosun/contract';
import { TraceNotes } from '@bosun/transport';
import { openContext, type TestContext } from '../../../test/helpers/context.js';
import { carriedIncidentId, inRunSpan } from './run-trace.js';

// The run's span names the incident by the id the incident carries, not by its job id: a poison
// job (no incident id, or one that is not an id) has no `bosun.incident.id`, and its job id is
// its `messaging.message.id` (docs/observability.md, "Traces"). Spans go to an in-memory exporter.

let ctx: TestContext;
let notes: TraceNotes;
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

/** One pass over a job-like object; a pass that rejects the job throws as the coordinator's does. */
async function pass(id: string, data: unknown, rejected = true): Promise<ReadableSpan> {
  exporter.reset();
  const job = { id, timestamp: Date.now(), data } as unknown as Job;
  const run = inRunSpan(notes, job, () =>
    rejected
      ? Promise.reject(new UnrecoverableError('invalid incident'))
      : Promise.resolve({ status: 'completed', stalled: [] } as unknown as RunResult),
  );
  if (rejected) await expect(run).rejects.toThrow('invalid incident');
  else await run;
  const spans = exporter.getFinishedSpans().filter((s) => s.name === 'run');
  expect(spans).toHaveLength(1);
  return spans[0]!;
}

beforeAll(async () => {
  trace.setGlobalTracerProvider(provider);
  ctx = await openContext('run-trace');
  notes = new TraceNotes({ redis: ctx.redis, prefix: ctx.prefix });
});

beforeEach(() => exporter.reset());

afterAll(async () => {
  await ctx?.close();
  await provider.shutdown();
  trace.disable();
});

describe('the run span of an incident job', () => {
  it('names the incident it carries', async () => {
    const span = await pass('inc-7', { v: 1, id: 'inc-7', source: 'test', reason: 'x', summary: 'y' }, false);
    expect(span.attributes).toMatchObject({ 'bosun.incident.id': 'inc-7', 'messaging.message.id': 'inc-7' });
  });

  it('of a poison job without an incident id: no bosun.incident.id, the job id as the message id', async () => {
    const span = await pass('poison-job-1', { summary: 'no id at all' });
    expect(span.attributes['bosun.incident.id']).toBeUndefined();
    expect(span.attributes['messaging.message.id']).toBe('poison-job-1');
  });

  it('of a job whose data carries another id than its job id, or one that is not an id', async () => {
    expect((await pass('job-9', { id: 'inc-real', summary: 1 })).attributes['bosun.incident.id']).toBe('inc-real');
    expect((await pass('job-10', { id: '../../etc/passwd' })).attributes['bosun.incident.id']).toBeUndefined();
    expect(carriedIncidentId({ id: 42 })).toBeUndefined();
    expect(carriedIncidentId('inc-1')).toBeUndefined();
  });
});
