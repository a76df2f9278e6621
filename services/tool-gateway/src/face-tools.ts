import { ErrorCode, McpError, type Tool } from '@modelcontextprotocol/sdk/types.js';
import type { CatalogTool } from '@bosun/contract';

/** A `tools/list` cursor: the last name of the page before, opaque to clients. */
function makeCursor(after: string): string {
  return Buffer.from(JSON.stringify({ after }), 'utf8').toString('base64url');
}

/** The name a cursor made by {@link makeCursor} continues after; undefined for anything else. */
function readCursor(cursor: string): string | undefined {
  try {
    const parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined;
    const { after, ...rest } = parsed as Record<string, unknown>;
    return typeof after === 'string' && Object.keys(rest).length === 0 && makeCursor(after) === cursor ? after : undefined;
  } catch {
    return undefined;
  }
}

/** A catalog tool as MCP lists it: name, description, schema and annotations unchanged. */
export function toMcpTool(t: CatalogTool): Tool {
  return {
    name: t.name,
    description: t.description,
    inputSchema: t.inputSchema,
    annotations: t.annotations,
  } as Tool;
}

/**
 * One page of `tools/list`: the tools by name, `pageSize` a page, from after the cursor (a
 * `nextCursor` this face issued; anything else is -32602), with `nextCursor` unless it is the last.
 */
export function listToolsPage(
  tools: readonly CatalogTool[],
  cursor: string | undefined,
  pageSize: number,
): { tools: Tool[]; nextCursor?: string } {
  const all = [...tools].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  let start = 0;
  if (cursor !== undefined) {
    const after = readCursor(cursor);
    if (after === undefined)
      throw new McpError(
        ErrorCode.InvalidParams,
        `Invalid cursor: ${JSON.stringify(cursor.slice(0, 100))} is not a cursor this server issued`,
      );
    // After the last tool of the previous page, even if that tool is gone since.
    start = all.findIndex((t) => t.name > after);
    if (start < 0) start = all.length;
  }
  const page = all.slice(start, start + pageSize);
  const last = page.at(-1);
  return { tools: page.map(toMcpTool), ...(start + pageSize < all.length && last ? { nextCursor: makeCursor(last.name) } : {}) };
}
