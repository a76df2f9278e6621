import { randomUUID } from 'node:crypto';
import { McpError, ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import {
  TOOL_CALL_LEASE_MS,
  TOOL_CALL_LEASE_RENEW_MS,
  redactSecrets,
  specialistQueue,
  INCIDENTS_QUEUE,
  toolCallDigest,
  type AuditStatus,
  type CatalogTool,
  type ToolCallCode,
  type ToolCallJob,
  type ToolCallResult,
  errorMessage,
} from '@bosun/contract';
import { mcpServerConfig, type ClusterConfig, type Logger } from '@bosun/config';
import type { Approval, DeadLetters, EventSink, ToolCallClaim } from '@bosun/transport';
import { admit, approvalToRead, policyView } from './admission.js';
import { answeredResult, errorResult, inDoubtResult, seenDone } from './call-results.js';
import { CallNotSentError, type McpCallOutcome } from './mcp.js';
import {
  systemClock,
  type ApprovalReader,
  type AuditLog,
  type Clock,
  type McpProgress,
  type McpServers,
  type ToolRecords,
} from './ports.js';

/** The ports and settings of {@link ToolCallFlow}. */
export interface CallFlowDeps {
  records: ToolRecords;
  approvals: ApprovalReader;
  audit: AuditLog;
  servers: McpServers;
  events: EventSink;
  deadLetters: Pick<DeadLetters, 'add' | 'resolveInDoubt'>;
  /** The cluster's config: policy, per-call timeouts, result size. */
  config: ClusterConfig;
  /** The key prefix (a caller's task lock is `<prefix>:<specialist queue>:<task id>:lock`). */
  prefix: string;
  log: Logger;
  /** Default {@link systemClock}. */
  clock?: Clock;
  /** How long a claim holds a running call (default `TOOL_CALL_LEASE_MS`); the records use the same. */
  leaseMs?: number;
}

/** How often an attempt that finds a call running under another gateway's lease looks at its record again. */
export const LEASE_POLL_MS = 250;

/**
 * How far one call got; what an unexpected failure means for it depends on this. `checking`:
 * policy and approval, nothing claimed; `claimed`: its record is `inflight`, nothing sent;
 * `sent`: sent to its server, by this attempt or (found in flight) an earlier one; `recorded`:
 * its outcome is recorded.
 */
type Stage = 'checking' | 'claimed' | 'sent' | 'recorded';

/** One call under way through {@link ToolCallFlow.execute}. */
interface CallRun {
  readonly call: ToolCallJob;
  /** This attempt's claim token: a claim re-sent after a lost reply is its own again, and only it records the outcome. */
  readonly owner: string;
  /** Whether the claim was sent (it may have been made though its reply was lost). */
  claimSent: boolean;
  /** The arguments as the gateway shows and stores them (events, record, audit, dead letters): secrets redacted. Only the MCP server gets the real ones. */
  readonly shownArgs: unknown;
  readonly base: { runId: string; incidentId: string; agent: string };
  stage: Stage;
  tool?: CatalogTool;
  readOnly: boolean;
  approval?: Approval;
  /** Whether its `in-doubt` audit entry is written. */
  inDoubtAudited: boolean;
  /** The result, once recorded. */
  result?: ToolCallResult;
  /** What admitted or refused it, as counted in metrics: the policy's decision, `unknown` (no such tool) or `recorded` (answered from its record). */
  decision?: string;
}

/** The answer to one call, with what the metrics and the span name it by. */
export interface CallAnswer {
  result: ToolCallResult;
  /** The catalog tool it named; undefined for an unknown one. */
  tool: CatalogTool | undefined;
  /** What admitted or refused it: the policy's decision, `unknown`, `recorded`, `stale` or `mismatch`. */
  decision: string;
}

/**
 * One call's way through the gateway, over its ports: admission (policy and approval, decided by
 * {@link admit} on data), then claim → send → record, then events and audit (docs/durability.md,
 * "Tool calls"). Only a claim makes a call this attempt's to send, and only its owner records
 * the outcome, so a call that arrives again is answered from its record and never run twice; a
 * mutating call whose outcome nobody recorded is declared in doubt, never re-sent.
 */
export class ToolCallFlow {
  private readonly deps: CallFlowDeps;
  private readonly clock: Clock;
  private readonly leaseMs: number;
  private readonly leaseRenewMs: number;

  constructor(deps: CallFlowDeps) {
    this.deps = deps;
    this.clock = deps.clock ?? systemClock;
    this.leaseMs = deps.leaseMs ?? TOOL_CALL_LEASE_MS;
    // Three renewals fit in one lease.
    this.leaseRenewMs = deps.leaseMs === undefined ? TOOL_CALL_LEASE_RENEW_MS : Math.max(50, Math.floor(deps.leaseMs / 3));
  }

  /**
   * Executes one call. It always answers with a result: an unexpected failure (Redis
   * unreachable, a corrupt record) too, see {@link unexpected}.
   */
  async execute(call: ToolCallJob): Promise<CallAnswer> {
    const run: CallRun = {
      call,
      owner: randomUUID(),
      claimSent: false,
      shownArgs: redactSecrets(call.args),
      base: { runId: call.runId, incidentId: call.incidentId, agent: call.agent },
      stage: 'checking',
      readOnly: false,
      inDoubtAudited: false,
    };
    let result: ToolCallResult;
    try {
      result = (await this.admit(run)) ?? (await this.claim(run)) ?? (await this.send(run));
    } catch (err) {
      result = await this.unexpected(run, err);
    }
    return { result, tool: run.tool, decision: run.decision ?? 'unknown' };
  }

  /**
   * Policy and approvals, decided here at call time, whatever the model was offered. Returns the
   * answer when the call goes no further (refused, or answered before), else undefined.
   */
  private async admit(run: CallRun): Promise<ToolCallResult | undefined> {
    const { call } = run;
    const view = policyView(this.deps.config, call, this.deps.servers.tools());
    run.decision = view.decision?.decision ?? 'unknown';
    if (view.decision?.decision !== 'allow') {
      // A call answered before is answered from its record, whatever the policy says now. (An
      // allowed call learns the same from the claim, in the same round trip.)
      const recorded = await this.deps.records.recorded(call.key, toolCallDigest(call.key, call.tool, call.args));
      if (recorded) {
        run.decision = 'recorded';
        return this.repeated(call, recorded);
      }
    }
    const approvalId = approvalToRead(call, view);
    const admission = admit({ call, view, approval: approvalId ? await this.deps.approvals.get(approvalId) : null });
    if (admission.tool) run.tool = admission.tool;
    run.readOnly = admission.readOnly;
    if (!admission.admitted) {
      if (admission.audit) await this.audit(call, 'refused');
      return this.fail(run, admission.reason, { record: false, code: admission.code });
    }
    if (admission.approval) run.approval = admission.approval;
    return undefined;
  }

  /** What the record shows of a call when it is claimed. */
  private claimOf(run: CallRun): ToolCallClaim {
    const { call } = run;
    return {
      key: call.key,
      tool: call.tool,
      shownArgs: run.shownArgs,
      argsRedacted: JSON.stringify(run.shownArgs) !== JSON.stringify(call.args),
      runId: call.runId,
      incidentId: call.incidentId,
      agent: call.agent,
      readOnly: run.readOnly,
      approvalId: call.approvalId,
      digest: toolCallDigest(call.key, call.tool, call.args),
      owner: run.owner,
      lock: call.taskLock && {
        // BullMQ's lock key of the task's job, or of its run's incident job for a local task.
        key: call.taskLock.run
          ? `${this.deps.prefix}:${INCIDENTS_QUEUE}:${call.taskLock.run.jobId}:lock`
          : `${this.deps.prefix}:${specialistQueue(call.agent)}:${call.taskLock.taskId}:lock`,
        token: call.taskLock.token,
      },
    };
  }

  /**
   * Claims the call atomically: only a new call, one an operator asked to retry (`bosun ack
   * --retry`), or a read-only call found in flight may be sent to the server. Returns the answer
   * when the call is not ours to send: refused (a stale owner, another call under this key),
   * recorded before, or in doubt. A mutating call found running under another gateway's live
   * lease is waited for — its record is looked at again until it has an outcome or the lease
   * runs out — never declared in doubt while its gateway is alive.
   */
  private async claim(run: CallRun): Promise<ToolCallResult | undefined> {
    const claim = this.claimOf(run);
    // A lease outlives its call by at most one lease: waiting longer means its gateway is stuck.
    const giveUpAt = this.clock.now() + this.timeoutOf(run.tool!) + 2 * this.leaseMs;
    for (;;) {
      run.claimSent = true;
      const outcome = await this.deps.records.claim(claim);
      if (outcome.claimed) {
        run.stage = 'claimed';
        return undefined;
      }
      if (outcome.state === 'stale') return this.staleOwner(run);
      if ('recordedTool' in outcome) return this.mismatch(run, outcome.recordedTool);
      if ('leaseMs' in outcome) {
        if (this.clock.now() > giveUpAt) return this.stillRunning(run);
        await this.clock.sleep(Math.min(outcome.leaseMs, LEASE_POLL_MS));
        continue;
      }
      if ('result' in outcome && outcome.result) return this.repeated(run.call, outcome.result);
      // A previous attempt sent this mutating call; its lease ran out with nothing recorded.
      run.stage = 'sent';
      if (outcome.state === 'in-doubt') return this.inDoubt(run, { by: 'known' });
      const answer = await this.inDoubt(run, { by: 'lapsed' });
      if (answer) return answer;
      // Its gateway renewed the lease meanwhile: wait for it again.
      run.stage = 'checking';
    }
  }

  /** The per-call timeout of a tool: its server's `timeoutMs`, or `gateway.callTimeoutMs`. */
  private timeoutOf(tool: CatalogTool): number {
    const { config } = this.deps;
    return mcpServerConfig(config, tool.server)?.timeoutMs ?? config.gateway.callTimeoutMs;
  }

  /**
   * The caller no longer holds its task (its lock went to another process): nothing runs, nothing
   * is recorded or announced — the task's new owner makes this call under its own lock.
   */
  private staleOwner(run: CallRun): ToolCallResult {
    const { call } = run;
    run.decision = 'stale';
    this.deps.log.info({ key: call.key, tool: call.tool, taskId: call.taskLock?.taskId }, 'refused a call from a stale owner of its task');
    const error = `not executed: the specialist that sent it no longer holds task ${call.taskLock?.taskId ?? ''} (its lock expired or passed to another process, which makes this call itself)`;
    return errorResult(call, error, 'refused');
  }

  /**
   * The key is recorded for another call (another tool or other arguments): refused, never
   * answered with that call's result, and written to the dead-letter queue with what was sent.
   */
  private async mismatch(run: CallRun, recordedTool: string): Promise<ToolCallResult> {
    const { call } = run;
    run.decision = 'mismatch';
    const reason =
      `tool call key ${call.key} is recorded for another call (${recordedTool || 'unknown tool'} with its own arguments), ` +
      `not ${call.tool} with these arguments: a key names one call, so this one is refused and nothing runs`;
    this.deps.log.error({ key: call.key, tool: call.tool, recordedTool }, 'tool call refused: its key is recorded for another call');
    await this.deps.deadLetters.add(
      {
        kind: 'poison',
        runId: call.runId,
        incidentId: call.incidentId,
        agent: call.agent,
        reason,
        input: { key: call.key, tool: call.tool, args: run.shownArgs, recordedTool },
      },
      `poison-mismatch-${call.key}-${toolCallDigest(call.key, call.tool, call.args).slice(0, 12)}`,
    );
    if (!run.readOnly) await this.audit(call, 'refused');
    return this.fail(run, reason, { record: false, code: 'refused' });
  }

  /** A call still running under another gateway's lease long after its timeout: answered with an error, not in doubt (its gateway is alive and will record it). */
  private stillRunning(run: CallRun): Promise<ToolCallResult> {
    return this.fail(
      run,
      `the call is still running in another gateway well past its timeout; its outcome will be in its record (key ${run.call.key})`,
      { record: false, code: 'timeout' },
    );
  }

  /** Sends a claimed call to its MCP server (announced first, with `tool.started`), and records and reports what came of it. */
  private async send(run: CallRun): Promise<ToolCallResult> {
    const { call } = run;
    const tool = run.tool!;
    this.deps.events.emit({
      ...run.base,
      type: 'tool.started',
      data: { key: call.key, tool: call.tool, readOnly: run.readOnly, args: run.shownArgs },
    });
    const started = this.clock.now();
    let outcome: McpCallOutcome;
    const lease = this.keepLease(run);
    try {
      run.stage = 'sent';
      outcome = await this.deps.servers.call(tool, call.args, {
        timeoutMs: this.timeoutOf(tool),
        maxChars: this.deps.config.gateway.maxResultChars,
        onProgress: this.progressEvents(run),
      });
    } catch (err) {
      lease.stop();
      return this.callFailed(run, err, this.clock.now() - started);
    }
    lease.stop();
    return this.answered(run, outcome, this.clock.now() - started);
  }

  /**
   * Renews the call's lease while it runs, so that another attempt finding it in flight (a call
   * re-sent because this gateway fell silent on NATS, or a job given to another gateway) waits
   * for its outcome. A renewal that fails is only logged: the lease then runs out, and the call
   * is declared in doubt by whoever finds it, as when its gateway dies.
   */
  private keepLease(run: CallRun): { stop(): void } {
    let pending = false;
    return this.clock.every(this.leaseRenewMs, () => {
      if (pending) return;
      pending = true;
      this.deps.records
        .renewLease(run.call.key, run.owner)
        .catch((err: unknown) => this.deps.log.warn({ err, key: run.call.key }, 'could not renew the lease of a running tool call'))
        .finally(() => (pending = false));
    });
  }

  /** Forwards a call's MCP progress as events, at most two a second: observers, not a firehose. */
  private progressEvents(run: CallRun): (p: McpProgress) => void {
    let lastProgress = 0;
    return (p) => {
      if (this.clock.now() - lastProgress < 500 && p.total !== p.progress) return;
      lastProgress = this.clock.now();
      this.deps.events.emit({ ...run.base, type: 'tool.progress', data: { key: run.call.key, tool: run.call.tool, ...p } });
    };
  }

  /** The server answered (even with its own `isError`): record, event, audit, in that order. */
  private async answered(run: CallRun, outcome: McpCallOutcome, durationMs: number): Promise<ToolCallResult> {
    const { call } = run;
    const result = answeredResult(call, outcome, durationMs);
    await this.record(run, result);
    run.stage = 'recorded';
    run.result = result;
    this.deps.events.emit({
      ...run.base,
      type: 'tool.completed',
      data: { key: call.key, tool: call.tool, isError: outcome.isError, durationMs, chars: outcome.text.length },
    });
    if (!run.readOnly) await this.audit(call, outcome.isError ? 'tool-error' : 'ok', run.approval);
    return result;
  }

  /**
   * The MCP call threw. Sent, and then the answer was lost (timeout, connection closed, transport
   * failure): the server may have applied the change, so a mutating call is in doubt. A JSON-RPC
   * error reply, or a call never sent, is an ordinary failure, recorded as such.
   */
  private async callFailed(run: CallRun, err: unknown, durationMs: number): Promise<ToolCallResult> {
    const { call } = run;
    const message = errorMessage(err);
    const timedOut = err instanceof McpError && err.code === Number(ErrorCode.RequestTimeout);
    if (err instanceof CallNotSentError) run.stage = 'claimed';
    const outcomeUnknown =
      !(err instanceof CallNotSentError) && (timedOut || !(err instanceof McpError) || err.code === Number(ErrorCode.ConnectionClosed));
    if (outcomeUnknown && !run.readOnly) {
      const why = timedOut ? `timed out after ${durationMs} ms` : `its connection failed before the answer came (${message})`;
      return (await this.inDoubt(run, { by: 'owner', why, approval: run.approval }))!;
    }
    this.deps.log.warn({ key: call.key, tool: call.tool, err }, 'tool call failed');
    if (!run.readOnly) await this.audit(call, 'error', run.approval);
    return this.fail(run, timedOut ? `timed out after ${durationMs} ms` : message, {
      record: true,
      durationMs,
      code: timedOut ? 'timeout' : 'tool_error',
    });
  }

  /**
   * Records this attempt's outcome of a call. A call another gateway declared in doubt meanwhile
   * (its lease ran out while this one was cut off) is now "in doubt, later seen done": the
   * record holds both, the index let go of it in the same write, and its dead letter is
   * resolved here. An outcome this attempt no longer owns is not written (logged).
   */
  private async record(run: CallRun, result: ToolCallResult): Promise<void> {
    const { call } = run;
    const outcome = await this.deps.records.recordDone(result, run.owner);
    if (outcome === 'seen-done') {
      this.deps.log.warn(
        { key: call.key, tool: call.tool },
        'tool call in doubt, later seen done: its outcome is recorded beside the declaration',
      );
      await this.deps.deadLetters.resolveInDoubt(call.key, seenDone(this.isoNow()));
    } else if (outcome === 'late' || outcome === 'not-owner')
      this.deps.log.warn(
        { key: call.key, tool: call.tool, outcome, status: result.status },
        outcome === 'late'
          ? 'the outcome of a tool call came after an operator resolved it; kept beside the resolution as lateResult'
          : 'the outcome of a tool call was not recorded: another attempt claimed the call since',
      );
  }

  /** A call answered from its record. */
  private repeated(call: ToolCallJob, recorded: ToolCallResult): ToolCallResult {
    this.deps.log.debug({ key: call.key }, 'answering a repeated call from its record');
    return recorded;
  }

  /**
   * Answers a call with an error and a `tool.failed` event. A call that was claimed (sent and
   * failed, or never sent) is recorded under its key; a refusal is not.
   */
  private async fail(
    run: CallRun,
    error: string,
    options: { record: boolean; code: ToolCallCode; durationMs?: number },
  ): Promise<ToolCallResult> {
    const { call } = run;
    const durationMs = options.durationMs ?? 0;
    const result = errorResult(call, error, options.code, durationMs);
    if (options.record) {
      await this.record(run, result);
      run.stage = 'recorded';
      run.result = result;
    }
    this.failedEvent(run, error, durationMs);
    return result;
  }

  private failedEvent(run: CallRun, error: string, durationMs: number): void {
    const { call } = run;
    this.deps.events.emit({ ...run.base, type: 'tool.failed', data: { key: call.key, tool: call.tool, error, durationMs } });
  }

  /**
   * An error nobody expected (Redis unreachable, a corrupt record, a bug): the caller still gets
   * a result, by the same rules as an expected failure. A mutating call that may have been sent
   * is in doubt; a claimed call that was not sent (or a read-only one) is recorded as failed; a
   * call not yet claimed is answered with the error and not recorded. When even that cannot be
   * written, the caller is answered all the same, and a mutating call left `inflight` is found
   * in doubt by the next attempt.
   */
  private async unexpected(run: CallRun, err: unknown): Promise<ToolCallResult> {
    const { call } = run;
    this.deps.log.error({ err, key: call.key, tool: call.tool, stage: run.stage }, 'tool call failed unexpectedly');
    if (run.stage === 'recorded' && run.result) return run.result;
    // The claim may have been made though its answer was lost: free the key, since nothing was sent.
    if (run.stage === 'checking' && run.claimSent)
      await this.deps.records
        .abandonClaim(call.key, run.owner)
        .catch((e: unknown) => this.deps.log.warn({ err: e, key: call.key }, 'could not free the claim of a call that was not sent'));
    const message = errorMessage(err);
    const mayHaveRun = run.stage === 'sent' && !run.readOnly;
    const why = `the gateway failed before it recorded the result (${message})`;
    const error = `the tool gateway could not process the call: ${message}`;
    try {
      if (mayHaveRun) return (await this.inDoubt(run, { by: 'owner', why, approval: run.approval }))!;
      if (run.stage !== 'checking' && !run.readOnly) await this.audit(call, 'error', run.approval);
      return await this.fail(run, error, { record: run.stage !== 'checking', code: 'tool_error' });
    } catch (again) {
      this.deps.log.error({ err: again, key: call.key }, 'could not record the outcome of a tool call that failed unexpectedly');
      if (mayHaveRun) {
        this.emitInDoubt(run);
        return inDoubtResult(call, why);
      }
      this.failedEvent(run, error, 0);
      return errorResult(call, error, 'tool_error');
    }
  }

  private isoNow(): string {
    return new Date(this.clock.now()).toISOString();
  }

  /**
   * Appends a mutating call to the audit stream (arguments with secrets redacted), before the
   * caller hears the outcome. A failed write is logged as an error; it does not change the
   * outcome, which has happened.
   */
  private async audit(call: ToolCallJob, status: AuditStatus, approval?: Approval): Promise<void> {
    const entry = {
      at: this.isoNow(),
      key: call.key,
      runId: call.runId,
      incidentId: call.incidentId,
      agent: call.agent,
      tool: call.tool,
      args: redactSecrets(call.args),
      approvalId: approval?.id ?? call.approvalId ?? null,
      approver: approval?.decidedBy ?? null,
      status,
      // Who decided, as verified: every vote of a rule of several people, else the one decider.
      deciders: approval?.votes?.map((v) => v.actor) ?? (approval?.actor ? [approval.actor] : []),
    };
    await this.deps.audit
      .append(entry)
      .catch((err: unknown) => this.deps.log.error({ err, key: call.key }, 'could not write the audit entry'));
  }

  /**
   * Answers a mutating call that was sent and whose outcome nobody recorded: declared in doubt by
   * the gateway that sent it (`owner`: a timeout, a failed connection) or by one that found it in
   * flight with its lease run out (`lapsed`), or found already in doubt (`known`). The
   * declaration — the record's state and the in-doubt index, in one script — comes first; the
   * first time, it is then audited, written to the dead-letter queue and announced with
   * `tool.in_doubt`. The dead letter is written again (under its one id) by every later attempt
   * that finds the call in doubt, so a gateway that died in between leaves no declaration
   * unannounced. Undefined when a `lapsed` declaration finds the lease renewed: wait again.
   */
  private async inDoubt(
    run: CallRun,
    options: { by: 'owner' | 'lapsed' | 'known'; why?: string; approval?: Approval },
  ): Promise<ToolCallResult | undefined> {
    const { call } = run;
    const result = inDoubtResult(call, options.why);
    if (options.by !== 'known') {
      const marked = await this.deps.records.markInDoubt(call.key, options.by === 'owner' ? { owner: run.owner } : { lapsed: true });
      if (marked.kind === 'leased') return undefined;
      // Its outcome was recorded meanwhile: that is the answer.
      if (marked.kind === 'done' && marked.result) return this.repeated(call, marked.result);
      if (marked.kind === 'marked') {
        if (!run.inDoubtAudited) await this.audit(call, 'in-doubt', options.approval);
        run.inDoubtAudited = true;
        this.deps.log.error({ key: call.key, tool: call.tool, by: options.by }, 'tool call in doubt');
        await this.inDoubtLetter(run, result);
        this.emitInDoubt(run);
        return result;
      }
    }
    await this.inDoubtLetter(run, result);
    return result;
  }

  /**
   * The in-doubt dead letter of a call (one per key: its id dedupes). Its outcome may have been
   * recorded between the declaration and this entry: then it is resolved at once, as the gateway
   * that recorded it would have done had the entry been there.
   */
  private async inDoubtLetter(run: CallRun, result: ToolCallResult): Promise<void> {
    const { call } = run;
    await this.deps.deadLetters.add(
      {
        kind: 'in-doubt',
        runId: call.runId,
        incidentId: call.incidentId,
        agent: call.agent,
        reason: result.error!,
        input: { key: call.key, tool: call.tool, args: run.shownArgs },
      },
      `in-doubt-${call.key}`,
    );
    const record = await this.deps.records.read(call.key);
    if (record?.state === 'done' && record.seenDoneAt) await this.deps.deadLetters.resolveInDoubt(call.key, seenDone(record.seenDoneAt));
  }

  private emitInDoubt(run: CallRun): void {
    const { call } = run;
    this.deps.events.emit({
      ...run.base,
      type: 'tool.in_doubt',
      data: { key: call.key, tool: call.tool, args: run.shownArgs, server: run.tool?.server },
    });
  }
}
