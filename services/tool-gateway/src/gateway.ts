import { randomUUID } from 'node:crypto';
import { UnrecoverableError, type Job } from 'bullmq';
import { McpError, ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import {
  TOOL_CALL_LEASE_MS,
  TOOL_CALL_LEASE_RENEW_MS,
  ToolCallJob,
  auditFields,
  describeIssues,
  redactSecrets,
  specialistQueue,
  toolCallDigest,
  type AuditStatus,
  type Catalog,
  type CatalogTool,
  type ToolCallCode,
  type ToolCallResult,
  errorMessage,
  sleep,
} from '@bosun/contract';
import { mcpServerConfig, type ClusterConfig, type Logger } from '@bosun/config';
import { decideCall, isReadOnlyTool, specialistCaller, type Caller } from '@bosun/policy';
import {
  ApprovalStore,
  NotAToolCallError,
  ToolCallRecords,
  keys,
  type ToolCallClaim,
  matchesProposedCall,
  type Approval,
  type DeadLetters,
  type EventSink,
  type RedisClient,
  toolCallSubject,
} from '@bosun/transport';
import { CallNotSentError, McpServerConnection, type McpCallOutcome } from './mcp.js';
import { inGatewaySpan, inMcpSpan, observeToolCall, type CallArrival, type Span } from './gateway-telemetry.js';

/** The ports of the gateway. */
export interface GatewayDeps {
  redis: RedisClient;
  prefix: string;
  config: ClusterConfig;
  events: EventSink;
  deadLetters: Pick<DeadLetters, 'add' | 'resolveInDoubt'>;
  log: Logger;
  /** How long a claim holds a running call (default `TOOL_CALL_LEASE_MS`; tests shorten it). */
  leaseMs?: number;
}

/** How often an attempt that finds a call running under another gateway's lease looks at its record again. */
const LEASE_POLL_MS = 250;

/**
 * How far one call got; what an unexpected failure means for it depends on this. `checking`:
 * policy and approval, nothing claimed; `claimed`: its record is `inflight`, nothing sent;
 * `sent`: sent to its server, by this attempt or (found in flight) an earlier one; `recorded`:
 * its outcome is recorded.
 */
type Stage = 'checking' | 'claimed' | 'sent' | 'recorded';

/** One call under way through {@link ToolGateway.execute}. */
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

/**
 * The answer for a mutating call in doubt; flagged `inDoubt` in its structure too, so the task
 * and the run count it without reading the text.
 */
function inDoubtResult(call: ToolCallJob, why = 'the gateway stopped before it recorded the result'): ToolCallResult {
  const error =
    `IN DOUBT: the mutating call ${call.tool} (key ${call.key}) was sent to its server, but ${why}. ` +
    'Whether it took effect is unknown. It will not be retried automatically; an operator must resolve it. ' +
    'Do not assume it succeeded or failed.';
  return {
    v: 1,
    key: call.key,
    tool: call.tool,
    status: 'error',
    isError: true,
    text: '',
    error,
    code: 'in_doubt',
    durationMs: 0,
    inDoubt: true,
  };
}

/** The resolution an in-doubt dead letter gets when the call's outcome is recorded after all. */
function seenDone(at = new Date().toISOString()): { action: string; by: string; at: string } {
  return { action: 'seen-done', by: 'tool-gateway', at };
}

/** The agent name calls through the gateway's own MCP face carry. */
export const MCP_CLIENT = 'mcp-client';

/**
 * The tool gateway: the only way agents reach MCP servers. It publishes the catalog, enforces
 * which specialist may call which tool, and records every call's result under its idempotency
 * key, so a call that arrives again is answered from the record and never executed twice.
 */
export class ToolGateway {
  private readonly deps: GatewayDeps;
  readonly servers: McpServerConnection[];
  private unavailable: Record<string, string> = {};
  private readonly approvals: ApprovalStore;
  private readonly records: ToolCallRecords;
  private readonly leaseRenewMs: number;

  constructor(deps: GatewayDeps) {
    this.deps = deps;
    this.approvals = new ApprovalStore({ redis: deps.redis, prefix: deps.prefix });
    this.records = new ToolCallRecords({
      redis: deps.redis,
      prefix: deps.prefix,
      leaseMs: deps.leaseMs,
      ttlSeconds: deps.config.retention.toolRecords,
    });
    // Three renewals fit in one lease.
    this.leaseRenewMs = deps.leaseMs === undefined ? TOOL_CALL_LEASE_RENEW_MS : Math.max(50, Math.floor(deps.leaseMs / 3));
    this.servers = Object.entries(deps.config.mcpServers).map(([name, cfg]) => {
      const s = new McpServerConnection(name, cfg, deps.log);
      s.onToolsChanged = () => void this.publishCatalog().catch((err: unknown) => deps.log.warn({ err }, 'could not publish the catalog'));
      return s;
    });
  }

  /** Connects every server (an unreachable one is reported in the catalog, not fatal) and publishes the catalog. */
  async start(): Promise<Catalog> {
    await Promise.all(
      this.servers.map(async (s) => {
        try {
          await s.connect();
          delete this.unavailable[s.name];
        } catch (err) {
          this.unavailable[s.name] = errorMessage(err);
          this.deps.log.error({ server: s.name, err }, 'MCP server unavailable');
        }
      }),
    );
    return this.publishCatalog();
  }

  /** The catalog of every connected server's tools. */
  catalog(): Catalog {
    return {
      v: 1,
      updatedAt: new Date().toISOString(),
      tools: this.servers.flatMap((s) => s.tools),
      unavailable: { ...this.unavailable },
    };
  }

  async publishCatalog(): Promise<Catalog> {
    const catalog = this.catalog();
    await this.deps.redis.set(keys.catalog(this.deps.prefix), JSON.stringify(catalog));
    return catalog;
  }

  /**
   * The BullMQ processor of the `tools` queue: parses the job and {@link execute}s the call. A job
   * whose data is not a tool call is poison: it goes to the dead-letter queue with its data, and
   * the job fails without retries.
   */
  async process(job: Job): Promise<ToolCallResult> {
    const parsed = await this.parseCall(job.data, `poison-${job.id ?? 'unknown'}`);
    if (typeof parsed === 'string') throw new UnrecoverableError(parsed);
    return this.execute(parsed, { via: 'queue' });
  }

  /**
   * Answers a tool-call request over NATS (`serveToolCalls`): as {@link process}, a request that
   * is not a tool call goes to the dead-letter queue with its data, and is refused.
   */
  async answer(data: unknown): Promise<ToolCallResult> {
    const parsed = await this.parseCall(data, `poison-nats-${randomUUID()}`);
    if (typeof parsed === 'string') throw new NotAToolCallError(parsed);
    return this.execute(parsed, { via: 'nats', subject: toolCallSubject(this.deps.prefix) });
  }

  /** The call in a job's or request's data, or (after its dead letter is written) why it is not one. */
  private async parseCall(data: unknown, deadLetterId: string): Promise<ToolCallJob | string> {
    const parsed = ToolCallJob.safeParse(data);
    if (parsed.success) return parsed.data;
    const reason = `invalid tool call: ${describeIssues(parsed.error).issues.join('; ')}`;
    await this.deps.deadLetters.add({ kind: 'poison', reason, input: data }, deadLetterId);
    return reason;
  }

  /**
   * Executes one call, from the tools queue or the gateway's MCP face: policy, approval check,
   * claim, the MCP call, record, events and audit (docs/durability.md, "Tool calls"). It always
   * answers with a result: an unexpected failure (Redis unreachable, a corrupt record) too, see
   * {@link unexpected}. `arrival` is how the call came, named on its span: by default the MCP
   * face (its own trace); {@link process} and {@link answer} name the queue and NATS.
   */
  async execute(call: ToolCallJob, arrival: CallArrival = { via: 'mcp' }): Promise<ToolCallResult> {
    return inGatewaySpan(call, arrival, (span) => this.executeCall(call, span));
  }

  private async executeCall(call: ToolCallJob, span: Span): Promise<ToolCallResult> {
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
    const started = performance.now();
    let result: ToolCallResult;
    try {
      result = (await this.admit(run)) ?? (await this.claim(run)) ?? (await this.send(run));
    } catch (err) {
      result = await this.unexpected(run, err);
    }
    observeToolCall({ tool: run.tool, decision: run.decision ?? 'unknown' }, result, (performance.now() - started) / 1000, span);
    return result;
  }

  /** Who is calling: the MCP face's policy for its own calls, else the specialist's (undefined for an unknown one). */
  private callerOf(agent: string): Caller | undefined {
    const face = this.deps.config.gateway.mcpServer;
    if (agent === MCP_CLIENT && face) return { tools: face.tools, mode: face.mode, approvalTimeoutMs: face.approvalTimeoutMs };
    return specialistCaller(this.deps.config, agent);
  }

  /**
   * Policy and approvals, decided here at call time, whatever the model was offered. Returns the
   * answer when the call goes no further (refused, or answered before), else undefined.
   */
  private async admit(run: CallRun): Promise<ToolCallResult | undefined> {
    const { call } = run;
    const tool = this.servers.flatMap((s) => s.tools).find((t) => t.name === call.tool);
    const decision = tool ? decideCall(this.deps.config, this.callerOf(call.agent), call.agent, tool) : undefined;
    run.decision = decision?.decision ?? 'unknown';
    if (!tool || decision?.decision !== 'allow') {
      // A call answered before is answered from its record, whatever the policy says now. (An
      // allowed call learns the same from the claim, in the same round trip.)
      const recorded = await this.records.recorded(call.key, toolCallDigest(call.key, call.tool, call.args));
      if (recorded) {
        run.decision = 'recorded';
        return this.repeated(call, recorded);
      }
    }
    // A refusal is not recorded: nothing ran, and a recorded refusal would answer the same key
    // later, when an approval may cover it.
    if (!tool || !decision) return this.fail(run, `unknown tool "${call.tool}"`, { record: false, code: 'unknown_tool' });
    run.tool = tool;
    run.readOnly = isReadOnlyTool(tool);
    if (decision.decision === 'refuse') {
      if (!run.readOnly) await this.audit(call, 'refused');
      return this.fail(run, decision.reason, { record: false, code: 'refused' });
    }
    if (decision.decision === 'ask') {
      const verdict = await this.checkApproval(call);
      if (typeof verdict === 'string') {
        await this.audit(call, 'refused');
        return this.fail(run, verdict, { record: false, code: call.approvalId ? 'denied' : 'needs_approval' });
      }
      run.approval = verdict;
    }
    return undefined;
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
    const { call } = run;
    const claim: ToolCallClaim = {
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
        key: `${this.deps.prefix}:${specialistQueue(call.agent)}:${call.taskLock.taskId}:lock`,
        token: call.taskLock.token,
      },
    };
    // A lease outlives its call by at most one lease: waiting longer means its gateway is stuck.
    const giveUpAt = Date.now() + this.timeoutOf(run.tool!) + 2 * (this.deps.leaseMs ?? TOOL_CALL_LEASE_MS);
    for (;;) {
      run.claimSent = true;
      const outcome = await this.records.claim(claim);
      if (outcome.claimed) {
        run.stage = 'claimed';
        return undefined;
      }
      if (outcome.state === 'stale') return this.staleOwner(run);
      if ('recordedTool' in outcome) return this.mismatch(run, outcome.recordedTool);
      if ('leaseMs' in outcome) {
        if (Date.now() > giveUpAt) return this.stillRunning(run);
        await sleep(Math.min(outcome.leaseMs, LEASE_POLL_MS));
        continue;
      }
      if ('result' in outcome && outcome.result) return this.repeated(call, outcome.result);
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
    return { v: 1, key: call.key, tool: call.tool, status: 'error', isError: true, text: '', error, code: 'refused', durationMs: 0 };
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

  /** Sends a claimed call to its MCP server, and records and reports what came of it. */
  private async send(run: CallRun): Promise<ToolCallResult> {
    const { call } = run;
    const tool = run.tool!;
    const { config, events } = this.deps;
    events.emit({
      ...run.base,
      type: 'tool.started',
      data: { key: call.key, tool: call.tool, readOnly: run.readOnly, args: run.shownArgs },
    });
    const server = this.servers.find((s) => s.name === tool.server);
    const started = Date.now();
    let outcome: McpCallOutcome;
    const lease = this.keepLease(run);
    try {
      run.stage = 'sent';
      outcome = await inMcpSpan(tool, () =>
        server!.call(tool.remoteName, call.args, {
          timeoutMs: this.timeoutOf(tool),
          maxChars: config.gateway.maxResultChars,
          onProgress: this.progressEvents(run),
        }),
      );
    } catch (err) {
      lease.stop();
      return this.callFailed(run, err, Date.now() - started);
    }
    lease.stop();
    return this.answered(run, outcome, Date.now() - started);
  }

  /**
   * Renews the call's lease while it runs, so that another attempt finding it in flight (a call
   * re-sent because this gateway fell silent on NATS, or a job given to another gateway) waits
   * for its outcome. A renewal that fails is only logged: the lease then runs out, and the call
   * is declared in doubt by whoever finds it, as when its gateway dies.
   */
  private keepLease(run: CallRun): { stop(): void } {
    let pending = false;
    const timer = setInterval(() => {
      if (pending) return;
      pending = true;
      this.records
        .renewLease(run.call.key, run.owner)
        .catch((err: unknown) => this.deps.log.warn({ err, key: run.call.key }, 'could not renew the lease of a running tool call'))
        .finally(() => (pending = false));
    }, this.leaseRenewMs);
    return { stop: () => clearInterval(timer) };
  }

  /** Forwards a call's MCP progress as events, at most two a second: observers, not a firehose. */
  private progressEvents(run: CallRun): (p: { progress: number; total?: number; message?: string }) => void {
    let lastProgress = 0;
    return (p) => {
      if (Date.now() - lastProgress < 500 && p.total !== p.progress) return;
      lastProgress = Date.now();
      this.deps.events.emit({ ...run.base, type: 'tool.progress', data: { key: run.call.key, tool: run.call.tool, ...p } });
    };
  }

  /** The server answered (even with its own `isError`): record, event, audit, in that order. */
  private async answered(run: CallRun, outcome: McpCallOutcome, durationMs: number): Promise<ToolCallResult> {
    const { call } = run;
    const result: ToolCallResult = {
      v: 1,
      key: call.key,
      tool: call.tool,
      status: 'ok',
      isError: outcome.isError,
      text: outcome.text,
      ...(outcome.structured === undefined ? {} : { structured: outcome.structured }),
      ...(outcome.isError ? { code: 'tool_error' as const } : {}),
      durationMs,
    };
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
    const outcome = await this.records.recordDone(result, run.owner);
    if (outcome === 'seen-done') {
      this.deps.log.warn(
        { key: call.key, tool: call.tool },
        'tool call in doubt, later seen done: its outcome is recorded beside the declaration',
      );
      await this.deps.deadLetters.resolveInDoubt(call.key, seenDone());
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
    const { code } = options;
    const durationMs = options.durationMs ?? 0;
    const result: ToolCallResult = {
      v: 1,
      key: call.key,
      tool: call.tool,
      status: 'error',
      isError: true,
      text: '',
      error,
      code,
      durationMs,
    };
    if (options.record) {
      await this.record(run, result);
      run.stage = 'recorded';
      run.result = result;
    }
    this.deps.events.emit({ ...run.base, type: 'tool.failed', data: { key: call.key, tool: call.tool, error, durationMs } });
    return result;
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
      await this.records
        .abandonClaim(call.key, run.owner)
        .catch((e: unknown) => this.deps.log.warn({ err: e, key: call.key }, 'could not free the claim of a call that was not sent'));
    const message = errorMessage(err);
    const mayHaveRun = run.stage === 'sent' && !run.readOnly;
    const why = `the gateway failed before it recorded the result (${message})`;
    try {
      if (mayHaveRun) return (await this.inDoubt(run, { by: 'owner', why, approval: run.approval }))!;
      if (run.stage !== 'checking' && !run.readOnly) await this.audit(call, 'error', run.approval);
      return await this.fail(run, `the tool gateway could not process the call: ${message}`, {
        record: run.stage !== 'checking',
        code: 'tool_error',
      });
    } catch (again) {
      this.deps.log.error({ err: again, key: call.key }, 'could not record the outcome of a tool call that failed unexpectedly');
      if (mayHaveRun) {
        this.emitInDoubt(run);
        return inDoubtResult(call, why);
      }
      const error = `the tool gateway could not process the call: ${message}`;
      this.deps.events.emit({ ...run.base, type: 'tool.failed', data: { key: call.key, tool: call.tool, error, durationMs: 0 } });
      return { v: 1, key: call.key, tool: call.tool, status: 'error', isError: true, text: '', error, code: 'tool_error', durationMs: 0 };
    }
  }

  /**
   * An `ask` tool runs only under an approval that was approved and covers this exact call: one
   * of its approved calls has this call's idempotency key, tool and arguments (as proposed), in
   * the same run. An approval thus authorises each approved call once — the record of its key
   * answers any repeat — and no other key. Returns the approval, or why the call is refused.
   */
  private async checkApproval(call: ToolCallJob): Promise<Approval | string> {
    if (!call.approvalId) return `tool "${call.tool}" needs an operator's approval`;
    const approval = await this.approvals.get(call.approvalId);
    if (!approval) return `approval ${call.approvalId} does not exist`;
    if (approval.status !== 'approved') return `approval ${call.approvalId} is ${approval.status}, not approved`;
    const approved = approval.calls.filter((c) => c.needsApproval && (approval.approved ?? []).includes(c.index));
    const ofKey = approved.filter((c) => c.key === call.key);
    if (ofKey.length === 0 || approval.runId !== call.runId) {
      return `approval ${call.approvalId} does not cover this call (key ${call.key}): it approved ${approved.map((c) => c.key).join(', ') || 'no call'}${approval.runId === call.runId ? '' : ` of run ${approval.runId}`}, each once, under its own key`;
    }
    if (!ofKey.some((c) => matchesProposedCall(approval, c, call.tool, call.args)))
      return `approval ${call.approvalId} does not cover this call of ${call.tool} with these arguments`;
    return approval;
  }

  /**
   * Appends a mutating call to the audit stream (arguments with secrets redacted), before the
   * caller hears the outcome. A failed write is logged as an error; it does not change the
   * outcome, which has happened.
   */
  private async audit(call: ToolCallJob, status: AuditStatus, approval?: Approval): Promise<void> {
    const { redis, prefix, log } = this.deps;
    const entry = auditFields({
      at: new Date().toISOString(),
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
    });
    await redis
      .xadd(keys.audit(prefix), 'MAXLEN', '~', String(this.deps.config.retention.audit.maxEntries), '*', ...entry)
      .catch((err: unknown) => log.error({ err, key: call.key }, 'could not write the audit entry'));
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
      const marked = await this.records.markInDoubt(call.key, options.by === 'owner' ? { owner: run.owner } : { lapsed: true });
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
    const record = await this.records.read(call.key);
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

  async close(): Promise<void> {
    await Promise.all(this.servers.map((s) => s.close()));
    await this.approvals.close();
  }
}
