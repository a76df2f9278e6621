/**
 * A task's updates as an A2A stream: the task first, then a status update for each step of the
 * run (from its NATS events, replayed from JetStream), then, once the run has ended, its
 * artifacts and the final status. Used by `SendStreamingMessage`, `SubscribeToTask` and the
 * blocking `SendMessage`.
 *
 * Two promises: a task's state never goes back (never `submitted` after `working`, nothing after
 * a final state), and every documented step the run's events carry reaches the stream, even when
 * the run ends before the stream has read them (the stream ends at the run's last event, not at
 * the first read that finds the run over).
 */
import { sleep } from '@bosun/contract';
import { TaskState, type StreamResponse, type TaskStatusUpdateEvent } from '@a2a-js/sdk';
import type { A2aTaskRecord, RunEvent } from '@bosun/contract';
import type { FollowStep } from './follow.js';
import type { RunReader } from './runs.js';
import { agentMessage, artifactsOf, isTerminal, stateOf, statusMessage, taskOf, textPart, type RunView } from './view.js';

/** How long a stream waits, after `run.completed`, for the incident job to hold the result. */
const SETTLE_MS = 15_000;
/** The events that end a run: after one, the stream gives the artifacts and the final status. */
const END_EVENTS = new Set(['run.completed', 'run.failed']);

/** A run's events, from its first, with a tick between them when nothing comes (see `followRun`). */
export type RunEvents = (runId: string, signal: AbortSignal) => AsyncIterable<FollowStep>;

/** The text a run event shows in a working status update; undefined for events not shown. */
export function progressText(e: RunEvent): string | undefined {
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

/** The order of states: a stream shows no state lower than one it has shown. */
function rank(state: TaskState): number {
  if (isTerminal(state)) return 2;
  return state === TaskState.TASK_STATE_SUBMITTED || state === TaskState.TASK_STATE_UNSPECIFIED ? 0 : 1;
}

/** The later of two ISO times. */
const later = (a: string, b: string): string => (Date.parse(b) > Date.parse(a) ? b : a);

/** One step of the run, as a status update shows it. */
interface Step {
  text: string;
  event: RunEvent;
}

/** What one stream has shown so far. */
interface Shown {
  state: TaskState;
  at: string;
}

export class RunStream {
  constructor(private readonly deps: { runs: Pick<RunReader, 'view'>; events: RunEvents }) {}

  /**
   * A status update. `text` and `event`: a step of the run, shown as an agent message; without
   * them the status message of `view`. The state is at least the one shown before.
   */
  private status(record: A2aTaskRecord, shown: Shown, at: { view: RunView; state: TaskState; step?: Step }): StreamResponse {
    const { view, state, step } = at;
    const message =
      step && !isTerminal(state) && state !== TaskState.TASK_STATE_INPUT_REQUIRED
        ? agentMessage(record, `event-${step.event.seq}`, [textPart(step.text)], { event: step.event.type, seq: step.event.seq })
        : statusMessage(record, view);
    shown.state = state;
    shown.at = later(shown.at, step ? step.event.at : view.since);
    const value: TaskStatusUpdateEvent = {
      taskId: record.taskId,
      contextId: record.contextId,
      status: { state, message, timestamp: shown.at },
      metadata: step ? { runId: record.runId, event: step.event.type, seq: step.event.seq } : { runId: record.runId },
    };
    return { payload: { $case: 'statusUpdate', value } };
  }

  /** The run once its job holds the outcome (the coordinator emits `run.completed` just before it returns). */
  async settled(record: A2aTaskRecord): Promise<RunView> {
    const deadline = Date.now() + SETTLE_MS;
    let view = await this.deps.runs.view(record);
    while (!isTerminal(stateOf(view)) && Date.now() < deadline) {
      await sleep(100);
      view = await this.deps.runs.view(record);
    }
    return view;
  }

  private *finish(record: A2aTaskRecord, shown: Shown, view: RunView): Generator<StreamResponse> {
    for (const artifact of artifactsOf(view.result)) {
      yield {
        payload: {
          $case: 'artifactUpdate',
          value: { taskId: record.taskId, contextId: record.contextId, artifact, append: false, lastChunk: true, metadata: undefined },
        },
      };
    }
    yield this.status(record, shown, { view, state: stateOf(view) });
  }

  /**
   * The task, then its updates until it ends (or `signal` aborts). A task already ended gives
   * the task alone, with its artifacts.
   */
  async *follow(record: A2aTaskRecord, signal?: AbortSignal): AsyncGenerator<StreamResponse, void, undefined> {
    let view = await this.deps.runs.view(record);
    const task = taskOf(record, view);
    yield { payload: { $case: 'task', value: task } };
    const shown: Shown = { state: stateOf(view), at: view.since };
    if (isTerminal(shown.state)) return;
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      for await (const step of this.deps.events(record.runId, stop.signal)) {
        if (step.kind === 'event' && END_EVENTS.has(step.event.type)) {
          yield* this.finish(record, shown, await this.settled(record));
          return;
        }
        view = await this.deps.runs.view(record);
        const now = stateOf(view);
        const text = step.kind === 'event' ? progressText(step.event) : undefined;
        const move = text !== undefined && step.kind === 'event' ? { text, event: step.event } : undefined;
        if (isTerminal(now)) {
          // The run is over, but the events it made before its end are still coming: show each
          // as the step it was, and end at its last event (or at a quiet tick, when it was lost).
          if (step.kind === 'tick') {
            yield* this.finish(record, shown, await this.settled(record));
            return;
          }
          if (move) {
            const state = rank(shown.state) === 0 ? TaskState.TASK_STATE_WORKING : shown.state;
            yield this.status(record, shown, { view, state, step: move });
          }
          continue;
        }
        const state = rank(now) < rank(shown.state) ? TaskState.TASK_STATE_WORKING : now;
        if (state !== shown.state || move) yield this.status(record, shown, { view, state, step: move });
      }
    } finally {
      signal?.removeEventListener('abort', onAbort);
      stop.abort();
    }
  }
}
