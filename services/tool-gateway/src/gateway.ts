import { randomUUID } from 'node:crypto';
import { UnrecoverableError, type Job } from 'bullmq';
import { McpError, ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import {
  ToolCallJob,
  auditFields,
  describeIssues,
  redactSecrets,
  type AuditStatus,
  type Catalog,
  type CatalogTool,
  type ToolCallResult,
} from '@bosun/contract';
import { mcpServerConfig, type ClusterConfig, type Logger } from '@bosun/config';
import { decideCall, isReadOnlyTool, specialistCaller, type Caller } from '@bosun/policy';
import {
  ApprovalStore,
  NotAToolCallError,
  ToolCallRecords,
  keys,
  matchesProposedCall,
  type Approval,
  type DeadLetters,
  type EventSink,
  type RedisClient,
} from '@bosun/transport';
import { CallNotSentError, McpServerConnection, type McpCallOutcome } from './mcp.js';
import { inGatewaySpan, inMcpSpan, observeToolCall, type Span } from './gateway-telemetry.js';

/** The ports of the gateway. */
export interface GatewayDeps {
  redis: RedisClient;
  prefix: string;
  config: ClusterConfig;
  events: EventSink;
  deadLetters: Pick<DeadLetters, 'add'>;
  log: Logger;
}

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
  return { v: 1, key: call.key, tool: call.tool, status: 'error', isError: true, text: '', error, durationMs: 0, inDoubt: true };
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

  constructor(deps: GatewayDeps) {
    this.deps = deps;
    this.approvals = new ApprovalStore({ redis: deps.redis, prefix: deps.prefix });
    this.records = new ToolCallRecords({ redis: deps.redis, prefix: deps.prefix, ttlSeconds: deps.config.retention.toolRecords });
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
          this.unavailable[s.name] = (err as Error).message;
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
    return this.execute(parsed);
  }

  /**
   * Answers a tool-call request over NATS (`serveToolCalls`): as {@link process}, a request that
   * is not a tool call goes to the dead-letter queue with its data, and is refused.
   */
  async answer(data: unknown): Promise<ToolCallResult> {
    const parsed = await this.parseCall(data, `poison-nats-${randomUUID()}`);
    if (typeof parsed === 'string') throw new NotAToolCallError(parsed);
    return this.execute(parsed);
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
   * {@link unexpected}.
   */
  async execute(call: ToolCallJob): Promise<ToolCallResult> {
    return inGatewaySpan(call, (span) => this.executeCall(call, span));
  }

  private async executeCall(call: ToolCallJob, span: Span): Promise<ToolCallResult> {
    const run: CallRun = {
      call,
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
      const recorded = await this.records.recorded(call.key);
      if (recorded) {
        run.decision = 'recorded';
        return this.repeated(call, recorded);
      }
    }
    // A refusal is not recorded: nothing ran, and a recorded refusal would answer the same key
    // later, when an approval may cover it.
    if (!tool || !decision) return this.fail(run, `unknown tool "${call.tool}"`, { record: false });
    run.tool = tool;
    run.readOnly = isReadOnlyTool(tool);
    if (decision.decision === 'refuse') {
      if (!run.readOnly) await this.audit(call, 'refused');
      return this.fail(run, decision.reason, { record: false });
    }
    if (decision.decision === 'ask') {
      const verdict = await this.checkApproval(call);
      if (typeof verdict === 'string') {
        await this.audit(call, 'refused');
        return this.fail(run, verdict, { record: false });
      }
      run.approval = verdict;
    }
    return undefined;
  }

  /**
   * Claims the call atomically: only a new call, one an operator asked to retry (`bosun ack
   * --retry`), or a read-only call found in flight may be sent to the server. Returns the answer
   * when the call is not ours to send (recorded before, or in doubt), else undefined.
   */
  private async claim(run: CallRun): Promise<ToolCallResult | undefined> {
    const { call } = run;
    const outcome = await this.records.claim({
      key: call.key,
      tool: call.tool,
      shownArgs: run.shownArgs,
      argsRedacted: JSON.stringify(run.shownArgs) !== JSON.stringify(call.args),
      runId: call.runId,
      incidentId: call.incidentId,
      agent: call.agent,
      readOnly: run.readOnly,
      approvalId: call.approvalId,
    });
    if (outcome.claimed) {
      run.stage = 'claimed';
      return undefined;
    }
    if (outcome.result) return this.repeated(call, outcome.result);
    // A previous attempt sent this mutating call and nobody recorded what happened.
    run.stage = 'sent';
    return this.inDoubt(run, { known: outcome.state === 'in-doubt' });
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
    try {
      run.stage = 'sent';
      outcome = await inMcpSpan(tool, () =>
        server!.call(tool.remoteName, call.args, {
          timeoutMs: mcpServerConfig(config, tool.server)?.timeoutMs ?? config.gateway.callTimeoutMs,
          maxChars: config.gateway.maxResultChars,
          onProgress: this.progressEvents(run),
        }),
      );
    } catch (err) {
      return this.callFailed(run, err, Date.now() - started);
    }
    return this.answered(run, outcome, Date.now() - started);
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
      durationMs,
    };
    await this.records.recordDone(result);
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
    const message = err instanceof Error ? err.message : String(err);
    const timedOut = err instanceof McpError && err.code === Number(ErrorCode.RequestTimeout);
    if (err instanceof CallNotSentError) run.stage = 'claimed';
    const outcomeUnknown =
      !(err instanceof CallNotSentError) && (timedOut || !(err instanceof McpError) || err.code === Number(ErrorCode.ConnectionClosed));
    if (outcomeUnknown && !run.readOnly) {
      const why = timedOut ? `timed out after ${durationMs} ms` : `its connection failed before the answer came (${message})`;
      return this.inDoubt(run, { known: false, why, approval: run.approval });
    }
    this.deps.log.warn({ key: call.key, tool: call.tool, err }, 'tool call failed');
    if (!run.readOnly) await this.audit(call, 'error', run.approval);
    return this.fail(run, timedOut ? `timed out after ${durationMs} ms` : message, { record: true, durationMs });
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
  private async fail(run: CallRun, error: string, options: { record: boolean; durationMs?: number }): Promise<ToolCallResult> {
    const { call } = run;
    const durationMs = options.durationMs ?? 0;
    const result: ToolCallResult = { v: 1, key: call.key, tool: call.tool, status: 'error', isError: true, text: '', error, durationMs };
    if (options.record) {
      await this.records.recordDone(result);
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
    const message = err instanceof Error ? err.message : String(err);
    const mayHaveRun = run.stage === 'sent' && !run.readOnly;
    const why = `the gateway failed before it recorded the result (${message})`;
    try {
      if (mayHaveRun) return await this.inDoubt(run, { known: false, why, approval: run.approval });
      if (run.stage !== 'checking' && !run.readOnly) await this.audit(call, 'error', run.approval);
      return await this.fail(run, `the tool gateway could not process the call: ${message}`, { record: run.stage !== 'checking' });
    } catch (again) {
      this.deps.log.error({ err: again, key: call.key }, 'could not record the outcome of a tool call that failed unexpectedly');
      if (mayHaveRun) {
        this.emitInDoubt(run);
        return inDoubtResult(call, why);
      }
      const error = `the tool gateway could not process the call: ${message}`;
      this.deps.events.emit({ ...run.base, type: 'tool.failed', data: { key: call.key, tool: call.tool, error, durationMs: 0 } });
      return { v: 1, key: call.key, tool: call.tool, status: 'error', isError: true, text: '', error, durationMs: 0 };
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
    });
    await redis
      .xadd(keys.audit(prefix), 'MAXLEN', '~', String(this.deps.config.retention.audit.maxEntries), '*', ...entry)
      .catch((err: unknown) => log.error({ err, key: call.key }, 'could not write the audit entry'));
  }

  /**
   * Answers a mutating call that was sent and whose outcome nobody recorded. The first time
   * (`known: false`) it is audited, marked `in-doubt`, written to the dead-letter queue and
   * announced with `tool.in_doubt`; a call already in doubt is answered the same, with nothing new.
   */
  private async inDoubt(run: CallRun, options: { known: boolean; why?: string; approval?: Approval }): Promise<ToolCallResult> {
    const { call } = run;
    const result = inDoubtResult(call, options.why);
    if (!options.known) {
      // Found in flight after a crash, the gateway that sent it could not audit the outcome: this one does.
      if (!run.inDoubtAudited) await this.audit(call, 'in-doubt', options.approval);
      run.inDoubtAudited = true;
      this.deps.log.error({ key: call.key, tool: call.tool }, 'tool call in doubt');
      // The dead letter before the record's state: a gateway that dies in between leaves the record
      // `inflight`, and the next attempt declares the call in doubt again (the entry's id dedupes).
      // The other order would leave an `in-doubt` record that no dead letter announces.
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
      await this.records.markInDoubt(call.key);
      this.emitInDoubt(run);
    }
    return result;
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
