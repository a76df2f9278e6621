import { z } from 'zod';
import { AGENT_NAME_PATTERN, INCIDENT_ID_PATTERN } from './names.js';

/** Largest serialized `payload` an incident may carry: 256 KiB. */
export const MAX_PAYLOAD_BYTES = 256 * 1024;

const jsonValue: z.ZodType<unknown> = z.unknown();

/** Severity of an incident; `warning` when absent. */
export const Severity = z.enum(['info', 'warning', 'critical']);
export type Severity = z.infer<typeof Severity>;

/**
 * The incident envelope: the data of an `incident` job on the `incidents` queue.
 * Parse with {@link parseIncident} to get errors that name the field.
 */
export const Incident = z.object({
  id: z
    .string()
    .regex(INCIDENT_ID_PATTERN, 'must be 1 to 128 characters of A-Z, a-z, 0-9, ".", "_" or "-"')
    // The id is the BullMQ job id, and BullMQ refuses ids that are integers.
    .refine((id) => !/^\d+$/.test(id), { message: 'must not be only digits (it is the BullMQ job id)' }),
  source: z.string().min(1, 'must not be empty'),
  reason: z.string().min(1, 'must not be empty').max(256),
  summary: z.string(),
  severity: Severity.default('warning'),
  labels: z.record(z.string(), z.string()).optional(),
  payload: jsonValue
    .optional()
    .refine(
      (p) => p === undefined || Buffer.byteLength(JSON.stringify(p) ?? '', 'utf8') <= MAX_PAYLOAD_BYTES,
      { message: `must be at most ${MAX_PAYLOAD_BYTES} bytes when serialized` },
    ),
  tenant: z.string().min(1).max(128).optional(),
});
/** A parsed incident (defaults applied). */
export type Incident = z.output<typeof Incident>;
/** An incident as a publisher writes it (optional fields may be absent). */
export type IncidentInput = z.input<typeof Incident>;

/** Status of one specialist's part of a run. */
export const AgentStatus = z.enum(['completed', 'stalled', 'failed']);
export type AgentStatus = z.infer<typeof AgentStatus>;

/** Status of a whole run. `cancelled`: an operator cancelled it (see {@link RunCancellation}). */
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
});
export type SpecialistOutcome = z.infer<typeof SpecialistOutcome>;

/** The return value of an incident job. */
export const RunResult = z.object({
  v: z.literal(1),
  runId: z.string(),
  incidentId: z.string(),
  status: RunStatus,
  answer: z.string(),
  specialists: z.array(SpecialistOutcome),
  stalled: z.number().int().nonnegative(),
  startedAt: z.string(),
  finishedAt: z.string(),
  /** Set when the run was cancelled (`status: "cancelled"`). */
  cancelled: RunCancellation.optional(),
});
export type RunResult = z.infer<typeof RunResult>;

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
});
export type TaskJob = z.infer<typeof TaskJob>;
export type TaskJobInput = z.input<typeof TaskJob>;

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
  /** Why the task failed, when it did. */
  error: z.string().optional(),
});
export type TaskResult = z.infer<typeof TaskResult>;

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
});
export type ToolCallJob = z.infer<typeof ToolCallJob>;

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
  /** Why the call could not run, when `status` is `error`. */
  error: z.string().optional(),
  durationMs: z.number().nonnegative().default(0),
});
export type ToolCallResult = z.infer<typeof ToolCallResult>;

/** Kinds of dead-letter entries. */
export const DeadLetterKind = z.enum(['stall', 'timeout', 'failure', 'poison', 'in-doubt']);
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
  /** The original data, for rejected input. */
  input: jsonValue.optional(),
  /** Set by `bosun ack` on an in-doubt entry: what the operator decided. */
  resolution: z.object({ action: z.string(), by: z.string(), at: z.string() }).optional(),
  /** Set by `bosun dlq retry`, or by `bosun publish` replacing a rejected incident: the incident that re-runs this work. */
  retriedAs: z.object({ incidentId: z.string(), runId: z.string(), taskId: z.string().optional(), at: z.string() }).optional(),
});
export type DeadLetter = z.infer<typeof DeadLetter>;

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
