/**
 * The ports of the agent loops, declared here, where they are used: each says only what a loop
 * asks of it. `@bosun/transport` implements them (Redis, BullMQ, NATS) without importing them —
 * its classes fit these shapes — and the services hand those implementations in; a unit test hands
 * in the in-memory ones. See CONTRIBUTING.md ("the layer map").
 */
import type {
  Approval,
  ApprovalRequest,
  Catalog,
  DeadLetter,
  Decision,
  EventType,
  ToolCallJob,
  ToolCallResult,
  UsageTotals,
} from '@bosun/contract';

/** The time: a test moves it on instead of waiting. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

/** Options of {@link ToolClient.call}. */
export interface ToolCallOptions {
  /** How long to wait for the answer. Default: no limit. */
  timeoutMs?: number;
  /** Aborted: stop waiting for the answer (the call rejects). */
  signal?: AbortSignal | undefined;
}

/** How a loop reaches the tool gateway. */
export interface ToolClient {
  /** The current tool catalog. */
  catalog(): Promise<Catalog>;
  /** Executes one call (idempotent by `call.key`) and returns its result. */
  call(call: ToolCallJob, options?: ToolCallOptions): Promise<ToolCallResult>;
}

/** The lock a fenced write is made under: the job's lock key and the token the writer holds. */
export interface CheckpointFence {
  key: string;
  token: string;
}

/** Where a loop keeps its state between steps: JSON documents that the loop parses itself. */
export interface CheckpointStore {
  /** The raw document, or null when there is none. */
  load(id: string): Promise<unknown>;
  /** Writes the document; with a `fence`, only while the writer holds its job's lock (else throws `LockLostError`). */
  save(id: string, value: unknown, options?: { fence?: CheckpointFence | undefined }): Promise<void>;
  delete(id: string): Promise<void>;
}

/** A {@link CheckpointStore} that also writes compare-and-set (the run loop's timers race its runs). */
export interface RevisedCheckpointStore extends CheckpointStore {
  /** The checkpoint and its revision (null: there is none). */
  loadRevision(id: string): Promise<{ value: unknown; revision: string | null }>;
  /** Saves only while the stored checkpoint is at `revision`; the new revision, or undefined having written nothing. */
  saveIfRevision(id: string, value: unknown, revision: string | null): Promise<string | undefined>;
}

/** An event as a loop emits it; the sink numbers it and stamps its time. */
export interface EmitInput {
  type: EventType;
  runId: string;
  incidentId: string;
  agent?: string | undefined;
  data?: Record<string, unknown>;
}

/** Where a loop's events go. Emitting never waits on an observer. */
export interface EventSink {
  emit(event: EmitInput): void;
  /** Resolves once everything emitted so far has been handed on. */
  flush(): Promise<void>;
  /** Resolves once everything emitted so far has its `seq`: awaited before a task's part of the run is handed on. */
  numbered?(): Promise<void>;
}

/** A dead letter as a loop writes it; the store adds the version, the time and the default marker. */
export type DeadLetterInput = Omit<DeadLetter, 'v' | 'at' | 'marker'> & { marker?: string };

/** Where a loop writes what it could not finish. */
export interface DeadLetters {
  add(input: DeadLetterInput, dedupeId?: string): Promise<DeadLetter>;
}

/** Where approvals live: a task loop requests, reads and (on a timeout or a cancellation) decides them. */
export interface Approvals {
  request(approval: ApprovalRequest): Promise<Approval>;
  get(id: string): Promise<Approval | null>;
  decide(id: string, decision: Decision): Promise<Approval>;
}

/** The ledger of a run's spending, which every part of the run writes to. */
export interface UsageLedger {
  record(runId: string, part: string, usage: UsageTotals): Promise<void>;
  total(runId: string): Promise<UsageTotals>;
}

/** What resolves an approval nobody decided in time: denied, reason `timeout` (transport's `ApprovalWaiter`). */
export interface ApprovalExpiry {
  /** Denies `approval`, undecided past its `timeoutAt`, and publishes the decision; another process's decision, when it came first. */
  expire(approval: Approval): Promise<Approval>;
}

/** Attributes of a span or a span event. */
export type SpanAttributes = Record<string, string | number | boolean>;

/** One model call, as the loops count it (`bosun_model_…` metrics). */
export interface ModelCallRecord {
  agent: string;
  provider: string;
  outcome: 'ok' | 'error';
  seconds: number;
  inputTokens?: number;
  outputTokens?: number;
}

/** Spans and counts of the loops (transport's `loopTelemetry`: OpenTelemetry spans, Prometheus metrics). */
export interface Telemetry {
  /** Runs `fn` in a client span named `name`; an error marks the span failed and is thrown on. */
  clientSpan<T>(
    name: string,
    attributes: SpanAttributes,
    fn: (span: { setAttributes(attributes: SpanAttributes): unknown }) => Promise<T>,
  ): Promise<T>;
  /** Adds an event to the active span, if any. */
  spanEvent(name: string, attributes?: SpanAttributes): void;
  modelCall(call: ModelCallRecord): void;
  /** An approval decided after `seconds` of waiting. */
  approvalDecided(status: string, seconds: number): void;
}

/** Telemetry that records nothing: the default of a loop given none (unit tests). */
export const NO_TELEMETRY: Telemetry = {
  clientSpan: (_name, _attributes, fn) => fn({ setAttributes: () => undefined }),
  spanEvent: () => undefined,
  modelCall: () => undefined,
  approvalDecided: () => undefined,
};
