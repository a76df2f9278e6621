import type { ToolCallCode, ToolCallJob, ToolCallResult } from '@bosun/contract';
import type { McpCallOutcome } from './mcp.js';

/**
 * The answer for a mutating call in doubt; flagged `inDoubt` in its structure too, so the task
 * and the run count it without reading the text.
 */
export function inDoubtResult(call: ToolCallJob, why = 'the gateway stopped before it recorded the result'): ToolCallResult {
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

/** An error answer to a call (refused, failed, timed out...). */
export function errorResult(call: ToolCallJob, error: string, code: ToolCallCode, durationMs = 0): ToolCallResult {
  return { v: 1, key: call.key, tool: call.tool, status: 'error', isError: true, text: '', error, code, durationMs };
}

/** The answer of a call its server answered (even with its own `isError`). */
export function answeredResult(call: ToolCallJob, outcome: McpCallOutcome, durationMs: number): ToolCallResult {
  return {
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
}

/** The resolution an in-doubt dead letter gets when the call's outcome is recorded after all. */
export function seenDone(at: string): { action: string; by: string; at: string } {
  return { action: 'seen-done', by: 'tool-gateway', at };
}
