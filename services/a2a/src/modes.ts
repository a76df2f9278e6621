/**
 * Run modes (`a2a.runModes`): whether a request is answered with a task or with one reply
 * message that collects the run. Free text and incident DataParts each have a mode; `dynamic`
 * answers with a message when the incident's reason is one of `messageReasons`.
 */
import { TaskState, type Message } from '@a2a-js/sdk';
import type { A2aConfig } from '@bosun/config';
import type { A2aTaskRecord, Incident } from '@bosun/contract';
import { agentMessage, dataPart, incompleteParts, statusMessage, stateOf, textPart, type RunView } from './view.js';

/** The mode of a new request: `message` or `task`. */
export function runModeOf(config: A2aConfig, message: Message, incident: Incident): 'message' | 'task' {
  const kind = message.parts.some((p) => p.content?.$case === 'data') ? 'data' : 'text';
  const mode = config.runModes[kind];
  if (mode !== 'dynamic') return mode;
  return config.runModes.messageReasons.includes(incident.reason) ? 'message' : 'task';
}

/** The one reply message of a `message`-mode request: the answer and the run result, or what the run waits for. */
export function replyOf(record: A2aTaskRecord, view: RunView): Message {
  const r = view.result;
  const metadata = { runId: record.runId, taskId: record.taskId, state: TaskState[stateOf(view)] };
  if (r) {
    const incomplete = incompleteParts(r);
    const note = incomplete.length > 0 ? `\n\nINCOMPLETE: ${incomplete.join('; ')}` : '';
    return agentMessage(record, 'reply', [textPart(`${r.answer}${note}`), dataPart(r)], { ...metadata, status: r.status, incomplete });
  }
  const said = statusMessage(record, view);
  const text = said?.parts[0]?.content?.$case === 'text' ? said.parts[0].content.value : `Run ${record.runId} has not ended yet.`;
  return agentMessage(record, 'reply', [textPart(`${text}\nFollow it as task ${record.taskId} (GetTask, SubscribeToTask).`)], metadata);
}
