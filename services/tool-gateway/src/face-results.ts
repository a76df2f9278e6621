import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { ToolCallResult } from '@bosun/contract';
import type { Approval } from '@bosun/transport';

/** Request `_meta` keys the face understands. */
export const FACE_META = {
  /** `false`: do not block on an approval; return the "approval pending" error at once. */
  wait: 'bosun/wait',
  /** The approval that covers this call (from an earlier "approval pending" answer). */
  approvalId: 'bosun/approvalId',
  /** Why the client wants the call: shown to the operator in the approval request. */
  reason: 'bosun/reason',
  /** On results: the idempotency key the call ran under. */
  key: 'bosun/key',
  /** On results: the approval's status (`pending`, `approved`, `denied`). */
  approvalStatus: 'bosun/approvalStatus',
} as const;

/** The run id and incident id of calls made through the face. */
export const FACE_RUN = 'mcp';

/** A tool result of one text block; an error unless `isError` is false. */
export function textResult(text: string, meta: Record<string, unknown>, isError = true): CallToolResult {
  return { content: [{ type: 'text', text }], isError, _meta: meta };
}

/** The MCP result of a call the gateway ran (or refused), with the key it ran under in `_meta`. */
export function toMcpResult(r: ToolCallResult, meta: Record<string, unknown>): CallToolResult {
  const _meta = { ...meta, [FACE_META.key]: r.key };
  if (r.status === 'error') return textResult(r.error ?? `the call of ${r.tool} could not run`, _meta);
  const out: CallToolResult = { content: [{ type: 'text', text: r.text }], isError: r.isError, _meta };
  if (r.structured !== null && typeof r.structured === 'object' && !Array.isArray(r.structured)) {
    out.structuredContent = r.structured as Record<string, unknown>;
  }
  return out;
}

const pendingMeta = (a: Approval) => ({ [FACE_META.approvalId]: a.id, [FACE_META.approvalStatus]: 'pending' });

/** "approval pending": how to decide it, and how to run the call once it is approved. */
export function pendingResult(a: Approval): CallToolResult {
  return textResult(
    `approval pending: ${a.id} — decide with bosun approve ${a.id} (or bosun deny ${a.id} --reason "…"). ` +
      `Once approved, call the tool again with the same arguments and _meta {"${FACE_META.approvalId}": "${a.id}"} to run it. ` +
      `Undecided by ${a.timeoutAt}, it is denied.`,
    pendingMeta(a),
  );
}

/** The call's approval was denied (by an operator, or at its timeout). */
export function deniedResult(a: Approval): CallToolResult {
  return textResult(`approval ${a.id} was denied by ${a.decidedBy ?? 'an operator'}: ${a.denyReason ?? 'no reason given'}`, {
    [FACE_META.approvalId]: a.id,
    [FACE_META.approvalStatus]: 'denied',
  });
}

/** The wait for an approval ended before a decision (`why`): the approval stays pending. */
export function waitEndedResult(a: Approval, why: string): CallToolResult {
  return textResult(
    `${why} while waiting for approval ${a.id}; it is still pending. ` +
      `Once approved, call the tool again with the same arguments and _meta {"${FACE_META.approvalId}": "${a.id}"}.`,
    pendingMeta(a),
  );
}
