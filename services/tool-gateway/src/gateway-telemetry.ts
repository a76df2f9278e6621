import { TOOLS_QUEUE, type CatalogTool, type ToolCallJob, type ToolCallResult } from '@bosun/contract';
import { SpanKind, carriedContext, inSpan, metrics, toolOutcome } from '@bosun/transport';

/** A span, as the gateway uses it (`@opentelemetry/api`'s, through `inSpan`). */
export type Span = Parameters<Parameters<typeof inSpan>[2]>[0];

/**
 * How a call reached the gateway: a job of the `tools` queue, a NATS request on
 * `<prefix>.tools.call` (its subject), or the gateway's own MCP face (an HTTP request).
 */
export type CallArrival = { via: 'queue' } | { via: 'nats'; subject: string } | { via: 'mcp' } | { via: 'direct' };

/** The span attributes that name the way a call came (OpenTelemetry's messaging conventions for the two messaging ones). */
function arrivalAttributes(arrival: CallArrival): Record<string, string> {
  switch (arrival.via) {
    case 'queue':
      return { 'bosun.tool.transport': 'queue', 'messaging.system': 'bullmq', 'messaging.destination.name': TOOLS_QUEUE };
    case 'nats':
      return { 'bosun.tool.transport': 'nats', 'messaging.system': 'nats', 'messaging.destination.name': arrival.subject };
    case 'mcp':
      // Not a message: an MCP client's HTTP request to the face.
      return { 'bosun.tool.transport': 'mcp' };
    case 'direct':
      // A function call from a specialist in the same process (`bosun serve`).
      return { 'bosun.tool.transport': 'direct' };
  }
}

/**
 * Runs the gateway's handling of one call in its span (`execute_tool <tool>`), under the
 * specialist's tool-call span whose context the job carries (a call through the MCP face starts
 * a trace of its own). The span holds the tool's name, the key, the way the call came
 * ({@link CallArrival}), the decision and the outcome, never the arguments.
 */
export function inGatewaySpan(
  call: ToolCallJob,
  arrival: CallArrival,
  fn: (span: Span) => Promise<ToolCallResult>,
): Promise<ToolCallResult> {
  const parent = carriedContext(call);
  const attributes = {
    'gen_ai.operation.name': 'execute_tool',
    'gen_ai.tool.name': call.tool,
    'gen_ai.agent.name': call.agent,
    'bosun.tool.key': call.key,
    'bosun.run.id': call.runId,
    ...arrivalAttributes(arrival),
  };
  return inSpan(`execute_tool ${call.tool}`, { kind: SpanKind.CONSUMER, attributes, ...(parent ? { parent } : {}) }, fn);
}

/** Runs the MCP request of a call in its span (`tools/call <remote name>`, a client span). */
export function inMcpSpan<T>(tool: CatalogTool, fn: () => Promise<T>): Promise<T> {
  const attributes = { 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': tool.remoteName, 'bosun.mcp.server': tool.server };
  return inSpan(`tools/call ${tool.remoteName}`, { kind: SpanKind.CLIENT, attributes }, fn);
}

/**
 * Counts one answered call (`bosun_tool_calls_total`, `bosun_tool_call_duration_seconds`) and
 * notes its outcome and decision on its span. A call
 * to a tool that is not in the catalog is counted under `unknown`: the model chose that name, and
 * labels stay bounded.
 */
export function observeToolCall(
  run: { tool: CatalogTool | undefined; decision: string },
  result: ToolCallResult,
  seconds: number,
  span?: Span,
): void {
  const outcome = toolOutcome(result);
  metrics.toolCall({ server: run.tool?.server ?? 'unknown', tool: run.tool?.name ?? 'unknown', outcome, decision: run.decision, seconds });
  span?.setAttributes({ 'bosun.tool.outcome': outcome, 'bosun.tool.decision': run.decision });
}
