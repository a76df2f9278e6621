import type { CatalogTool, ToolCallResult } from '@bosun/contract';
import { metrics, type ToolOutcome } from '@bosun/transport';

/** A call's outcome as counted: in doubt, could not run, ran with the tool's own error, or ok. */
export function toolOutcome(result: ToolCallResult): ToolOutcome {
  if (result.inDoubt) return 'in_doubt';
  if (result.status === 'error') return 'error';
  return result.isError ? 'tool_error' : 'ok';
}

/**
 * Counts one answered call (`bosun_tool_calls_total`, `bosun_tool_call_duration_seconds`). A call
 * to a tool that is not in the catalog is counted under `unknown`: the model chose that name, and
 * labels stay bounded.
 */
export function observeToolCall(run: { tool: CatalogTool | undefined; decision: string }, result: ToolCallResult, seconds: number): void {
  metrics.toolCall({
    server: run.tool?.server ?? 'unknown',
    tool: run.tool?.name ?? 'unknown',
    outcome: toolOutcome(result),
    decision: run.decision,
    seconds,
  });
}
