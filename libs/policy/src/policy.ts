/**
 * Tool policy: which tools a caller is offered, and the gateway's decision on each call. It reads
 * the parsed cluster config (`@bosun/config`); it opens nothing and keeps no state.
 */
import { mcpServerConfig, specialistConfig, type ClusterConfig } from '@bosun/config';

/** Who must approve a call: `required` distinct people, and whom they must differ from (the contract's `ApprovalRule`). */
export interface ApprovalRule {
  required: number;
  distinctFrom: 'requester' | 'none';
}

/** The most tools offered to a model in one request: providers reject more, and choice degrades long before. */
export const MAX_TOOLS_PER_REQUEST = 128;

/**
 * Whether a catalog tool name is allowed by a caller's tool patterns: an exact name, or
 * `<server>__*` for every tool of a server.
 */
export function toolAllowed(patterns: readonly string[], tool: string): boolean {
  return patterns.some((p) => (p.endsWith('__*') ? tool.startsWith(p.slice(0, -1)) : p === tool));
}

/** What a tool may do: run, wait for an operator, or not exist for agents. */
export type ToolState = 'allow' | 'ask' | 'off';

/** The parts of a catalog tool the policy looks at. */
export interface PolicyTool {
  name: string;
  server: string;
  remoteName: string;
  annotations: { readOnlyHint?: boolean | undefined };
}

/** Who is calling: the tools it may use and whether it may change anything. */
export interface Caller {
  tools: readonly string[];
  mode: 'read-only' | 'read-write';
  approvalTimeoutMs: number;
}

/** Whether a tool is read-only: only an explicit MCP `readOnlyHint: true` says so; unannotated tools count as mutating. */
export function isReadOnlyTool(tool: PolicyTool): boolean {
  return tool.annotations.readOnlyHint === true;
}

/** A tool's state from the config: its per-tool entry, else its server's `capability`. */
export function toolState(config: ClusterConfig, tool: PolicyTool): ToolState {
  const server = mcpServerConfig(config, tool.server);
  if (!server) return 'off';
  const entry = toolEntry(server.tools, tool.remoteName);
  if (entry === undefined) return server.capability;
  return typeof entry === 'string' ? entry : entry.state;
}

/** How long a call to this tool waits for an approval: the tool's own setting, else the caller's. */
export function approvalTimeoutFor(config: ClusterConfig, caller: Caller, tool: PolicyTool): number {
  const server = mcpServerConfig(config, tool.server);
  const entry = server ? toolEntry(server.tools, tool.remoteName) : undefined;
  return (typeof entry === 'object' && entry.approvalTimeoutMs) || caller.approvalTimeoutMs;
}

/** Who must approve a call of this tool: its own `approvals`, else its server's, else one person. */
export function approvalRuleFor(config: ClusterConfig, tool: PolicyTool): ApprovalRule {
  const server = mcpServerConfig(config, tool.server);
  const entry = server ? toolEntry(server.tools, tool.remoteName) : undefined;
  const rule = (typeof entry === 'object' ? entry.approvals : undefined) ?? server?.approvals;
  return { required: rule?.required ?? 1, distinctFrom: rule?.distinctFrom ?? 'none' };
}

/** The rule of a turn's calls: the strictest of their tools' rules (most people; distinct from the requester if any says so). */
export function strictestRule(rules: readonly ApprovalRule[]): ApprovalRule {
  return {
    required: Math.max(1, ...rules.map((r) => r.required)),
    distinctFrom: rules.some((r) => r.distinctFrom === 'requester') ? 'requester' : 'none',
  };
}

/**
 * The rule an approval request stores for calls of these rules: the strictest, or undefined when
 * that is one person with nobody excluded — how approvals were before rules, and stored as then.
 * The one place every proposer (the task loop, CodeAct, the gateway's MCP face) takes it from.
 */
export function ruleToStore(rules: readonly ApprovalRule[]): ApprovalRule | undefined {
  const rule = strictestRule(rules);
  return rule.required > 1 || rule.distinctFrom === 'requester' ? rule : undefined;
}

/** A server's per-tool entry, by the tool's name on its server (an MCP server's own naming: outside input). */
function toolEntry<T>(tools: Readonly<Record<string, T>>, remoteName: string): T | undefined {
  return Object.hasOwn(tools, remoteName) ? tools[remoteName] : undefined;
}

/** The policy of a specialist, or undefined for an unknown one (`toString` and the like included). */
export function specialistCaller(config: ClusterConfig, agent: string): Caller | undefined {
  const spec = specialistConfig(config, agent);
  return spec ? { tools: spec.tools, mode: spec.mode, approvalTimeoutMs: spec.approvalTimeoutMs } : undefined;
}

/** The tools a caller is offered: allowed by its patterns, not `off`, and read-only ones only in read-only mode. */
export function offeredTools<T extends PolicyTool>(config: ClusterConfig, caller: Caller, tools: readonly T[]): T[] {
  return tools.filter(
    (t) => toolAllowed(caller.tools, t.name) && toolState(config, t) !== 'off' && (caller.mode === 'read-write' || isReadOnlyTool(t)),
  );
}

/** The gateway's decision on one call. */
export type CallDecision = { decision: 'allow' } | { decision: 'ask' } | { decision: 'refuse'; reason: string };

/**
 * Decides a call at call time, whatever the model was offered: a tool outside the caller's
 * patterns, `off`, or mutating under read-only mode is refused; an `ask` tool needs an approval.
 */
export function decideCall(config: ClusterConfig, caller: Caller | undefined, callerName: string, tool: PolicyTool): CallDecision {
  if (!caller || !toolAllowed(caller.tools, tool.name))
    return { decision: 'refuse', reason: `tool "${tool.name}" is not allowed for agent "${callerName}"` };
  const state = toolState(config, tool);
  if (state === 'off') return { decision: 'refuse', reason: `tool "${tool.name}" is off by policy` };
  if (caller.mode === 'read-only' && !isReadOnlyTool(tool)) {
    return { decision: 'refuse', reason: `tool "${tool.name}" may change things and agent "${callerName}" is read-only` };
  }
  return state === 'ask' ? { decision: 'ask' } : { decision: 'allow' };
}
