import { BosunError, type CatalogTool } from '@bosun/contract';
import type { BudgetLimits, Logger, ModelPrice } from '@bosun/config';
import type { ApprovalRule, ToolState } from '@bosun/policy';
import type { Model } from '@bosun/models';
import type { SandboxPool } from '@bosun/sandbox';
import type { ApprovalExpiry, Approvals, CheckpointStore, DeadLetters, EventSink, Telemetry, ToolClient, UsageLedger } from './ports.js';
import type { RoutingSpec } from './routing.js';
import type { Clock } from './ports.js';

/**
 * The default system instruction of a task-mode specialist. When and how to report is said once,
 * in `finish_task`'s description, which every request carries.
 */
export const DEFAULT_TASK_INSTRUCTION = [
  'You are a specialist on an unattended incident-response team. Nobody will answer questions:',
  'there is no person in this conversation. Investigate the incident in your domain with the tools',
  'you have, prefer reading before changing anything, and do not guess. Say plainly in your report',
  'what you could not check.',
].join(' ');

/** What a specialist's task loop needs to know about it. */
export interface TaskAgentSpec {
  name: string;
  instruction?: string | undefined;
  tools: readonly string[];
  outputSchema: Record<string, unknown>;
  stallPayload?: Record<string, unknown> | undefined;
  maxToolRounds: number;
  maxInvalidOutputs: number;
  /** `read-only`: only read-only tools are offered. Default `read-write`. */
  mode?: 'read-only' | 'read-write' | undefined;
  /** How long a call to an `ask` tool waits for an operator. Default 5 minutes. */
  approvalTimeoutMs?: number | undefined;
  /** In-band tool routing (`load_tools`); off when absent. */
  routing?: RoutingSpec | undefined;
  /** What one task may spend (`budgets.task` with the specialist's `budget` over it); no limit when absent. */
  budget?: BudgetLimits | undefined;
  /** `codeact`: the model writes one script per turn (`runCodeActTask`); default `task`. */
  loop?: 'task' | 'codeact' | undefined;
  /** The sandbox limits of a CodeAct script; defaults when absent. */
  codeact?: CodeActLimits | undefined;
}

/** The sandbox limits of a CodeAct specialist, per script, as configured. */
export interface CodeActLimits {
  timeMs: number;
  memoryMb: number;
  stackKb: number;
  maxToolCalls: number;
  maxOutputChars: number;
  maxConsoleChars: number;
}

/** The policy the loop applies to the catalog (the gateway enforces it again at call time). */
export interface TaskPolicy {
  /** The tools this agent may be offered. */
  offered(tools: readonly CatalogTool[]): CatalogTool[];
  /** `ask` tools need an operator's approval before they run. */
  stateOf(tool: CatalogTool): ToolState;
  approvalTimeoutMs(tool: CatalogTool): number;
  /** Who must approve a call of the tool; absent: one person. */
  approvalRule?(tool: CatalogTool): ApprovalRule;
}

/** The ports a task loop uses. */
export interface TaskAgentDeps {
  model: Model;
  tools: ToolClient;
  checkpoints: CheckpointStore;
  events: EventSink;
  deadLetters: Pick<DeadLetters, 'add'>;
  log: Logger;
  /** Per-call timeout for tools. */
  toolTimeoutMs?: number;
  /** True when the process is draining: the loop hands the task back at the next step. */
  shouldYield?: () => boolean;
  /**
   * Aborted when the process starts draining: a model call, a script or a wait for tools in
   * flight stops at once and the task is handed back (without it, only `shouldYield` is asked,
   * at step boundaries and every 500 ms during a model call or a script).
   */
  drain?: AbortSignal | undefined;
  /** Where the loop reads the time (deadlines, durations); default the system clock. */
  clock?: Clock | undefined;
  /**
   * Whether the coordinator has given up on this task (deadline passed), or an operator has
   * cancelled its run. Checked before the task's effects — tool calls, an approval request, an
   * INCOMPLETE report — not before model calls.
   */
  isCancelled?: (taskId: string, runId: string) => Promise<boolean>;
  /**
   * Throws `LockLostError` when this worker no longer holds the task's job (its lock went to
   * another process). Asked before an INCOMPLETE report, whose dead letter and event come before
   * its (fenced) save. Default: always held.
   */
  stillOwned?: () => Promise<void>;
  /** Tool policy; default: the spec's patterns and mode, every tool `allow`. */
  policy?: TaskPolicy;
  /** Where approvals live; required when a tool is `ask`. */
  approvals?: Approvals;
  /** What denies an approval nobody decided in time (transport's `ApprovalWaiter`, built by the service); required with `approvals`. */
  approvalWaiter?: ApprovalExpiry | undefined;
  /** Where approval waits are counted and marked on the task's span; default: nowhere. */
  telemetry?: Telemetry | undefined;
  /** The model's price, for the estimated cost; the cost counts 0 without one. */
  price?: ModelPrice | undefined;
  /** The price of its fallback model, for the calls the fallback answers. */
  fallbackPrice?: ModelPrice | undefined;
  /** The limits of a whole run (`budgets.run`) and the ledger every part of the run writes its spending to. */
  runBudget?: { limits: BudgetLimits; ledger: UsageLedger } | undefined;
  /** Where CodeAct scripts run (threads off this process's event loop); default: the process's default pool. */
  sandbox?: Pick<SandboxPool, 'run'> | undefined;
}

/**
 * Thrown when the task must wait for an operator: the processor parks the job (delayed until
 * `until`, holding no worker) and a decision wakes it.
 */
export class ParkError extends BosunError {
  readonly approvalId: string;
  readonly until: number;
  constructor(approvalId: string, until: number) {
    super('park', `waiting for approval ${approvalId}`);
    this.name = 'ParkError';
    this.approvalId = approvalId;
    this.until = until;
  }
}

/** Thrown at a step boundary when the process is draining; the job goes back to the queue. */
export class YieldError extends BosunError {
  constructor(taskId: string) {
    super('yield', `task ${taskId} handed back: this process is stopping`);
    this.name = 'YieldError';
  }
}

/** A model failure that may pass if the task is tried again (BullMQ retries the job). */
export class RetryableTaskError extends BosunError {
  constructor(message: string, cause: unknown) {
    super('retryable', message, { cause });
    this.name = 'RetryableTaskError';
  }
}

/** Options of `runTask`. */
export interface RunTaskOptions {
  /**
   * The task's job is being started for the first time (BullMQ's `attemptsStarted` is 1), so no
   * checkpoint can exist yet and none is read.
   */
  firstPickup?: boolean;
}

/** Which attempt at its job this run of a task is, and how it was picked up (see `runTask`). */
export interface TaskAttempt extends RunTaskOptions {
  /** The attempt number (BullMQ's `attemptsMade` + 1): it goes into the task's result. */
  attempt: number;
  /**
   * Aborted when this attempt must stop (BullMQ's processor signal: the job's lock was lost, or it
   * was cancelled in its worker): the model call, the tool calls and the script in flight stop.
   */
  signal?: AbortSignal | undefined;
}
