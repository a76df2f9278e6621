/**
 * The gateway's ports in memory, for unit tests of {@link ToolCallFlow}: tool-call records with
 * the semantics of `ToolCallRecords`' Lua scripts (checked against real Redis by
 * `libs/transport/src/stores/tool-records.test.ts`), approvals, the audit stream, MCP servers, dead
 * letters, events and a clock moved by hand. Each port writes what it is asked to do in one
 * shared {@link Journal}, so a test can assert the order of the effects. Not exported from the
 * package: tests import this file.
 */
import type { AuditEntry, CatalogTool, ToolCallResult } from '@bosun/contract';
import { MemoryEventSink, type Approval, type DeadLetterInput, type EmitInput, type EventSink, type ToolCallClaim } from '@bosun/transport';
import type { McpCallOutcome } from '../mcp.js';
import type {
  ApprovalReader,
  AuditLog,
  ClaimFound,
  Clock,
  InDoubtFound,
  McpServers,
  RecordFound,
  RecordRead,
  ToolRecords,
} from '../ports.js';

/** The effects of every port, in the order they were asked for: `records.claim`, `mcp.call demo__x`, `event tool.started`, `audit ok`... */
export type Journal = string[];

/** Port methods (`records.claim`, `audit.append`, `deadLetters.add`...) made to fail: each rejects without an effect. */
export type Faults = Set<string>;

/** A stored record: the `ToolCallRecord` fields, values as read. */
type Stored = NonNullable<RecordRead>;

function failure(name: string): Error {
  return new Error(`${name} failed (a fault the test injected)`);
}

/** A clock moved by {@link ManualClock.advance}: sleeps and repeating timers fire only then. */
export class ManualClock implements Clock {
  private time: number;
  private timers: { at: number; every?: number; fn: () => void; stopped: boolean }[] = [];

  constructor(start = Date.parse('2026-03-01T10:00:00.000Z')) {
    this.time = start;
  }

  now(): number {
    return this.time;
  }

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.timers.push({ at: this.time + ms, fn: resolve, stopped: false }));
  }

  every(ms: number, fn: () => void): { stop(): void } {
    const timer = { at: this.time + ms, every: ms, fn, stopped: false };
    this.timers.push(timer);
    return { stop: () => (timer.stopped = true) };
  }

  /** How many sleeps and repeating timers are waiting. */
  get waiting(): number {
    return this.timers.filter((t) => !t.stopped).length;
  }

  /** Moves the clock on by `ms`, firing each timer due on the way (and letting what it starts run) in time order. */
  async advance(ms: number): Promise<void> {
    const until = this.time + ms;
    for (;;) {
      this.timers = this.timers.filter((t) => !t.stopped);
      const next = this.timers.filter((t) => t.at <= until).sort((a, b) => a.at - b.at)[0];
      if (!next) break;
      this.time = next.at;
      if (next.every === undefined) next.stopped = true;
      else next.at += next.every;
      next.fn();
      await settle();
    }
    this.time = until;
    await settle();
  }
}

/** Lets every promise chain that can go on now run (timers of the real clock are never involved). */
export async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** Tool-call records in memory, by the rules of the Lua scripts of `ToolCallRecords`. */
export class MemoryToolRecords implements ToolRecords {
  readonly records: Map<string, Stored>;
  /** The keys declared in doubt and not resolved (the in-doubt index). */
  readonly inDoubtIndex: Set<string>;
  /** Task locks: lock key → token. */
  readonly locks: Map<string, string>;
  private readonly world: { clock: Clock; journal: Journal; faults: Faults; leaseMs: number };

  constructor(world: { clock: Clock; journal: Journal; faults: Faults; leaseMs: number }, shared?: MemoryToolRecords) {
    this.world = world;
    this.records = shared?.records ?? new Map<string, Stored>();
    this.inDoubtIndex = shared?.inDoubtIndex ?? new Set<string>();
    this.locks = shared?.locks ?? new Map<string, string>();
  }

  /** The same records, claimed and renewed with leases of `leaseMs` (as another gateway configured so would). */
  withLease(leaseMs: number): MemoryToolRecords {
    return new MemoryToolRecords({ ...this.world, leaseMs }, this);
  }

  /** Notes a call in the journal and runs it; rejects without running it when the test made `records.<method>` fail. */
  private op<T>(method: string, fn: () => T): Promise<T> {
    this.world.journal.push(`records.${method}`);
    if (this.world.faults.has(`records.${method}`)) return Promise.reject(failure(`records.${method}`));
    try {
      return Promise.resolve(fn());
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  private isoNow(): string {
    return new Date(this.world.clock.now()).toISOString();
  }

  recorded(callKey: string, digest?: string): Promise<ToolCallResult | undefined> {
    return this.op('recorded', () => {
      const r = this.records.get(callKey);
      if (digest !== undefined && r?.digest !== undefined && r.digest !== digest) return undefined;
      return r?.state === 'done' ? r.result : undefined;
    });
  }

  claim(call: ToolCallClaim): Promise<ClaimFound> {
    return this.op('claim', () => {
      const found = this.claimNow(call);
      // A reply lost after the claim was made: the write happened, the caller hears an error.
      if (this.world.faults.has('records.claim:reply')) throw failure('records.claim:reply');
      return found;
    });
  }

  private claimNow(call: ToolCallClaim): ClaimFound {
    if (call.lock && this.locks.get(call.lock.key) !== call.lock.token) return { claimed: false, state: 'stale' };
    const r = this.records.get(call.key);
    if (r && r.digest !== undefined && r.digest !== call.digest) return { claimed: false, state: 'mismatch', recordedTool: r.tool ?? '' };
    if (r?.state === 'inflight' && r.owner === call.owner) return { claimed: true };
    const now = this.world.clock.now();
    if (!r || r.state === 'retry' || (call.readOnly && r.state === 'inflight')) {
      this.records.set(call.key, {
        ...r,
        state: 'inflight',
        tool: call.tool,
        args: call.shownArgs as Stored['args'],
        runId: call.runId,
        incidentId: call.incidentId,
        agent: call.agent,
        startedAt: this.isoNow(),
        readOnly: call.readOnly,
        approvalId: call.approvalId ?? '',
        argsRedacted: call.argsRedacted,
        digest: call.digest,
        owner: call.owner,
        leaseUntil: now + this.world.leaseMs,
      });
      return { claimed: true };
    }
    if (r.state === 'done') return r.result ? { claimed: false, state: 'done', result: r.result } : { claimed: false, state: 'done' };
    const lease = r.leaseUntil ?? 0;
    if (r.state === 'inflight' && lease > now) return { claimed: false, state: 'leased', leaseMs: lease - now };
    return { claimed: false, state: r.state };
  }

  renewLease(callKey: string, owner: string): Promise<boolean> {
    return this.op('renewLease', () => {
      const r = this.records.get(callKey);
      if (r?.state !== 'inflight' || r.owner !== owner) return false;
      r.leaseUntil = this.world.clock.now() + this.world.leaseMs;
      return true;
    });
  }

  recordDone(result: ToolCallResult, owner?: string): Promise<RecordFound> {
    return this.op('recordDone', () => {
      const r = this.records.get(result.key);
      if (owner && r?.owner !== undefined && r.owner !== owner) return 'not-owner';
      if (r?.state === 'done') {
        r.lateResult = result;
        return 'late';
      }
      const next: Stored = { ...r, state: 'done', result };
      delete next.leaseUntil;
      this.records.set(result.key, next);
      if (r?.state === 'in-doubt' || r?.inDoubtAt !== undefined) {
        next.seenDoneAt = this.isoNow();
        this.inDoubtIndex.delete(result.key);
        return 'seen-done';
      }
      return 'done';
    });
  }

  markInDoubt(callKey: string, by: { owner: string } | { lapsed: true }): Promise<InDoubtFound> {
    return this.op('markInDoubt', () => {
      const r = this.records.get(callKey);
      if (r?.state === 'in-doubt') return { kind: 'already' };
      if (r?.state === 'done') return r.result ? { kind: 'done', result: r.result } : { kind: 'done' };
      if (r && r.state !== 'inflight') return { kind: 'other', state: r.state };
      if ('owner' in by && r?.owner !== undefined && r.owner !== by.owner) return { kind: 'other', state: 'not-owner' };
      const now = this.world.clock.now();
      const lease = r?.leaseUntil ?? 0;
      if ('lapsed' in by && lease > now) return { kind: 'leased', leaseMs: lease - now };
      const next: Stored = { ...r, state: 'in-doubt', inDoubtAt: this.isoNow() };
      delete next.leaseUntil;
      this.records.set(callKey, next);
      this.inDoubtIndex.add(callKey);
      return { kind: 'marked' };
    });
  }

  abandonClaim(callKey: string, owner: string): Promise<boolean> {
    return this.op('abandonClaim', () => {
      const r = this.records.get(callKey);
      if (r?.state !== 'inflight' || r.owner !== owner) return false;
      this.records.delete(callKey);
      return true;
    });
  }

  read(callKey: string): Promise<RecordRead> {
    return this.op('read', () => {
      const r = this.records.get(callKey);
      return r ? { ...r } : null;
    });
  }
}

/** Approvals in memory, by id. */
export class MemoryApprovals implements ApprovalReader {
  readonly approvals = new Map<string, Approval>();
  private readonly journal: Journal;

  constructor(journal: Journal) {
    this.journal = journal;
  }

  get(id: string): Promise<Approval | null> {
    this.journal.push(`approvals.get ${id}`);
    return Promise.resolve(this.approvals.get(id) ?? null);
  }
}

/** The audit stream in memory. */
export class MemoryAuditLog implements AuditLog {
  readonly entries: AuditEntry[] = [];
  private readonly world: { journal: Journal; faults: Faults };

  constructor(world: { journal: Journal; faults: Faults }) {
    this.world = world;
  }

  append(entry: AuditEntry): Promise<void> {
    this.world.journal.push(`audit ${entry.status}`);
    if (this.world.faults.has('audit.append')) return Promise.reject(failure('audit.append'));
    this.entries.push(entry);
    return Promise.resolve();
  }
}

/** How a fake server answers a call: an outcome, or a rejection (a promise that never settles is a server that hangs). */
export type ToolHandler = (args: Record<string, unknown>, options: Parameters<McpServers['call']>[2]) => Promise<McpCallOutcome>;

/** MCP servers in memory: a list of tools, each answered by its handler (default: `<remote name> ok`). */
export class FakeMcpServers implements McpServers {
  readonly catalog: CatalogTool[];
  readonly handlers = new Map<string, ToolHandler>();
  /** The names of the tools called, in order. */
  readonly sent: string[] = [];
  private readonly journal: Journal;

  constructor(journal: Journal, catalog: CatalogTool[]) {
    this.journal = journal;
    this.catalog = catalog;
  }

  tools(): CatalogTool[] {
    return this.catalog;
  }

  call(tool: CatalogTool, args: Record<string, unknown>, options: Parameters<McpServers['call']>[2]): Promise<McpCallOutcome> {
    this.journal.push(`mcp.call ${tool.name}`);
    this.sent.push(tool.name);
    const handler = this.handlers.get(tool.name);
    return handler ? handler(args, options) : Promise.resolve({ isError: false, text: `${tool.remoteName} ok` });
  }
}

/** Dead letters in memory: one per id (a second add under an id changes nothing, as BullMQ's job ids). */
export class MemoryDeadLetters {
  readonly letters: { input: DeadLetterInput; id: string | undefined; resolution?: { action: string; at: string } }[] = [];
  private readonly world: { journal: Journal; faults: Faults };

  constructor(world: { journal: Journal; faults: Faults }) {
    this.world = world;
  }

  add(input: DeadLetterInput, id?: string): Promise<{ v: 1; kind: DeadLetterInput['kind']; marker: string; at: string; reason: string }> {
    this.world.journal.push(`deadLetters.add ${input.kind}`);
    if (this.world.faults.has('deadLetters.add')) return Promise.reject(failure('deadLetters.add'));
    if (id === undefined || !this.letters.some((l) => l.id === id)) this.letters.push({ input, id });
    return Promise.resolve({ v: 1, kind: input.kind, marker: '', at: '', reason: input.reason });
  }

  resolveInDoubt(key: string, resolution: { action: string; by: string; at: string }): Promise<boolean> {
    this.world.journal.push('deadLetters.resolveInDoubt');
    const letter = this.letters.find((l) => l.id === `in-doubt-${key}`);
    if (!letter || letter.resolution) return Promise.resolve(false);
    letter.resolution = resolution;
    return Promise.resolve(true);
  }
}

/** Events in memory, each also noted in the journal (`event tool.started`). */
export class JournalEventSink implements EventSink {
  readonly sink = new MemoryEventSink();
  private readonly journal: Journal;

  constructor(journal: Journal) {
    this.journal = journal;
  }

  emit(input: EmitInput): void {
    this.journal.push(`event ${input.type}`);
    this.sink.emit(input);
  }

  flush(): Promise<void> {
    return Promise.resolve();
  }
}
