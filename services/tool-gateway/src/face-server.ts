import { errorMessage } from '@bosun/contract';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type CallToolRequest,
  type CallToolResult,
  type ServerNotification,
  type ServerRequest,
} from '@modelcontextprotocol/sdk/types.js';
import type { CatalogTool } from '@bosun/contract';
import type { Logger } from '@bosun/config';
import type { FaceCalls, ProgressSender } from './face-calls.js';
import { FACE_META, textResult } from './face-results.js';
import { listToolsPage } from './face-tools.js';

/** What the MCP server of a session needs. */
export interface FaceServerDeps {
  /** The whole catalog (a name outside it is -32602 "Unknown tool"). */
  catalog: () => readonly CatalogTool[];
  /** The tools the face's policy offers (what `tools/list` lists). */
  offered: () => readonly CatalogTool[];
  /** The most tools per `tools/list` page. */
  pageSize: number;
  calls: FaceCalls;
  /** Aborted when the face closes: ends approval waits. */
  stopping: AbortSignal;
  /** Keeps a call's work until it settles (the face waits for it when closing). */
  track: (work: Promise<unknown>) => void;
  log: Logger;
}

const INSTRUCTIONS =
  'Bosun tool gateway: the tools of the configured MCP servers, under the cluster policy. ' +
  'A tool that needs an operator\'s approval answers at once with an "approval pending" error naming the approval id; ' +
  'call it again with the same arguments and _meta {"bosun/approvalId": "<id>"} once approved. ' +
  'A call with a progress token (or _meta {"bosun/wait": true}) waits for the decision instead, with progress notifications naming the approval. ' +
  '_meta {"bosun/reason": "…"} is shown to the operator.';

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** The low-level MCP server of one face session: `tools/list` (paged) and `tools/call`. */
export function createFaceServer(deps: FaceServerDeps): Server {
  const server = new Server(
    { name: 'bosun-tool-gateway', version: '0.1.0' },
    { capabilities: { tools: { listChanged: true } }, instructions: INSTRUCTIONS },
  );
  server.onerror = (err) => deps.log.debug({ err }, 'MCP face protocol error');
  server.setRequestHandler(ListToolsRequestSchema, (request) => listToolsPage(deps.offered(), request.params?.cursor, deps.pageSize));
  server.setRequestHandler(CallToolRequestSchema, (request, extra) => callTool(deps, request, extra));
  return server;
}

/** `tools/call`: runs the call through {@link FaceCalls}; a failure becomes an error result. */
function callTool(deps: FaceServerDeps, request: CallToolRequest, extra: Extra): Promise<CallToolResult> {
  const { name } = request.params;
  const tool = deps.catalog().find((t) => t.name === name);
  if (!tool) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${JSON.stringify(name)}`);
  const work = deps.calls
    .call({
      tool,
      args: request.params.arguments ?? {},
      meta: request.params._meta ?? {},
      // Not the HTTP request: a client whose stream broke comes back for the outcome (event store).
      signal: AbortSignal.any([extra.signal, deps.stopping]),
      ...progressOf(request, extra, deps.log),
    })
    .catch((err: unknown) => {
      deps.log.warn({ tool: name, err }, 'MCP face call failed');
      return textResult(`the gateway could not run ${name}: ${errorMessage(err)}`, {});
    });
  deps.track(work);
  return work;
}

/** A progress sender when the request carries a progress token: notifications numbered from 1, naming the approval. */
function progressOf(request: CallToolRequest, extra: Extra, log: Logger): { progress?: ProgressSender } {
  const progressToken = request.params._meta?.progressToken;
  if (progressToken === undefined) return {};
  let tick = 0;
  const progress: ProgressSender = (message, approvalId) =>
    void extra
      .sendNotification({
        method: 'notifications/progress',
        params: { progressToken, progress: ++tick, message, _meta: { [FACE_META.approvalId]: approvalId } },
      })
      .catch((err: unknown) => log.debug({ err }, 'MCP face progress notification not sent'));
  return { progress };
}
