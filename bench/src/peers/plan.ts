/**
 * The incidents the peer scenarios run and the fake model's plan for them, shared by every
 * framework: the same shape as Bosun's fake model (`payload.fake.calls`), which calls the listed
 * tools in order, one per model turn, and then answers.
 */
import { readFileSync } from 'node:fs';

/** One planned tool call of the demo MCP server (its tool name, without Bosun's `demo__` prefix). */
export interface PlannedCall {
  tool: string;
  args: Record<string, unknown>;
}

/** An incident as the agent receives it: the text of its first message is this, as JSON. */
export interface PeerIncident {
  id: string;
  source: string;
  reason: string;
  summary: string;
  labels: Record<string, string>;
  payload: { fake: { calls: PlannedCall[] } };
}

/** The standard incident's calls: two read-only tools (scenarios 1, 2 and 8 run the same). */
export const STANDARD_CALLS: readonly PlannedCall[] = [
  { tool: 'get_pods', args: { service: 'checkout' } },
  { tool: 'get_deployments', args: { service: 'checkout' } },
];

/** The crash-looping pod of the demo environment, the one `restart_pod` restarts in the kill test. */
export const KILL_POD = 'checkout-7c9d6f8b4-9mz4q';

/** The mutating tool of the kill test; its `reason` argument carries the incident's key. */
export const KILL_TOOL = 'restart_pod';

/**
 * The kill test's calls: a read, the mutating call whose `reason` is `key` (so that the demo
 * server's call log tells the incidents apart, as test/chaos/kill-specialist.test.ts does), a read.
 */
export function killCalls(key: string): PlannedCall[] {
  return [
    { tool: 'get_pods', args: { service: 'checkout' } },
    { tool: KILL_TOOL, args: { service: 'checkout', pod: KILL_POD, reason: key } },
    { tool: 'get_logs', args: { service: 'checkout', lines: 5 } },
  ];
}

/** An incident with these planned calls. */
export function peerIncident(id: string, calls: readonly PlannedCall[] = STANDARD_CALLS): PeerIncident {
  return {
    id,
    source: 'bench',
    reason: 'PodCrashLooping',
    summary: 'bench',
    labels: { service: 'checkout' },
    payload: { fake: { calls: [...calls] } },
  };
}

/** The fake model's decision for one turn: the next tool call, or the final answer. */
export type FakeDecision = { call: PlannedCall } | { answer: string };

/**
 * The fake model's turn, from the conversation alone, as Bosun's fake model decides: the planned
 * call after the `answered` tool results so far, else an answer naming the tools called.
 */
export function fakeDecision(incident: PeerIncident, answered: number): FakeDecision {
  const calls = incident.payload.fake.calls;
  const next = calls[answered];
  if (next) return { call: next };
  return { answer: `Summary: checked ${calls.map((c) => c.tool).join(', ')} for ${incident.labels.service ?? 'the service'}.` };
}

/** Reads the incident back from the text of the first message; throws, naming what is wrong. */
export function parseIncidentText(text: string): PeerIncident {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error(`the first message is not an incident: not JSON (${text.slice(0, 60)})`);
  }
  const calls = (value as { payload?: { fake?: { calls?: unknown } } } | null)?.payload?.fake?.calls;
  if (!Array.isArray(calls) || !calls.every((c) => typeof (c as { tool?: unknown }).tool === 'string'))
    throw new Error('the first message is not an incident: payload.fake.calls must be a list of { tool, args }');
  return value as PeerIncident;
}

/** What one run ended with, whatever the framework. */
export interface PeerOutcome {
  answer: string;
  /** The tool calls the run's history holds, in order. */
  toolCalls: string[];
}

/** Throws unless the run made exactly the planned calls and answered: a run must not end silently. */
export function checkOutcome(id: string, incident: PeerIncident, outcome: PeerOutcome): PeerOutcome {
  const planned = incident.payload.fake.calls.map((c) => c.tool);
  if (outcome.toolCalls.join(',') !== planned.join(','))
    throw new Error(`run ${id} made the calls [${outcome.toolCalls.join(', ')}], not the planned [${planned.join(', ')}]`);
  if (!outcome.answer.startsWith('Summary:'))
    throw new Error(`run ${id} ended without the final answer (got "${outcome.answer.slice(0, 80)}")`);
  return outcome;
}

/** One line of the demo MCP server's call log (`DEMO_MCP_CALL_LOG`). */
interface CallLogLine {
  tool: string;
  args: Record<string, unknown>;
  pid: number;
}

/**
 * How many times the mutating tool reached the demo MCP server for each key (its `reason`
 * argument), from the server's call log: the independent counter of the kill test. The log is
 * written by the MCP server itself, synchronously, when a call reaches the tool's handler, so a
 * line survives the kill of the worker and of the server. Keys never seen are counted 0.
 */
export function effectsPerKey(callLogText: string, keys: readonly string[], tool = KILL_TOOL): Map<string, number> {
  const counts = new Map<string, number>(keys.map((k) => [k, 0]));
  for (const line of callLogText.split('\n')) {
    if (!line.trim()) continue;
    let entry: CallLogLine;
    try {
      entry = JSON.parse(line) as CallLogLine;
    } catch {
      // The last line may be cut short by a kill between two writes: it is no call.
      continue;
    }
    if (entry.tool !== tool) continue;
    const key = entry.args?.reason;
    if (typeof key === 'string' && counts.has(key)) counts.set(key, counts.get(key)! + 1);
  }
  return counts;
}

/** {@link effectsPerKey} of a call-log file; an absent file counts 0 everywhere. */
export function effectsPerKeyFile(path: string, keys: readonly string[], tool = KILL_TOOL): Map<string, number> {
  let text = '';
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  return effectsPerKey(text, keys, tool);
}
