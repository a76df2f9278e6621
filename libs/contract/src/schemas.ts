import { z } from 'zod';
import { UsageTotals } from './usage.js';
import { AGENT_NAME_PATTERN, INCIDENT_ID_PATTERN } from './names.js';
import { jsonBytes, jsonDepth } from './json-bounds.js';
import { dataRecord } from './data-record.js';

/**
 * Limits of the incident envelope (docs/protocol.md#the-incident-envelope). They keep every
 * message that carries an incident (task jobs, events, dead letters, model prompts) bounded.
 * Characters are JavaScript string lengths (UTF-16 code units); bytes are UTF-8 bytes of the
 * `JSON.stringify` output.
 */
export const INCIDENT_LIMITS = {
  /** The whole envelope as parsed (fields Bosun ignores are dropped first): 512 KiB. */
  maxBytes: 512 * 1024,
  /** `source`, in characters. */
  sourceChars: 256,
  /** `reason`, in characters. */
  reasonChars: 256,
  /** `summary`, in characters: 64 Ki. */
  summaryChars: 64 * 1024,
  /** Number of `labels`. */
  labels: 128,
  /** A label's name, in characters. */
  labelKeyChars: 256,
  /** A label's value, in characters. */
  labelValueChars: 4096,
  /** `payload`, serialised: 256 KiB. */
  payloadBytes: 256 * 1024,
  /** Levels of objects and arrays in `payload` (`{"a":{"b":1}}` is 2). */
  payloadDepth: 32,
} as const;

/** Largest serialized `payload` an incident may carry: 256 KiB. */
export const MAX_PAYLOAD_BYTES = INCIDENT_LIMITS.payloadBytes;

const jsonValue: z.ZodType<unknown> = z.unknown();

/** Severity of an incident; `warning` when absent. */
export const Severity = z.enum(['info', 'warning', 'critical']);
export type Severity = z.infer<typeof Severity>;

const tooLong = (max: number) => `must be at most ${max} characters`;

/**
 * The incident envelope: the data of an `incident` job on the `incidents` queue.
 * Parse with `parseWith(Incident, …)` to get errors that name the field. Every limit is in
 * {@link INCIDENT_LIMITS}; nothing in the check recurses, so input of any depth gets an
 * ordinary rejection.
 */
export const Incident = z
  .object({
    id: z
      .string()
      .regex(INCIDENT_ID_PATTERN, 'must be 1 to 128 characters of A-Z, a-z, 0-9, ".", "_" or "-"')
      // The id is the BullMQ job id, and BullMQ refuses ids that are integers.
      .refine((id) => !/^\d+$/.test(id), { message: 'must not be only digits (it is the BullMQ job id)' }),
    source: z.string().min(1, 'must not be empty').max(INCIDENT_LIMITS.sourceChars, tooLong(INCIDENT_LIMITS.sourceChars)),
    reason: z.string().min(1, 'must not be empty').max(INCIDENT_LIMITS.reasonChars, tooLong(INCIDENT_LIMITS.reasonChars)),
    summary: z.string().max(INCIDENT_LIMITS.summaryChars, tooLong(INCIDENT_LIMITS.summaryChars)),
    severity: Severity.default('warning'),
    // Every label is data, `__proto__` too (a plain z.record would drop it without a word).
    labels: dataRecord(
      z.string().max(INCIDENT_LIMITS.labelKeyChars, `label names ${tooLong(INCIDENT_LIMITS.labelKeyChars)}`),
      z.string().max(INCIDENT_LIMITS.labelValueChars, tooLong(INCIDENT_LIMITS.labelValueChars)),
    )
      .refine((l) => Object.keys(l).length <= INCIDENT_LIMITS.labels, { message: `must have at most ${INCIDENT_LIMITS.labels} labels` })
      .optional(),
    payload: jsonValue.optional().superRefine((p, ctx) => {
      if (p === undefined) return;
      // Depth first, without recursion: JSON.stringify of a deeply nested value throws.
      if (jsonDepth(p, INCIDENT_LIMITS.payloadDepth) > INCIDENT_LIMITS.payloadDepth) {
        ctx.addIssue({ code: 'custom', message: `must nest objects and arrays at most ${INCIDENT_LIMITS.payloadDepth} levels deep` });
        return;
      }
      const bytes = jsonBytes(p, INCIDENT_LIMITS.payloadDepth);
      if (bytes === undefined) ctx.addIssue({ code: 'custom', message: 'must be JSON' });
      else if (bytes > INCIDENT_LIMITS.payloadBytes) {
        ctx.addIssue({ code: 'custom', message: `must be at most ${INCIDENT_LIMITS.payloadBytes} bytes when serialized (it is ${bytes})` });
      }
    }),
    tenant: z.string().min(1).max(128).optional(),
    /**
     * Who started the run, as the publishing path verified it (the person of `bosun publish`'s
     * token, the A2A caller); a path that cannot tell sets nothing. An approval whose rule says
     * `distinctFrom: requester` refuses this person as an approver.
     */
    requestedBy: z.string().min(1).max(200).optional(),
  })
  .superRefine(
    (incident, ctx) => {
      const bytes = jsonBytes(incident, INCIDENT_LIMITS.payloadDepth + 1);
      if (bytes !== undefined && bytes > INCIDENT_LIMITS.maxBytes) {
        ctx.addIssue({
          code: 'custom',
          message: `the whole incident must be at most ${INCIDENT_LIMITS.maxBytes} bytes when serialized (it is ${bytes})`,
        });
      }
    },
    // Only when every field is within its own limits: a field over its limit is named by itself.
    { when: (payload) => payload.issues.length === 0 },
  );
/** A parsed incident (defaults applied). */
export type Incident = z.output<typeof Incident>;
/** An incident as a publisher writes it (optional fields may be absent). */
export type IncidentInput = z.input<typeof Incident>;

/** Status of one specialist's part of a run. */
export const AgentStatus = z.enum(['completed', 'stalled', 'failed']);
export type AgentStatus = z.infer<typeof AgentStatus>;

/**
 * Status of a whole run. `partial`: some part did not complete, or a mutating tool call's outcome
 * is unknown (in doubt). `cancelled`: an operator cancelled it (see {@link RunCancellation}).
 */
export const RunStatus = z.enum(['completed', 'partial', 'failed', 'cancelled']);
export type RunStatus = z.infer<typeof RunStatus>;

/** Who cancelled a run, why and when: in the run result, the `run.completed` event and the run's cancel key. */
export const RunCancellation = z.object({
  by: z.string(),
  reason: z.string(),
  /** When the cancellation was requested (ISO). */
  at: z.string(),
});
export type RunCancellation = z.infer<typeof RunCancellation>;

/** One specialist's entry in the run result. */
export const SpecialistOutcome = z.object({
  name: z.string(),
  status: AgentStatus,
  output: jsonValue,
  attempts: z.number().int().nonnegative(),
  /** What this part spent. Additive in v1. */
  usage: UsageTotals.optional(),
});
export type SpecialistOutcome = z.infer<typeof SpecialistOutcome>;

/** A tool call of a task whose outcome is unknown (in doubt). */
export const InDoubtCall = z.object({ key: z.string(), tool: z.string() });
export type InDoubtCall = z.infer<typeof InDoubtCall>;

/** The return value of an incident job. */
export const RunResult = z.object({
  v: z.literal(1),
  runId: z.string(),
  incidentId: z.string(),
  status: RunStatus,
  answer: z.string(),
  specialists: z.array(SpecialistOutcome),
  stalled: z.number().int().nonnegative(),
  /**
   * Mutating tool calls of the run whose outcome is unknown, with the agent that made each;
   * present when there is at least one (the run is then `partial` or `failed`). Additive in v1.
   */
  inDoubt: z
    .object({
      count: z.number().int().positive(),
      calls: z.array(InDoubtCall.extend({ agent: z.string() })),
    })
    .optional(),
  startedAt: z.string(),
  finishedAt: z.string(),
  /** Set when the run was cancelled (`status: "cancelled"`). */
  cancelled: RunCancellation.optional(),
  /** What the whole run spent: the coordinator's model calls and every part's usage. Additive in v1. */
  usage: UsageTotals.optional(),
  /** The runbook the run followed (`name`, matched by the intake) and the alert's runbook link (`url`), when there were any. Additive in v1. */
  runbook: z.object({ name: z.string().optional(), url: z.string().optional() }).optional(),
});
export type RunResult = z.infer<typeof RunResult>;

/**
 * The W3C trace context a job may carry (docs/observability.md, "Traces"). Additive in v1; a
 * value that is not a string of a sane length is dropped, never a reason to refuse the job.
 */
const traceFields = {
  traceparent: z.string().max(128).optional().catch(undefined),
  tracestate: z.string().max(512).optional().catch(undefined),
};

/** Data of a `task` job on a `specialist-<name>` queue: one delegation. */
export const TaskJob = z.object({
  v: z.literal(1),
  runId: z.string().min(1),
  incidentId: z.string().min(1),
  taskId: z.string().min(1),
  agent: z.string().regex(AGENT_NAME_PATTERN),
  /** What the coordinator asks of this specialist. */
  task: z.string(),
  incident: Incident,
  /** When the delegation becomes an INCOMPLETE `timeout` result (ISO time). */
  deadlineAt: z.string().optional(),
  /**
   * The task ran in its run's process before this job existed (a local task, `bosun serve`):
   * its checkpoint may hold its progress, so even the job's first pickup reads it. Additive in v1.
   */
  resumed: z.literal(true).optional(),
  ...traceFields,
});
export type TaskJob = z.infer<typeof TaskJob>;
export type TaskJobInput = z.input<typeof TaskJob>;

/**
 * Why a task ended, as data (additive in v1): `completed`; `stall` (it stopped without reporting);
 * `timeout` (its deadline passed); `budget` (its next call would cross a budget limit);
 * `cancelled` (the coordinator gave up on it, or an operator cancelled its run); `transfer` (a
 * CodeAct script asked to hand the task to another specialist); `failure` (it could not go on);
 * `in_doubt` (a remote agent may or may not have taken the task). Read with {@link taskEndReason}.
 */
export const TaskEndReason = z.enum(['completed', 'stall', 'timeout', 'budget', 'cancelled', 'transfer', 'failure', 'in_doubt']);
export type TaskEndReason = z.infer<typeof TaskEndReason>;

/** The return value of a `task` job. */
export const TaskResult = z.object({
  v: z.literal(1),
  taskId: z.string(),
  agent: z.string(),
  status: AgentStatus,
  output: jsonValue,
  attempts: z.number().int().nonnegative(),
  /** The agent's final text when it stalled, verbatim. */
  lastWords: z.string().optional(),
  /** Why the task failed, when it did: for people. Code reads {@link TaskEndReason} (`reason`) instead. */
  error: z.string().optional(),
  /** Why the task ended. Additive in v1: results written before it have none (see {@link taskEndReason}). */
  reason: TaskEndReason.optional(),
  /** The task's tool calls that came back in doubt, when there were any. Additive in v1. */
  inDoubt: z.array(InDoubtCall).optional(),
  /** What the task spent (counted across crashes and resumes). Additive in v1. */
  usage: UsageTotals.optional(),
  /** A CodeAct script ended the task asking the coordinator to delegate to this specialist (`transfer_to_agent`). Additive in v1. */
  transfer: z.object({ agent: z.string(), reason: z.string() }).optional(),
  /**
   * `checkpoint`: `output` is not here (it is `null`) but in the task's checkpoint, as its
   * `result.output` (`<prefix>:ckpt:task:<taskId>`): a task's output is stored once, and the job's
   * return value, its parent's copy of it and the run's checkpoint refer to it (see
   * {@link outputByReference}). Absent: `output` is the output. Additive in v1.
   */
  outputIn: z.literal('checkpoint').optional(),
});
export type TaskResult = z.infer<typeof TaskResult>;

/**
 * Why a task ended: its `reason`, or, for a result written before `reason` existed, what its
 * structure says (its status, and `transfer`); never its text. Such an old result that was
 * cancelled or timed out reads as `stall`: the kinds of a stall were not kept as data then.
 */
export function taskEndReason(result: Pick<TaskResult, 'status' | 'reason' | 'transfer'>): TaskEndReason {
  if (result.reason) return result.reason;
  if (result.status === 'completed') return 'completed';
  if (result.status === 'failed') return 'failure';
  return result.transfer ? 'transfer' : 'stall';
}

/** A task result whose output lives in its task's checkpoint: the same result with `output: null` and `outputIn`. */
export function outputByReference(result: TaskResult): TaskResult {
  return { ...result, output: null, outputIn: 'checkpoint' };
}

/** Data of a `tool-call` job on the `tools` queue. The job id is the idempotency key. */
export const ToolCallJob = z.object({
  v: z.literal(1),
  /** Derived from the call's place in the run: `<taskId>-s<step>-c<index>`. */
  key: z.string().min(1),
  runId: z.string().min(1),
  incidentId: z.string().min(1),
  agent: z.string().min(1),
  /** Namespaced tool name: `<server>__<tool>`. */
  tool: z.string().min(1),
  args: z.record(z.string(), jsonValue),
  /** For a tool that needs approval: the approval that covers this exact call. */
  approvalId: z.string().optional(),
  /**
   * The task lock the calling specialist holds: its task job's id and BullMQ lock token. The
   * gateway refuses the call, running nothing, when that job's lock is no longer this token (a
   * stale owner: the task went to another process). Absent for calls made outside a task job (the
   * MCP face, `bosun ack --retry`). Additive in v1.
   */
  taskLock: z
    .object({
      taskId: z
        .string()
        .min(1)
        .max(256)
        .regex(/^[^:\s]+$/, 'a job id without colons or spaces'),
      token: z.string().min(1).max(256),
      /**
       * A task run in its run's process without a job of its own (a local task, `bosun serve`)
       * holds its run's lock instead: the incident job's id on the `incidents` queue. Additive in v1.
       */
      run: z
        .object({
          jobId: z
            .string()
            .min(1)
            .max(256)
            .regex(/^[^:\s]+$/, 'a job id without colons or spaces'),
        })
        .optional(),
    })
    .optional(),
  ...traceFields,
});
export type ToolCallJob = z.infer<typeof ToolCallJob>;

/**
 * Why a tool call did not succeed, as data (additive in v1): `refused` (policy, a stale task owner,
 * a key recorded for another call, or an operator's `skip`); `unknown_tool`; `needs_approval` (an
 * `ask` tool sent without an approval); `denied` (its approval is not approved, or does not cover
 * it); `timeout`; `in_doubt` (a mutating call whose outcome is unknown); `tool_error` (the call
 * failed, or the tool answered with its own `isError`).
 */
export const ToolCallCode = z.enum(['refused', 'unknown_tool', 'needs_approval', 'denied', 'timeout', 'in_doubt', 'tool_error']);
export type ToolCallCode = z.infer<typeof ToolCallCode>;

/** The return value of a `tool-call` job. */
export const ToolCallResult = z.object({
  v: z.literal(1),
  key: z.string(),
  tool: z.string(),
  /** `ok`: the tool ran (it may still report its own error with `isError`); `error`: it could not run. */
  status: z.enum(['ok', 'error']),
  /** The tool's own error flag (MCP `isError`). */
  isError: z.boolean().default(false),
  /** Text content of the result, joined. */
  text: z.string().default(''),
  /** MCP `structuredContent`, when the tool returned one. */
  structured: jsonValue.optional(),
  /** Why the call could not run, when `status` is `error`: for people. Code reads `code`. */
  error: z.string().optional(),
  /** Why the call did not succeed: set when `status` is `error` or the tool's `isError` is. Additive in v1: older records have none. */
  code: ToolCallCode.optional(),
  durationMs: z.number().nonnegative().default(0),
  /** Set on every answer for a mutating call whose outcome is unknown (`error` starts `IN DOUBT:`). Additive in v1. */
  inDoubt: z.literal(true).optional(),
});
export type ToolCallResult = z.infer<typeof ToolCallResult>;

/** Kinds of dead-letter entries. */
export const DeadLetterKind = z.enum(['stall', 'timeout', 'failure', 'poison', 'in-doubt', 'budget', 'delivery']);
export type DeadLetterKind = z.infer<typeof DeadLetterKind>;

/** Data of a job on the `dead-letter` queue (job name = kind). */
export const DeadLetter = z.object({
  v: z.literal(1),
  kind: DeadLetterKind,
  runId: z.string().optional(),
  incidentId: z.string().optional(),
  agent: z.string().optional(),
  /** The delegation (task) the entry is about, for stalls, timeouts and failures of one. */
  taskId: z.string().optional(),
  reason: z.string(),
  marker: z.string(),
  lastWords: z.string().optional(),
  attempts: z.number().int().nonnegative().optional(),
  at: z.string(),
  /** The original data, for rejected input (a bounded copy when it was too large or too deep). */
  input: jsonValue.optional(),
  /** What was cut from this entry to store it (`<path>: <what>`); absent when nothing was. Additive in v1. */
  truncated: z.array(z.string()).optional(),
  /** Set by `bosun ack` on an in-doubt entry: what the operator decided. */
  resolution: z.object({ action: z.string(), by: z.string(), at: z.string() }).optional(),
  /** Set by `bosun dlq retry`, or by `bosun publish` replacing a rejected incident: the incident that re-runs this work. */
  retriedAs: z.object({ incidentId: z.string(), runId: z.string(), taskId: z.string().optional(), at: z.string() }).optional(),
});
export type DeadLetter = z.infer<typeof DeadLetter>;

/** The `input` of an `in-doubt` dead letter: the call, its arguments as shown (secrets redacted). */
export const InDoubtDeadLetterInput = z.object({ key: z.string(), tool: z.string(), args: jsonValue });
export type InDoubtDeadLetterInput = z.infer<typeof InDoubtDeadLetterInput>;

/** Event types published on `<prefix>.runs.<runId>.<type>`. */
export const EventType = z.enum([
  'run.started',
  'run.routed',
  'run.completed',
  'run.failed',
  'agent.delegated',
  'agent.started',
  'agent.completed',
  'agent.stalled',
  'agent.failed',
  'model.called',
  'tool.started',
  'tool.completed',
  'tool.failed',
  'tool.in_doubt',
  'tool.progress',
  'tool.routing',
  'approval.requested',
  'approval.resolved',
  'codeact.script',
  'codeact.result',
  'codeact.output',
  'codeact.replayed',
  'codeact.limit',
  'agent.progress',
  'model.context_trimmed',
]);
export type EventType = z.infer<typeof EventType>;

/** One run event on NATS. `seq` increases within a run. */
export const RunEvent = z.object({
  v: z.literal(1),
  type: EventType,
  runId: z.string(),
  incidentId: z.string(),
  seq: z.number().int().positive(),
  at: z.string(),
  agent: z.string().optional(),
  data: z.record(z.string(), jsonValue),
  /** What was cut from `data` so that the event fits the NATS server's max payload; absent when nothing was. Additive in v1. */
  truncated: z.array(z.string()).optional(),
});
export type RunEvent = z.infer<typeof RunEvent>;

/** MCP tool annotations Bosun relies on. */
export const ToolAnnotations = z
  .object({
    title: z.string().optional(),
    readOnlyHint: z.boolean().optional(),
    destructiveHint: z.boolean().optional(),
    idempotentHint: z.boolean().optional(),
    openWorldHint: z.boolean().optional(),
  })
  .loose();

/** One tool in the gateway's catalog. */
export const CatalogTool = z.object({
  /** `<server>__<tool>`. */
  name: z.string(),
  server: z.string(),
  /** The tool's name on its MCP server. */
  remoteName: z.string(),
  description: z.string().default(''),
  inputSchema: z.record(z.string(), jsonValue),
  annotations: ToolAnnotations.default({}),
});
export type CatalogTool = z.infer<typeof CatalogTool>;

/** The tool catalog the gateway publishes in Redis (`<prefix>:gateway:catalog`). */
export const Catalog = z.object({
  v: z.literal(1),
  updatedAt: z.string(),
  tools: z.array(CatalogTool),
  /** Servers that could not be reached, with the reason. */
  unavailable: z.record(z.string(), z.string()).default({}),
});
export type Catalog = z.infer<typeof Catalog>;
