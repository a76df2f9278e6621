import { randomUUID } from 'node:crypto';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { CatalogTool, ToolCallJob, ToolCallResult } from '@bosun/contract';
import type { ClusterConfig, Logger } from '@bosun/config';
import { decideCall, type Caller } from '@bosun/policy';
import type { Approval } from '@bosun/transport';
import type { FaceApprovals } from './face-approvals.js';
import { FACE_META, FACE_RUN, deniedResult, pendingResult, toMcpResult, waitEndedResult } from './face-results.js';
import { MCP_CLIENT, type ToolGateway } from './gateway.js';

/** Sends a progress notification about the approval a call waits for. */
export type ProgressSender = (message: string, approvalId: string) => void;

/** One `tools/call` through the face. */
export interface FaceCall {
  tool: CatalogTool;
  args: Record<string, unknown>;
  /** The request's `_meta` (see `FACE_META`). */
  meta: Record<string, unknown>;
  /** Ends an approval wait: the client cancelled the call, its session ended, or the face closes. */
  signal: AbortSignal;
  /** Set when the client gave a progress token. */
  progress?: ProgressSender;
}

/** Options of {@link FaceCalls}. */
export interface FaceCallsOptions {
  gateway: Pick<ToolGateway, 'execute'>;
  config: ClusterConfig;
  /** The face's policy (`gateway.mcpServer`). */
  caller: Caller;
  approvals: FaceApprovals;
  log: Logger;
  /** Aborted when the face closes. */
  stopping: AbortSignal;
}

/**
 * Runs calls through the face: a tool the policy allows or refuses goes straight to
 * {@link ToolGateway.execute} (which decides again, records and audits); an `ask` tool first
 * gets (or presents) an approval, waits for it when asked to, and runs once approved.
 */
export class FaceCalls {
  constructor(private readonly options: FaceCallsOptions) {}

  /** Answers one `tools/call`. */
  async call(c: FaceCall): Promise<CallToolResult> {
    const { config, caller } = this.options;
    const decision = decideCall(config, caller, MCP_CLIENT, c.tool);
    // Refused or allowed: the gateway decides again, records and audits.
    if (decision.decision !== 'ask') return toMcpResult(await this.run(c), {});
    return this.ask(c);
  }

  /** A call of an `ask` tool: request (or reuse) the approval, wait for it if asked to, then run. */
  private async ask(c: FaceCall): Promise<CallToolResult> {
    const { approvals, log } = this.options;
    // Without a progress token, a client's request timeout would likely end the wait before the
    // operator does: answer "pending" with the id at once, unless the client asks to wait.
    const wait = c.meta[FACE_META.wait] === true || (c.meta[FACE_META.wait] !== false && c.progress !== undefined);
    const given = c.meta[FACE_META.approvalId];
    let approval: Approval;
    if (typeof given === 'string' && given !== '') {
      const found = await approvals.find(given, c.tool.name, c.args);
      // Not ours, unknown, or another call: the gateway refuses it (and audits the refusal).
      if (!found) return toMcpResult(await this.run(c, { approvalId: given }), {});
      approval = found;
    } else {
      approval = await approvals.request({ tool: c.tool, args: c.args, meta: c.meta, wait });
    }
    if (approval.status === 'pending') {
      if (!wait) return pendingResult(approval);
      const decided = await this.waitFor(approval, c);
      if (!decided) {
        log.info({ approvalId: approval.id, tool: c.tool.name }, 'approval wait cancelled; the approval stays pending');
        return waitEndedResult(approval, this.options.stopping.aborted ? 'the gateway is stopping' : 'the call was cancelled');
      }
      approval = decided;
    }
    if (approval.status === 'denied') return deniedResult(approval);
    // Approved: run it under the key it was proposed with, so it takes effect at most once.
    const result = await this.run(c, { key: approval.taskId, approvalId: approval.id });
    return toMcpResult(result, { [FACE_META.approvalId]: approval.id, [FACE_META.approvalStatus]: 'approved' });
  }

  /** Waits for the call's approval, with progress notifications naming it when the client gave a token. */
  private waitFor(approval: Approval, c: FaceCall): Promise<Approval | undefined> {
    const { id } = approval;
    const message = `waiting for approval ${id} (bosun approve ${id} / bosun deny ${id} --reason "…")`;
    const { progress } = c;
    return this.options.approvals.wait(approval, c.signal, progress && (() => progress(message, id)));
  }

  /**
   * Runs the call through the gateway (policy, approval check, idempotency record, audit,
   * events), under `key` (default a new one) and with the approval it presents.
   */
  private run(c: FaceCall, under: { key?: string; approvalId?: string } = {}): Promise<ToolCallResult> {
    const call: ToolCallJob = {
      v: 1,
      key: under.key ?? `mcp-${randomUUID()}`,
      runId: FACE_RUN,
      incidentId: FACE_RUN,
      agent: MCP_CLIENT,
      tool: c.tool.name,
      args: c.args,
      ...(under.approvalId ? { approvalId: under.approvalId } : {}),
    };
    return this.options.gateway.execute(call, { via: 'mcp' });
  }
}
