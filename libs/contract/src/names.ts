/**
 * Names on the wire: queues, job names, subjects, streams and markers.
 * They are part of the public contract (docs/protocol.md); changing one is a breaking change.
 */

/** Version stamped on every payload of the v1 contract. */
export const CONTRACT_VERSION = 1 as const;

/** Queue that receives incidents from monitoring. Job name {@link INCIDENT_JOB}, job id = incident id. */
export const INCIDENTS_QUEUE = 'incidents';
/** The job name of an incident on {@link INCIDENTS_QUEUE}. */
export const INCIDENT_JOB = 'incident';
/** Queue of tool calls executed by the tool gateway. */
export const TOOLS_QUEUE = 'tools';
/** The job name of a tool call on {@link TOOLS_QUEUE}. */
export const TOOL_CALL_JOB = 'tool-call';
/** Queue holding one job per INCOMPLETE result or rejected input. Nothing consumes it by default. */
export const DEAD_LETTER_QUEUE = 'dead-letter';
/** The job name of a specialist task on a `specialist-<name>` queue. */
export const TASK_JOB = 'task';

/** The queue a specialist consumes: `specialist-<name>`. */
export function specialistQueue(name: string): string {
  return `specialist-${name}`;
}

/**
 * Opens every result written on behalf of an agent that did not report.
 * Test for it with {@link isStalled}; never match the string by hand.
 */
export const STALL_MARKER = 'INCOMPLETE — no result from this agent.';

/** What the reader of a stall result (usually the coordinator's model) is asked to do about it. */
export const STALL_INSTRUCTION =
  'This agent stopped without reporting a result, and nothing will ever answer it: ' +
  'its part of the investigation is unchecked. Do not conclude that it found nothing, ' +
  'say plainly in the answer which part was not completed, and do not delegate the same ' +
  'question to it again. Its last words follow verbatim.';

/** The tool a task-mode agent calls to report its structured output. */
export const FINISH_TASK_TOOL = 'finish_task';

/** Names a tool of an MCP server in the catalog: `<server>__<tool>`. */
export const TOOL_NAMESPACE_SEPARATOR = '__';

/**
 * Allowed `BOSUN_PREFIX` values: it ends up in Redis keys, NATS subjects and a JetStream stream
 * name. Either a plain name, or a Redis Cluster hash tag `{name}` (required on Redis Cluster).
 */
export const PREFIX_PATTERN = /^(?:[A-Za-z0-9_-]{1,64}|\{[A-Za-z0-9_-]{1,62}\})$/;

/** Allowed incident ids. */
export const INCIDENT_ID_PATTERN = /^[A-Za-z0-9._-]{1,128}$/;

/** Allowed agent (specialist) names: they appear in queue names, job ids and NATS subjects. */
export const AGENT_NAME_PATTERN = /^[a-z][a-z0-9-]{0,47}$/;

/** Subject of one event: `<prefix>.runs.<runId>.<type>`. */
export function eventSubject(prefix: string, runId: string, type: string): string {
  return `${prefix}.runs.${runId}.${type}`;
}

/** Wildcard subject that matches every event of every run under a prefix. */
export function allRunsSubject(prefix: string): string {
  return `${prefix}.runs.>`;
}

/** Wildcard subject that matches every event of one run. */
export function runSubject(prefix: string, runId: string): string {
  return `${prefix}.runs.${runId}.>`;
}

/** The JetStream stream that captures `<prefix>.runs.>`: `<prefix>-runs`. */
export function runsStreamName(prefix: string): string {
  return `${prefix}-runs`;
}
