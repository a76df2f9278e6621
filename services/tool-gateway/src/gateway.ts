import { UnrecoverableError, type Job } from 'bullmq';
import type { RedisClient } from '@bosun/transport';
import { McpError, ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import { ToolCallJob, describeIssues, redactSecrets, type Catalog, type CatalogTool, type ToolCallResult } from '@bosun/contract';
import { mcpServerConfig, type ClusterConfig, type Logger } from '@bosun/config';
import { decideCall, isReadOnlyTool, specialistCaller } from '@bosun/policy';
import { ApprovalStore, keys, matchesProposedCall, type Approval, type DeadLetters, type EventSink } from '@bosun/transport';
import { CallNotSentError, McpServerConnection } from './mcp.js';

/** The ports of the gateway. */
export interface GatewayDeps {
  redis: RedisClient;
  prefix: string;
  config: ClusterConfig;
  events: EventSink;
  deadLetters: Pick<DeadLetters, 'add'>;
  log: Logger;
}

const RECORD_TTL_SECONDS = 7 * 24 * 3600;

/**
 * KEYS[1] the call record; ARGV: readOnly ('1'|'0'), ttl, tool, args (secrets redacted), runId,
 * incidentId, agent, now, approvalId, argsRedacted ('true'|'false': the stored args are not the real ones).
 * Returns ['claimed'] after marking the record in flight, ['done', <recorded result>] for a call
 * already answered, or [<the state that prevents it>]. One round trip for a new call.
 */
const CLAIM_SCRIPT = `
local state = redis.call('HGET', KEYS[1], 'state')
if (not state) or state == 'retry' or (ARGV[1] == '1' and state == 'inflight') then
  redis.call('HSET', KEYS[1], 'state', 'inflight', 'tool', ARGV[3], 'args', ARGV[4], 'runId', ARGV[5],
    'incidentId', ARGV[6], 'agent', ARGV[7], 'startedAt', ARGV[8], 'readOnly', ARGV[1] == '1' and 'true' or 'false', 'approvalId', ARGV[9],
    'argsRedacted', ARGV[10])
  redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2]))
  return {'claimed'}
end
if state == 'done' then
  return {'done', redis.call('HGET', KEYS[1], 'result') or ''}
end
return {state}
`;

/** The claim script, registered once per connection (then sent as EVALSHA, not as text). */
function claimCall(redis: RedisClient, args: string[]): Promise<[string, string?]> {
  const r = redis as RedisClient & { bosunClaimCall?: (key: string, ...argv: string[]) => Promise<[string, string?]> };
  if (!r.bosunClaimCall) redis.defineCommand('bosunClaimCall', { numberOfKeys: 1, lua: CLAIM_SCRIPT });
  return r.bosunClaimCall!(...(args as [string, ...string[]]));
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

  constructor(deps: GatewayDeps) {
    this.deps = deps;
    this.approvals = new ApprovalStore({ redis: deps.redis, prefix: deps.prefix });
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
          this.deps.log.error({ server: s.name, err: (err as Error).message }, 'MCP server unavailable');
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

  /** The BullMQ processor of the `tools` queue. */
  async process(job: Job): Promise<ToolCallResult> {
    const { redis, prefix, config, events, deadLetters, log } = this.deps;
    const parsed = ToolCallJob.safeParse(job.data);
    if (!parsed.success) {
      const reason = `invalid tool call: ${describeIssues(parsed.error).issues.join('; ')}`;
      await deadLetters.add({ kind: 'poison', reason, input: job.data }, `poison-${job.id ?? 'unknown'}`);
      throw new UnrecoverableError(reason);
    }
    const call = parsed.data;
    // The arguments as the gateway shows and stores them (events, call record, audit, dead
    // letters): secrets redacted. Only the MCP server gets the real ones.
    const shownArgs = redactSecrets(call.args);
    const recordKey = keys.toolCall(prefix, call.key);
    const base = { runId: call.runId, incidentId: call.incidentId, agent: call.agent };
    const repeated = (recorded: string): ToolCallResult => {
      log.debug({ key: call.key }, 'answering a repeated call from its record');
      return JSON.parse(recorded) as ToolCallResult;
    };

    // A call that was sent and failed is recorded under its key. A refusal is not: nothing ran, and
    // a recorded refusal would answer the same key later, when an approval may cover it.
    const fail = async (error: string, durationMs = 0, options: { record: boolean } = { record: true }): Promise<ToolCallResult> => {
      const result: ToolCallResult = { v: 1, key: call.key, tool: call.tool, status: 'error', isError: true, text: '', error, durationMs };
      if (options.record)
        await redis
          .multi()
          .hset(recordKey, { state: 'done', result: JSON.stringify(result) })
          .expire(recordKey, RECORD_TTL_SECONDS)
          .exec();
      events.emit({ ...base, type: 'tool.failed', data: { key: call.key, tool: call.tool, error, durationMs } });
      return result;
    };

    const tool = this.servers.flatMap((s) => s.tools).find((t) => t.name === call.tool);
    // Policy is decided here, at call time, whatever the model was offered.
    const caller =
      call.agent === MCP_CLIENT && config.gateway.mcpServer ? { ...config.gateway.mcpServer } : specialistCaller(config, call.agent);
    const decision = tool ? decideCall(config, caller, call.agent, tool) : undefined;
    if (!tool || decision?.decision !== 'allow') {
      // A call answered before is answered from its record, whatever the policy says now. (An
      // allowed call learns the same from the claim below, in the same round trip.)
      const [state, recorded] = await redis.hmget(recordKey, 'state', 'result');
      if (state === 'done' && recorded) return repeated(recorded);
    }
    if (!tool || !decision) return fail(`unknown tool "${call.tool}"`, 0, { record: false });
    const readOnly = isReadOnlyTool(tool);
    let approval: Approval | undefined;
    if (decision.decision === 'refuse') {
      if (!readOnly) await this.audit(call, 'refused');
      return fail(decision.reason, 0, { record: false });
    }
    if (decision.decision === 'ask') {
      const verdict = await this.checkApproval(call);
      if (typeof verdict === 'string') {
        await this.audit(call, 'refused');
        return fail(verdict, 0, { record: false });
      }
      approval = verdict;
    }

    // Claim the call atomically: only a new call, one an operator asked to retry (`bosun ack
    // --retry`), or a read-only call found in flight may be sent to the server.
    const [claim, recorded] = await claimCall(redis, [
      recordKey,
      readOnly ? '1' : '0',
      String(RECORD_TTL_SECONDS),
      call.tool,
      JSON.stringify(shownArgs),
      call.runId,
      call.incidentId,
      call.agent,
      new Date().toISOString(),
      call.approvalId ?? '',
      JSON.stringify(shownArgs) === JSON.stringify(call.args) ? 'false' : 'true',
    ]);
    if (claim === 'done' && recorded) return repeated(recorded);
    if (claim !== 'claimed') {
      // A previous attempt sent this mutating call and nobody recorded what happened.
      return this.inDoubt(call, tool, claim === 'in-doubt');
    }
    events.emit({ ...base, type: 'tool.started', data: { key: call.key, tool: call.tool, readOnly, args: shownArgs } });
    const server = this.servers.find((s) => s.name === tool.server);
    const started = Date.now();
    try {
      let lastProgress = 0;
      const outcome = await server!.call(tool.remoteName, call.args, {
        timeoutMs: mcpServerConfig(config, tool.server)?.timeoutMs ?? config.gateway.callTimeoutMs,
        maxChars: config.gateway.maxResultChars,
        onProgress: (p) => {
          // Forwarded as events, at most two a second per call: observers, not a firehose.
          if (Date.now() - lastProgress < 500 && p.total !== p.progress) return;
          lastProgress = Date.now();
          events.emit({ ...base, type: 'tool.progress', data: { key: call.key, tool: call.tool, ...p } });
        },
      });
      const durationMs = Date.now() - started;
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
      await redis
        .multi()
        .hset(recordKey, { state: 'done', result: JSON.stringify(result) })
        .expire(recordKey, RECORD_TTL_SECONDS)
        .exec();
      events.emit({
        ...base,
        type: 'tool.completed',
        data: { key: call.key, tool: call.tool, isError: outcome.isError, durationMs, chars: outcome.text.length },
      });
      if (!readOnly) await this.audit(call, outcome.isError ? 'tool-error' : 'ok', approval);
      return result;
    } catch (err) {
      const durationMs = Date.now() - started;
      const message = err instanceof Error ? err.message : String(err);
      const timedOut = err instanceof McpError && err.code === Number(ErrorCode.RequestTimeout);
      // Sent, and then the answer was lost (timeout, connection closed, transport failure): the
      // server may have applied the change. A JSON-RPC error reply, or a call never sent, is not.
      const outcomeUnknown =
        !(err instanceof CallNotSentError) && (timedOut || !(err instanceof McpError) || err.code === Number(ErrorCode.ConnectionClosed));
      if (outcomeUnknown && !readOnly) {
        await redis.hset(recordKey, { state: 'inflight' });
        await this.audit(call, 'in-doubt', approval);
        return this.inDoubt(
          call,
          tool,
          false,
          timedOut ? `timed out after ${durationMs} ms` : `its connection failed before the answer came (${message})`,
          true,
        );
      }
      log.warn({ key: call.key, tool: call.tool, err: message }, 'tool call failed');
      if (!readOnly) await this.audit(call, 'error', approval);
      return fail(timedOut ? `timed out after ${durationMs} ms` : message, durationMs);
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
  private async audit(
    call: ToolCallJob,
    status: 'ok' | 'tool-error' | 'error' | 'in-doubt' | 'refused',
    approval?: Approval,
  ): Promise<void> {
    const { redis, prefix, log } = this.deps;
    await redis
      .xadd(
        keys.audit(prefix),
        'MAXLEN',
        '~',
        '100000',
        '*',
        'at',
        new Date().toISOString(),
        'key',
        call.key,
        'runId',
        call.runId,
        'incidentId',
        call.incidentId,
        'agent',
        call.agent,
        'tool',
        call.tool,
        'args',
        JSON.stringify(redactSecrets(call.args)),
        'approvalId',
        approval?.id ?? call.approvalId ?? '',
        'approver',
        approval?.decidedBy ?? '',
        'status',
        status,
      )
      .catch((err: unknown) => log.error({ err, key: call.key }, 'could not write the audit entry'));
  }

  private async inDoubt(
    call: ToolCallJob,
    tool: CatalogTool,
    known: boolean,
    why = 'the gateway stopped before it recorded the result',
    audited = false,
  ): Promise<ToolCallResult> {
    const { redis, prefix, events, deadLetters, log } = this.deps;
    const recordKey = keys.toolCall(prefix, call.key);
    const error =
      `IN DOUBT: the mutating call ${call.tool} (key ${call.key}) was sent to its server, but ${why}. ` +
      'Whether it took effect is unknown. It will not be retried automatically; an operator must resolve it. ' +
      'Do not assume it succeeded or failed.';
    if (!known) {
      // Found in flight after a crash: the gateway that sent it could not audit the outcome.
      if (!audited) await this.audit(call, 'in-doubt');
      await redis.hset(recordKey, { state: 'in-doubt' });
      log.error({ key: call.key, tool: call.tool }, 'tool call in doubt');
      await deadLetters.add(
        {
          kind: 'in-doubt',
          runId: call.runId,
          incidentId: call.incidentId,
          agent: call.agent,
          reason: error,
          input: { key: call.key, tool: call.tool, args: redactSecrets(call.args) },
        },
        `in-doubt-${call.key}`,
      );
      events.emit({
        runId: call.runId,
        incidentId: call.incidentId,
        agent: call.agent,
        type: 'tool.in_doubt',
        data: { key: call.key, tool: call.tool, args: redactSecrets(call.args), server: tool.server },
      });
    }
    // Flagged in its structure too, so the task and the run count it without reading the text.
    return { v: 1, key: call.key, tool: call.tool, status: 'error', isError: true, text: '', error, durationMs: 0, inDoubt: true };
  }

  async close(): Promise<void> {
    await Promise.all(this.servers.map((s) => s.close()));
    await this.approvals.close();
  }
}
