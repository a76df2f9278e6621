/**
 * The ports of the gateway's call flow ({@link ToolCallFlow}): what it needs from the world, as
 * interfaces. `adapters.ts` implements them over Redis and the MCP connections; the unit tests
 * over memory (`testing/memory.ts`).
 */
import { sleep, type AuditEntry, type CatalogTool, type ToolCallResult } from '@bosun/contract';
import type { Approval, ToolCallClaim, ToolCallRecords } from '@bosun/transport';
import type { McpCallOutcome } from './mcp.js';

/** What a claim found (`ToolCallRecords.claim`). */
export type ClaimFound = Awaited<ReturnType<ToolCallRecords['claim']>>;
/** What recording an outcome did (`ToolCallRecords.recordDone`): `seen-done` for a call that had been declared in doubt. */
export type RecordFound = Awaited<ReturnType<ToolCallRecords['recordDone']>>;
/** What declaring a call in doubt did (`ToolCallRecords.markInDoubt`). */
export type InDoubtFound = Awaited<ReturnType<ToolCallRecords['markInDoubt']>>;
/** A call's record as read (`ToolCallRecords.read`). */
export type RecordRead = Awaited<ReturnType<ToolCallRecords['read']>>;

/**
 * The tool-call records, as the gateway changes them: each change atomic, checking the state (and
 * owner, lease, digest) it starts from. `ToolCallRecords` (Lua scripts on Redis) is the real one.
 */
export interface ToolRecords {
  /** The recorded result of a `done` call, else undefined (also when `digest` names another call). */
  recorded(callKey: string, digest?: string): Promise<ToolCallResult | undefined>;
  /** Claims a call before it is sent: none, `retry`, or (read-only) `inflight` → `inflight` under `owner`, with a lease. */
  claim(call: ToolCallClaim): Promise<ClaimFound>;
  /** Renews the lease of a call `owner` runs; false when it is no longer in flight under it. */
  renewLease(callKey: string, owner: string): Promise<boolean>;
  /** Records a call's outcome, unless another attempt claimed it since. */
  recordDone(result: ToolCallResult, owner?: string): Promise<RecordFound>;
  /** Declares a call in doubt: by the attempt that sent it (`owner`), or by one that found its lease run out (`lapsed`). */
  markInDoubt(callKey: string, by: { owner: string } | { lapsed: true }): Promise<InDoubtFound>;
  /** Frees a key `owner` claimed and never sent; false when it is not so. */
  abandonClaim(callKey: string, owner: string): Promise<boolean>;
  /** The record of a call, or null. */
  read(callKey: string): Promise<RecordRead>;
}

/** Where approvals are read (`ApprovalStore` is the real one). */
export interface ApprovalReader {
  /** The approval with this id, or null when there is none. */
  get(id: string): Promise<Approval | null>;
}

/** The audit stream of mutating calls. */
export interface AuditLog {
  /** Appends one entry (the gateway redacts its arguments first). Rejects when it cannot be written. */
  append(entry: AuditEntry): Promise<void>;
}

/** Progress of a running MCP call, as its server reports it. */
export interface McpProgress {
  progress: number;
  total?: number;
  message?: string;
}

/** The MCP servers behind the gateway. */
export interface McpServers {
  /** Every tool of every connected server, as last listed. */
  tools(): CatalogTool[];
  /**
   * Calls a tool on its server. Rejects with `CallNotSentError` when the call certainly did not
   * reach it (no connection); any other rejection may come after the server got the call.
   */
  call(
    tool: CatalogTool,
    args: Record<string, unknown>,
    options: { timeoutMs: number; maxChars: number; onProgress?: (p: McpProgress) => void },
  ): Promise<McpCallOutcome>;
}

/** The time, and waiting on it: tests move a clock by hand instead of waiting. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Resolves after `ms`. */
  sleep(ms: number): Promise<void>;
  /** Calls `fn` every `ms` until stopped. */
  every(ms: number, fn: () => void): { stop(): void };
}

/** The system's clock and timers. */
export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: async (ms) => {
    await sleep(ms);
  },
  every(ms, fn) {
    const timer = setInterval(fn, ms);
    return { stop: () => clearInterval(timer) };
  },
};
