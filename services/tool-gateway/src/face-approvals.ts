import { randomUUID } from 'node:crypto';
import type { CatalogTool } from '@bosun/contract';
import type { ClusterConfig, Logger } from '@bosun/config';
import { approvalRuleFor, approvalTimeoutFor, ruleToStore, type Caller } from '@bosun/policy';
import {
  ApprovalWaiter,
  approvalRequestedEvent,
  matchesProposedCall,
  type Approval,
  type ApprovalStore,
  type EventSink,
} from '@bosun/transport';
import { FACE_META, FACE_RUN } from './face-results.js';
import { MCP_CLIENT } from './gateway.js';

const DEFAULT_REASON = 'requested through the gateway MCP face';

/** Options of {@link FaceApprovals}. */
export interface FaceApprovalsOptions {
  config: ClusterConfig;
  /** The face's policy (`gateway.mcpServer`). */
  caller: Caller;
  approvals: Pick<ApprovalStore, 'request' | 'get' | 'decide'>;
  events: EventSink;
  log: Logger;
  /** How often a waiting call looks at its approval. */
  pollMs: number;
  /** How often a waiting call sends a progress notification. */
  progressMs: number;
}

/** What a new approval is for. */
export interface FaceApprovalRequest {
  tool: CatalogTool;
  args: Record<string, unknown>;
  /** The call's `_meta` (`bosun/reason` is shown to the operator). */
  meta: Record<string, unknown>;
  /** Whether the caller will wait for it (logged). */
  wait: boolean;
}

/**
 * The approvals of calls through the face (run `mcp`, agent `mcp-client`): requesting one,
 * finding the one a call presents, and waiting for a decision through the shared
 * {@link ApprovalWaiter} (which denies, reason `timeout`, what nobody decided in time).
 */
export class FaceApprovals {
  /** Waits for decisions, and denies (reason `timeout`) what nobody decided in time. */
  readonly waiter: ApprovalWaiter;
  private readonly options: FaceApprovalsOptions;

  constructor(options: FaceApprovalsOptions) {
    this.options = options;
    this.waiter = new ApprovalWaiter({ approvals: options.approvals, events: options.events, log: options.log });
  }

  /** Whether `a` was made by the face (whatever its call). */
  static isFaceApproval(a: Approval): boolean {
    return a.runId === FACE_RUN && a.agent === MCP_CLIENT;
  }

  /** The approval `id` when the face made it for exactly this call; undefined otherwise (unknown, not ours, another call). */
  async find(id: string, tool: string, args: Record<string, unknown>): Promise<Approval | undefined> {
    const a = await this.options.approvals.get(id);
    if (!a || !FaceApprovals.isFaceApproval(a)) return undefined;
    return a.calls.some((c) => c.needsApproval && matchesProposedCall(a, c, tool, args)) ? a : undefined;
  }

  /** Requests an approval for one call (`ap-mcp-<uuid>`, under a new key) and announces it with `approval.requested`. */
  async request({ tool, args, meta, wait }: FaceApprovalRequest): Promise<Approval> {
    const { config, caller, approvals, events, log } = this.options;
    const key = `mcp-${randomUUID()}`;
    const id = `ap-mcp-${randomUUID()}`;
    const given = meta[FACE_META.reason];
    const reason = typeof given === 'string' && given !== '' ? given : DEFAULT_REASON;
    // The tool's rule of several people holds here as in the specialists' loops. The face's
    // callers share its token: there is no requester to exclude.
    const rule = ruleToStore([approvalRuleFor(config, tool)]);
    const approval = await approvals.request({
      id,
      runId: FACE_RUN,
      incidentId: FACE_RUN,
      agent: MCP_CLIENT,
      taskId: key,
      calls: [{ index: 0, tool: tool.name, args, needsApproval: true, key }],
      reason,
      createdAt: new Date().toISOString(),
      timeoutAt: new Date(Date.now() + approvalTimeoutFor(config, caller, tool)).toISOString(),
      ...(rule ? { rule } : {}),
    });
    events.emit(approvalRequestedEvent(approval));
    log.info({ approvalId: id, tool: tool.name, key, wait }, 'approval requested for a call through the MCP face');
    return approval;
  }

  /**
   * Waits until `approval` is decided (or denied at its timeout). Returns undefined when
   * `signal` ended the wait first: the approval stays pending. `onProgress` is called at once,
   * then every `progressMs` while the wait goes on.
   */
  wait(approval: Approval, signal: AbortSignal, onProgress?: () => void): Promise<Approval | undefined> {
    const { pollMs, progressMs } = this.options;
    return this.waiter.wait(approval, { signal, pollMs, progressMs, ...(onProgress ? { onProgress } : {}) });
  }
}
