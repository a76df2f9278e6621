import { DelayedError, type Job } from 'bullmq';
import { specialistQueue, type TaskJob, type TaskResult } from '@bosun/contract';
import { SpanKind, carriedContext, inSpan, spanEvent, type TraceNotes } from '@bosun/transport';

/**
 * Runs one attempt of a task job in its span (`invoke_agent <agent>`), under the delegation's span
 * whose context the job carries. An attempt after another (a retry, a wake-up after an approval,
 * a resume after its process died) is linked to the span of the attempt before it.
 */
export async function inTaskSpan(
  notes: TraceNotes | undefined,
  job: Job,
  task: TaskJob,
  attempt: () => Promise<TaskResult>,
): Promise<TaskResult> {
  const parent = carriedContext(task);
  const previous = notes && job.attemptsStarted > 1 ? await notes.previous(task.runId, task.taskId) : {};
  const attributes = {
    'gen_ai.operation.name': 'invoke_agent',
    'gen_ai.agent.name': task.agent,
    'bosun.run.id': task.runId,
    'bosun.task.id': task.taskId,
    'bosun.task.pickup': job.attemptsStarted,
    'messaging.system': 'bullmq',
    'messaging.destination.name': specialistQueue(task.agent),
  };
  return inSpan(
    `invoke_agent ${task.agent}`,
    {
      kind: SpanKind.CONSUMER,
      attributes,
      ...(parent ? { parent } : {}),
      ...(previous.link ? { links: [previous.link] } : {}),
      // Parked for an approval or handed back while draining: the attempt ends, the task goes on later.
      expected: (err) => err instanceof DelayedError,
    },
    async (span) => {
      await notes?.note(task.runId, task.taskId, span);
      try {
        const result = await attempt();
        span.setAttribute('bosun.task.status', result.status);
        return result;
      } catch (err) {
        if (err instanceof DelayedError) spanEvent('task.delayed');
        throw err;
      }
    },
  );
}
