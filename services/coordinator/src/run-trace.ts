import { WaitingChildrenError, type Job } from 'bullmq';
import { INCIDENTS_QUEUE, INCIDENT_ID_PATTERN, runIdFor, type RunResult } from '@bosun/contract';
import { SpanKind, carriedContext, inSpan, type TraceNotes } from '@bosun/transport';

/**
 * Runs one pass of an incident job in its span. The first pass is the run's span (`run`), under
 * the publisher's span when the job carries a W3C `traceparent`. A later pass (after the children
 * finished, a deadline, or a crash) is a `run.resume` span under the first one, linked to the
 * pass before it, so the whole incident is one trace.
 */
export async function inRunSpan(notes: TraceNotes, job: Job, pass: () => Promise<RunResult>): Promise<RunResult> {
  const runId = runIdFor(String(job.id), job.timestamp);
  const { first, link } = await notes.previous(runId, 'pass');
  const parent = first ?? carriedContext(job.data);
  const incidentId = carriedIncidentId(job.data);
  const attributes = {
    'bosun.run.id': runId,
    ...(incidentId !== undefined ? { 'bosun.incident.id': incidentId } : {}),
    'messaging.system': 'bullmq',
    'messaging.destination.name': INCIDENTS_QUEUE,
    'messaging.message.id': String(job.id),
  };
  return inSpan(
    first ? 'run.resume' : 'run',
    {
      kind: SpanKind.CONSUMER,
      attributes,
      ...(parent ? { parent } : {}),
      ...(link ? { links: [link] } : {}),
      // Parked until the children finish: this pass ends, the run goes on in the next one.
      expected: (err) => err instanceof WaitingChildrenError,
    },
    async (span) => {
      await notes.note(runId, 'pass', span, first === undefined);
      const result = await pass();
      span.setAttributes({ 'bosun.run.status': result.status, 'bosun.run.stalled': result.stalled });
      return result;
    },
  );
}

/**
 * The incident id a job's data carries, when it is one (a string of the incident id's form); else
 * undefined. A poison job is not named by its job id as if that were its incident's: the span then
 * has no `bosun.incident.id` (its `messaging.message.id` is the job id).
 */
export function carriedIncidentId(data: unknown): string | undefined {
  const id = typeof data === 'object' && data !== null ? (data as { id?: unknown }).id : undefined;
  return typeof id === 'string' && INCIDENT_ID_PATTERN.test(id) ? id : undefined;
}
