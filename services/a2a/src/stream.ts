/**
 * A task's updates as an A2A stream: the task first, then a status update for each step of the
 * run (from its NATS events, replayed from JetStream), then, once the run has ended, its
 * artifacts and the final status. Used by `SendStreamingMessage`, `SubscribeToTask` and the
 * blocking `SendMessage`.
 */
import { TaskState, type StreamResponse, type TaskStatusUpdateEvent } from '@a2a-js/sdk';
import type { A2aTaskRecord, RunEvent } from '@bosun/contract';
import type { NatsConnection } from '@nats-io/transport-node';
import { followRun } from './follow.js';
import type { RunReader } from './runs.js';
import { agentMessage, artifactsOf, isTerminal, stateOf, statusMessage, taskOf, textPart, type RunView } from './view.js';

/** How long a stream waits, after `run.completed`, for the incident job to hold the result. */
const SETTLE_MS = 15_000;

/** The text a run event shows in a working status update; undefined for events not shown. */
function progressText(e: RunEvent): string | undefined {
  const who = e.agent ? `${e.agent}: ` : '';
  const d = e.data;
  switch (e.type) {
    case 'run.started':
      return 'run started';
    case 'run.routed':
      return `routed to ${Array.isArray(d.specialists) ? d.specialists.join(', ') : '?'}`;
    case 'agent.delegated':
    case 'agent.started':
    case 'agent.completed':
      return `${who}${e.type.slice('agent.'.length)}`;
    case 'agent.stalled':
    case 'agent.failed':
      return `${who}INCOMPLETE (${e.type.slice('agent.'.length)}): ${typeof d.reason === 'string' ? d.reason : ''}`;
    case 'tool.started':
      return `${who}calls ${typeof d.tool === 'string' ? d.tool : '?'}`;
    case 'agent.progress':
      return `${who}remote agent ${typeof d.state === 'string' ? d.state : '?'}${typeof d.message === 'string' && d.message ? `: ${d.message}` : ''}`;
    case 'approval.resolved':
      return `${who}approval ${String(d.approvalId)} ${String(d.status)} by ${String(d.decidedBy)}`;
    default:
      return undefined;
  }
}

export class RunStream {
  constructor(private readonly deps: { runs: RunReader; nats: () => NatsConnection | null; prefix: string }) {}

  private status(record: A2aTaskRecord, view: RunView, text?: string, event?: RunEvent): StreamResponse {
    const state = stateOf(view);
    const message =
      text !== undefined && !isTerminal(state) && state !== TaskState.TASK_STATE_INPUT_REQUIRED
        ? agentMessage(record, `event-${event?.seq ?? 0}`, [textPart(text)], event ? { event: event.type, seq: event.seq } : undefined)
        : statusMessage(record, view);
    const value: TaskStatusUpdateEvent = {
      taskId: record.taskId,
      contextId: record.contextId,
      status: { state, message, timestamp: new Date().toISOString() },
      metadata: event ? { runId: record.runId, event: event.type, seq: event.seq } : { runId: record.runId },
    };
    return { payload: { $case: 'statusUpdate', value } };
  }

  /** The run once its job holds the outcome (the coordinator emits `run.completed` just before it returns). */
  async settled(record: A2aTaskRecord): Promise<RunView> {
    const deadline = Date.now() + SETTLE_MS;
    let view = await this.deps.runs.view(record);
    while (!isTerminal(stateOf(view)) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      view = await this.deps.runs.view(record);
    }
    return view;
  }

  private *finish(record: A2aTaskRecord, view: RunView): Generator<StreamResponse> {
    for (const artifact of artifactsOf(view.result)) {
      yield {
        payload: {
          $case: 'artifactUpdate',
          value: { taskId: record.taskId, contextId: record.contextId, artifact, append: false, lastChunk: true, metadata: undefined },
        },
      };
    }
    yield this.status(record, view);
  }

  /**
   * The task, then its updates until it ends (or `signal` aborts). A task already ended gives
   * the task alone, with its artifacts.
   */
  async *follow(record: A2aTaskRecord, signal?: AbortSignal): AsyncGenerator<StreamResponse, void, undefined> {
    let view = await this.deps.runs.view(record);
    yield { payload: { $case: 'task', value: taskOf(record, view) } };
    if (isTerminal(stateOf(view))) return;
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    let last = stateOf(view);
    try {
      for await (const step of followRun(this.deps.nats, this.deps.prefix, record.runId, stop.signal)) {
        const ended = step.kind === 'event' && (step.event.type === 'run.completed' || step.event.type === 'run.failed');
        view = ended ? await this.settled(record) : await this.deps.runs.view(record);
        const state = stateOf(view);
        const text = step.kind === 'event' ? progressText(step.event) : undefined;
        if (isTerminal(state)) {
          // An event the run made while it was still working is shown as such, then the end.
          if (text !== undefined && !ended) yield this.status(record, { jobState: 'active' }, text, (step as { event: RunEvent }).event);
          yield* this.finish(record, view);
          return;
        }
        if (state !== last || text !== undefined) yield this.status(record, view, text, step.kind === 'event' ? step.event : undefined);
        last = state;
      }
    } finally {
      signal?.removeEventListener('abort', onAbort);
      stop.abort();
    }
  }
}
