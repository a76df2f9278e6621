/**
 * Admission: whether a call may go on to be claimed and sent, decided on data alone — the call,
 * the tool it names, the policy's decision and the approval it names. No I/O: the call flow
 * ({@link ToolCallFlow}) reads the approval and the record, and acts on the verdict.
 */
import type { CatalogTool, ToolCallCode, ToolCallJob } from '@bosun/contract';
import type { ClusterConfig } from '@bosun/config';
import { decideCall, isReadOnlyTool, specialistCaller, type CallDecision, type Caller } from '@bosun/policy';
import { matchesProposedCall, type Approval } from '@bosun/transport';

/** The agent name calls through the gateway's own MCP face carry. */
export const MCP_CLIENT = 'mcp-client';

/** The tool a call names and what the policy says of it; both undefined for a tool not in the catalog. */
export interface PolicyView {
  tool: CatalogTool | undefined;
  decision: CallDecision | undefined;
}

/** What the call flow does with a call: go on (claim and send it), or answer it with a refusal. */
export type Admission =
  | { admitted: true; tool: CatalogTool; readOnly: boolean; approval?: Approval }
  | {
      admitted: false;
      code: Extract<ToolCallCode, 'unknown_tool' | 'refused' | 'needs_approval' | 'denied'>;
      reason: string;
      /** Whether the refusal goes to the audit stream (a mutating tool's, or any `ask` tool's). */
      audit: boolean;
      tool?: CatalogTool;
      readOnly: boolean;
    };

/** Who is calling: the MCP face's policy for its own calls, else the specialist's (undefined for an unknown one). */
export function callerOf(config: ClusterConfig, agent: string): Caller | undefined {
  const face = config.gateway.mcpServer;
  if (agent === MCP_CLIENT && face) return { tools: face.tools, mode: face.mode, approvalTimeoutMs: face.approvalTimeoutMs };
  return specialistCaller(config, agent);
}

/** The tool a call names (among `tools`) and the policy's decision on it, at call time, whatever the model was offered. */
export function policyView(config: ClusterConfig, call: ToolCallJob, tools: readonly CatalogTool[]): PolicyView {
  const tool = tools.find((t) => t.name === call.tool);
  return { tool, decision: tool ? decideCall(config, callerOf(config, call.agent), call.agent, tool) : undefined };
}

/** The approval to read before admitting a call: the one it names, when its tool is `ask`. */
export function approvalToRead(call: ToolCallJob, view: PolicyView): string | undefined {
  return view.decision?.decision === 'ask' ? call.approvalId : undefined;
}

/**
 * Decides a call from its {@link PolicyView} and the approval it names (null when there is
 * none, or none was read). A refusal is never recorded: nothing ran, and a recorded refusal
 * would answer the same key later, when an approval may cover it.
 */
export function admit(input: { call: ToolCallJob; view: PolicyView; approval: Approval | null }): Admission {
  const { call, view, approval } = input;
  const { tool, decision } = view;
  if (!tool || !decision)
    return { admitted: false, code: 'unknown_tool', reason: `unknown tool "${call.tool}"`, audit: false, readOnly: false };
  const readOnly = isReadOnlyTool(tool);
  if (decision.decision === 'refuse')
    return { admitted: false, code: 'refused', reason: decision.reason, audit: !readOnly, tool, readOnly };
  if (decision.decision === 'ask') {
    const verdict = approvalVerdict(call, approval);
    if (typeof verdict === 'string')
      return { admitted: false, code: call.approvalId ? 'denied' : 'needs_approval', reason: verdict, audit: true, tool, readOnly };
    return { admitted: true, tool, readOnly, approval: verdict };
  }
  return { admitted: true, tool, readOnly };
}

/**
 * An `ask` tool runs only under an approval that was approved and covers this exact call: one
 * of its approved calls has this call's idempotency key, tool and arguments (as proposed), in
 * the same run. An approval thus authorises each approved call once — the record of its key
 * answers any repeat — and no other key. Returns the approval, or why the call is refused.
 */
export function approvalVerdict(call: ToolCallJob, approval: Approval | null): Approval | string {
  if (!call.approvalId) return `tool "${call.tool}" needs an operator's approval`;
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
