import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { CatalogTool, ToolCallJob, ToolCallResult } from '@bosun/contract';
import type { ClusterConfig, Logger } from '@bosun/config';
import { approvalTimeoutFor, decideCall, offeredTools, type Caller } from '@bosun/policy';
import {
  ApprovalWaiter,
  approvalRequestedEvent,
  matchesProposedCall,
  type Approval,
  type ApprovalStore,
  type EventSink,
} from '@bosun/transport';
import { SessionEventStore } from './face-event-store.js';
import { allowedOrigins, bearerChallenge, bearerChecker, rebindingRefusal } from './face-http.js';
import { MCP_CLIENT, type ToolGateway } from './gateway.js';

/**
 * The gateway's own MCP face: the aggregated, policy-enforced tool set served as an MCP server
 * over Streamable HTTP, so any MCP client (an IDE agent, an operator's assistant) uses the same
 * tools under the same policy, approvals, idempotency records and audit as the specialists.
 *
 * Design:
 * - One `node:http` server; MCP lives at `/mcp`. First, a request whose `Host` (or `Origin`, when
 *   present) is not allowed gets 403 (DNS-rebinding protection; loopback names by default).
 *   Other paths get a plain 404, before the token check, so that a client probing for OAuth
 *   metadata (`/.well-known/…`) learns there is none. On `/mcp`, every request must carry
 *   `Authorization: Bearer <token>` (compared in constant time); anything else is answered 401
 *   (`error="invalid_token"` for a wrong token) before any MCP handling. The token is never logged.
 * - The SDK's transport checks the rest of the HTTP request (methods, `Accept`, `Content-Type`
 *   before the body, body size, JSON) and answers as the Streamable HTTP transport specifies.
 * - Stateful sessions: an `initialize` request opens a session (its own low-level `Server` and
 *   `StreamableHTTPServerTransport`, id in `Mcp-Session-Id`); later requests are routed by that
 *   header, DELETE ends one, and sessions idle for `idleSessionMs` are closed. Sessions (rather
 *   than a fresh server per request) let an MCP `notifications/cancelled` reach the call it
 *   cancels. Sessions hold nothing durable: calls, approvals and results live in Redis, so a
 *   client that loses its session (gateway restart) initializes again and carries on.
 * - Calls are ToolCallJobs of agent `mcp-client`, run by {@link ToolGateway.execute}, which
 *   applies the `gateway.mcpServer` policy, checks approvals, records the result under the
 *   call's idempotency key and writes the audit entry.
 * - An `ask` tool first gets an approval (`ap-mcp-<uuid>`, run `mcp`) and an
 *   `approval.requested` event. A call without a progress token (or with
 *   `_meta: {"bosun/wait": false}`) returns at once with an "approval pending" error naming the
 *   id: a client's request timeout (60 s in the SDK) is shorter than an approval's. A call with a
 *   progress token (or `_meta: {"bosun/wait": true}`) waits until the approval is decided (polling
 *   Redis), the call is cancelled (MCP cancellation, or its session ends), or it times out (then
 *   the face records the denial, reason `timeout`). While it waits it sends progress
 *   notifications naming the approval (the first at once), so a client using
 *   `resetTimeoutOnProgress` does not time out first and learns the id in any case.
 * - Resumable streams: each session has an event store ({@link SessionEventStore}). A wait does
 *   not end when its HTTP request closes: a client whose stream broke reconnects with
 *   `Last-Event-ID` and gets the outcome.
 * - A call with `_meta: {"bosun/approvalId": "<id>"}` for the same tool and arguments runs the
 *   approved call (or waits for / reports the approval). An approved call always runs under the
 *   idempotency key it was proposed with (the approval's `taskId`), so it takes effect at most
 *   once however often a client presents the approval; repeats are answered from the record.
 * - Face approvals whose timeout passed with nobody waiting are denied (`timeout`) by a periodic
 *   sweep, as a parked task would do for a specialist's approval.
 */

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
const FACE_RUN = 'mcp';
const DEFAULT_REASON = 'requested through the gateway MCP face';

/** Sends a progress notification about the approval a call waits for. */
type ProgressSender = (message: string, approvalId: string) => void;

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

/** Options of {@link startMcpFace}. */
export interface McpFaceOptions {
  gateway: Pick<ToolGateway, 'catalog' | 'execute' | 'servers'>;
  config: ClusterConfig;
  approvals: Pick<ApprovalStore, 'request' | 'get' | 'decide' | 'pending'>;
  events: EventSink;
  log: Logger;
  /** Port to listen on; 0 picks a free one (see {@link McpFace.port}). */
  port: number;
  host?: string;
  /** The bearer token clients present. A secret: never logged. */
  token: string;
  /** How often a waiting call looks at its approval. Default 250 ms. */
  pollMs?: number;
  /** How often a waiting call sends a progress notification (when the client gave a token). Default 5 s. */
  progressMs?: number;
  /** How often expired face approvals nobody waits for are denied. Default 5 s. */
  sweepMs?: number;
  /** Sessions with no open request for this long are closed. Default 30 min. */
  idleSessionMs?: number;
  /** The most concurrent sessions; further `initialize` requests get 503. Default 1000. */
  maxSessions?: number;
  /** The largest request body accepted. Default 4 MiB. */
  maxBodyBytes?: number;
  /** The most tools per `tools/list` page. Default 100. */
  pageSize?: number;
  /** The reconnection delay suggested to clients on SSE streams (`retry:`). Default 1 s. */
  retryMs?: number;
  /** How long a session keeps an answered request's events for a reconnecting client. Default 5 min. */
  resumeRetainMs?: number;
  /** The most bytes of events a session keeps for reconnecting clients. Default 1 MiB. */
  resumeMaxBytes?: number;
}

/** A started face. */
export interface McpFace {
  /** The port actually listened on. */
  port: number;
  /** Stops taking requests, ends approval waits, lets running tool calls finish, closes every session. */
  close(): Promise<void>;
}

interface Session {
  server: Server;
  transport: StreamableHTTPServerTransport;
  id?: string;
  /** Open HTTP requests of this session. */
  open: number;
  lastSeen: number;
}

/** Starts the gateway's MCP face. */
export async function startMcpFace(options: McpFaceOptions): Promise<McpFace> {
  const { gateway, config, approvals, events, token } = options;
  const log = options.log.child({ component: 'mcp-face' });
  const face = config.gateway.mcpServer;
  if (!face) throw new Error('gateway.mcpServer is not configured: the MCP face has no policy');
  if (!token) throw new Error('the MCP face needs a non-empty token');
  const caller: Caller = { tools: face.tools, mode: face.mode, approvalTimeoutMs: face.approvalTimeoutMs };
  const pollMs = options.pollMs ?? 250;
  const progressMs = options.progressMs ?? 5_000;
  const sweepMs = options.sweepMs ?? 5_000;
  const idleSessionMs = options.idleSessionMs ?? 30 * 60_000;
  const maxSessions = options.maxSessions ?? 1_000;
  const maxBodyBytes = options.maxBodyBytes ?? 4 * 1024 * 1024;
  const pageSize = options.pageSize ?? 100;
  const host = options.host ?? face.host ?? '127.0.0.1';

  const checkBearer = bearerChecker(token);
  // Known once listening (a configured port 0 picks one).
  let allowed: ReturnType<typeof allowedOrigins> | undefined;
  const sessions = new Map<string, Session>();
  const inflight = new Set<Promise<unknown>>();
  const stopping = new AbortController();
  let closing = false;

  // ---- tools -----------------------------------------------------------------------------

  const offered = (): CatalogTool[] => offeredTools(config, caller, gateway.catalog().tools);

  const toMcpTool = (t: CatalogTool): Tool =>
    ({
      name: t.name,
      description: t.description,
      inputSchema: t.inputSchema,
      annotations: t.annotations,
    }) as Tool;

  /** One page of the offered tools, by name; `cursor` is a `nextCursor` this face issued. */
  const listTools = (cursor: string | undefined): { tools: Tool[]; nextCursor?: string } => {
    const all = offered().sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
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
  };

  const textResult = (text: string, meta: Record<string, unknown>, isError = true): CallToolResult => ({
    content: [{ type: 'text', text }],
    isError,
    _meta: meta,
  });

  const toMcpResult = (r: ToolCallResult, meta: Record<string, unknown>): CallToolResult => {
    const _meta = { ...meta, [FACE_META.key]: r.key };
    if (r.status === 'error') return textResult(r.error ?? `the call of ${r.tool} could not run`, _meta);
    const out: CallToolResult = { content: [{ type: 'text', text: r.text }], isError: r.isError, _meta };
    if (r.structured !== null && typeof r.structured === 'object' && !Array.isArray(r.structured)) {
      out.structuredContent = r.structured as Record<string, unknown>;
    }
    return out;
  };

  /** Runs one call through the gateway: policy, approval check, idempotency record, audit, events. */
  const run = async (key: string, tool: string, args: Record<string, unknown>, approvalId?: string): Promise<ToolCallResult> => {
    const call: ToolCallJob = {
      v: 1,
      key,
      runId: FACE_RUN,
      incidentId: FACE_RUN,
      agent: MCP_CLIENT,
      tool,
      args,
      ...(approvalId ? { approvalId } : {}),
    };
    return gateway.execute(call);
  };

  // ---- approvals -------------------------------------------------------------------------

  /** Whether an approval was made by the face for exactly this call. */
  const covers = (a: Approval, tool: string, args: Record<string, unknown>): boolean =>
    a.runId === FACE_RUN && a.agent === MCP_CLIENT && a.calls.some((c) => c.needsApproval && matchesProposedCall(a, c, tool, args));

  /** Waits for decisions, and denies (reason `timeout`) what nobody decided in time. */
  const waiter = new ApprovalWaiter({ approvals, events, log });

  const pendingResult = (a: Approval): CallToolResult =>
    textResult(
      `approval pending: ${a.id} — decide with bosun approve ${a.id} (or bosun deny ${a.id} --reason "…"). ` +
        `Once approved, call the tool again with the same arguments and _meta {"${FACE_META.approvalId}": "${a.id}"} to run it. ` +
        `Undecided by ${a.timeoutAt}, it is denied.`,
      { [FACE_META.approvalId]: a.id, [FACE_META.approvalStatus]: 'pending' },
    );

  const deniedResult = (a: Approval): CallToolResult =>
    textResult(`approval ${a.id} was denied by ${a.decidedBy ?? 'an operator'}: ${a.denyReason ?? 'no reason given'}`, {
      [FACE_META.approvalId]: a.id,
      [FACE_META.approvalStatus]: 'denied',
    });

  /** A call of an `ask` tool: request (or reuse) the approval, wait for it if asked to, then run. */
  const callAsk = async (
    tool: CatalogTool,
    args: Record<string, unknown>,
    meta: Record<string, unknown>,
    signal: AbortSignal,
    progress?: ProgressSender,
  ): Promise<CallToolResult> => {
    // Without a progress token, a client's request timeout would likely end the wait before the
    // operator does: answer "pending" with the id at once, unless the client asks to wait.
    const wait = meta[FACE_META.wait] === true || (meta[FACE_META.wait] !== false && progress !== undefined);
    const given = meta[FACE_META.approvalId];
    let approval: Approval;
    if (typeof given === 'string' && given !== '') {
      const found = await approvals.get(given);
      // Not ours, unknown, or another call: the gateway refuses it (and audits the refusal).
      if (!found || !covers(found, tool.name, args)) return toMcpResult(await run(`mcp-${randomUUID()}`, tool.name, args, given), {});
      approval = found;
    } else {
      const key = `mcp-${randomUUID()}`;
      const id = `ap-mcp-${randomUUID()}`;
      const reason =
        typeof meta[FACE_META.reason] === 'string' && meta[FACE_META.reason] !== '' ? (meta[FACE_META.reason] as string) : DEFAULT_REASON;
      const calls = [{ index: 0, tool: tool.name, args, needsApproval: true, key }];
      approval = await approvals.request({
        id,
        runId: FACE_RUN,
        incidentId: FACE_RUN,
        agent: MCP_CLIENT,
        taskId: key,
        calls,
        reason,
        createdAt: new Date().toISOString(),
        timeoutAt: new Date(Date.now() + approvalTimeoutFor(config, caller, tool)).toISOString(),
      });
      events.emit(approvalRequestedEvent(approval));
      log.info({ approvalId: id, tool: tool.name, key, wait }, 'approval requested for a call through the MCP face');
    }

    if (approval.status === 'pending') {
      if (!wait) return pendingResult(approval);
      const { id } = approval;
      const message = `waiting for approval ${id} (bosun approve ${id} / bosun deny ${id} --reason "…")`;
      const onProgress = progress && (() => progress(message, id));
      const decided = await waiter.wait(approval, { signal, pollMs, progressMs, onProgress });
      if (!decided) {
        log.info({ approvalId: approval.id, tool: tool.name }, 'approval wait cancelled; the approval stays pending');
        const why = stopping.signal.aborted ? 'the gateway is stopping' : 'the call was cancelled';
        return textResult(
          `${why} while waiting for approval ${approval.id}; it is still pending. ` +
            `Once approved, call the tool again with the same arguments and _meta {"${FACE_META.approvalId}": "${approval.id}"}.`,
          { [FACE_META.approvalId]: approval.id, [FACE_META.approvalStatus]: 'pending' },
        );
      }
      approval = decided;
    }
    if (approval.status === 'denied') return deniedResult(approval);
    // Approved: run it under the key it was proposed with, so it takes effect at most once.
    const result = await run(approval.taskId, tool.name, args, approval.id);
    return toMcpResult(result, { [FACE_META.approvalId]: approval.id, [FACE_META.approvalStatus]: 'approved' });
  };

  const callTool = async (
    tool: CatalogTool,
    args: Record<string, unknown>,
    meta: Record<string, unknown>,
    signal: AbortSignal,
    progress?: ProgressSender,
  ): Promise<CallToolResult> => {
    const decision = decideCall(config, caller, MCP_CLIENT, tool);
    // Refused or allowed: the gateway decides again, records and audits.
    if (decision.decision !== 'ask') return toMcpResult(await run(`mcp-${randomUUID()}`, tool.name, args), {});
    return callAsk(tool, args, meta, signal, progress);
  };

  // ---- sessions --------------------------------------------------------------------------

  const newSession = (): Session => {
    const server = new Server(
      { name: 'bosun-tool-gateway', version: '0.1.0' },
      {
        capabilities: { tools: { listChanged: true } },
        instructions:
          'Bosun tool gateway: the tools of the configured MCP servers, under the cluster policy. ' +
          'A tool that needs an operator\'s approval answers at once with an "approval pending" error naming the approval id; ' +
          'call it again with the same arguments and _meta {"bosun/approvalId": "<id>"} once approved. ' +
          'A call with a progress token (or _meta {"bosun/wait": true}) waits for the decision instead, with progress notifications naming the approval. ' +
          '_meta {"bosun/reason": "…"} is shown to the operator.',
      },
    );
    const session: Session = {
      server,
      transport: new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          session.id = id;
          sessions.set(id, session);
          log.debug({ session: id }, 'MCP face session opened');
        },
        eventStore: new SessionEventStore({ retainMs: options.resumeRetainMs, maxBytes: options.resumeMaxBytes }),
        retryInterval: options.retryMs ?? 1_000,
        maxRequestBodySize: maxBodyBytes,
      }),
      open: 0,
      lastSeen: Date.now(),
    };
    session.transport.onclose = () => {
      if (session.id && sessions.get(session.id) === session) {
        sessions.delete(session.id);
        log.debug({ session: session.id }, 'MCP face session closed');
      }
    };
    server.onerror = (err) => log.debug({ err: err.message }, 'MCP face protocol error');

    server.setRequestHandler(ListToolsRequestSchema, (request) => listTools(request.params?.cursor));

    server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
      const name = request.params.name;
      const tool = gateway.catalog().tools.find((t) => t.name === name);
      if (!tool) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${JSON.stringify(name)}`);
      // Not the HTTP request: a client whose stream broke comes back for the outcome (event store).
      const signal = AbortSignal.any([extra.signal, stopping.signal]);
      const meta = (request.params._meta ?? {}) as Record<string, unknown>;
      const progressToken = request.params._meta?.progressToken;
      let tick = 0;
      const progress: ProgressSender | undefined =
        progressToken === undefined
          ? undefined
          : (message, approvalId) =>
              void extra
                .sendNotification({
                  method: 'notifications/progress',
                  params: { progressToken, progress: ++tick, message, _meta: { [FACE_META.approvalId]: approvalId } },
                })
                .catch((err: unknown) =>
                  log.debug({ err: err instanceof Error ? err.message : String(err) }, 'MCP face progress notification not sent'),
                );
      const work = callTool(tool, request.params.arguments ?? {}, meta, signal, progress).catch((err: unknown) => {
        const message = err instanceof Error ? err.message : String(err);
        log.warn({ tool: name, err: message }, 'MCP face call failed');
        return textResult(`the gateway could not run ${name}: ${message}`, {});
      });
      inflight.add(work);
      void work.finally(() => inflight.delete(work));
      return work;
    });
    return session;
  };

  // ---- HTTP ------------------------------------------------------------------------------

  /** A JSON-RPC error envelope, as the SDK's transport answers its own HTTP errors. */
  const jsonError = (res: ServerResponse, status: number, code: number, message: string, headers: Record<string, string> = {}): void => {
    if (res.headersSent) return void res.end();
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const refused = allowed && rebindingRefusal(allowed, req.headers.host, req.headers.origin);
    if (refused || !allowed) {
      req.resume();
      log.debug({ host: req.headers.host, origin: req.headers.origin }, 'MCP face request refused: Host or Origin not allowed');
      return jsonError(res, 403, -32000, refused || 'Forbidden');
    }
    const path = new URL(req.url ?? '/', 'http://face').pathname;
    if (path !== '/mcp') {
      req.resume();
      // Not an MCP endpoint, so no JSON-RPC envelope (and no "session not found" code).
      res.writeHead(404, { 'content-type': 'application/json' });
      return void res.end(JSON.stringify({ error: 'not_found', message: `Not found: ${path} (MCP is served at /mcp)` }));
    }
    const bearer = checkBearer(req.headers.authorization);
    if (bearer !== 'ok') {
      req.resume();
      return jsonError(res, 401, -32000, 'Unauthorized: a valid bearer token is required', {
        'www-authenticate': bearerChallenge(bearer),
        connection: 'close',
      });
    }
    if (closing) {
      req.resume();
      return jsonError(res, 503, -32000, 'The gateway is stopping');
    }
    const header = req.headers['mcp-session-id'];
    const sessionId = Array.isArray(header) ? header[0] : header;
    let session: Session | undefined;
    let fresh = false;
    if (sessionId) {
      session = sessions.get(sessionId);
      if (!session) {
        req.resume();
        return jsonError(res, 404, -32001, 'Session not found');
      }
    } else if (req.method === 'POST') {
      // Presumably an initialize request: the transport reads and checks it (and answers
      // anything else 400); a session that did not initialize is closed below.
      if (sessions.size >= maxSessions) {
        req.resume();
        return jsonError(res, 503, -32000, `Too many sessions (at most ${maxSessions})`);
      }
      session = newSession();
      fresh = true;
      await session.server.connect(session.transport);
    } else {
      req.resume();
      return jsonError(res, 400, -32000, 'Bad Request: no valid session id (start with an initialize request)');
    }

    const s = session;
    s.open++;
    s.lastSeen = Date.now();
    res.once('close', () => {
      s.open--;
      s.lastSeen = Date.now();
    });
    await s.transport.handleRequest(req, res);
    // An initialize request that did not initialize leaves a transport nobody can reach.
    if (fresh && !s.id) await s.transport.close();
  };

  const httpServer = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      log.warn({ err: err instanceof Error ? err.message : String(err) }, 'MCP face request failed');
      jsonError(res, 500, -32603, 'Internal error');
    });
  });

  await new Promise<void>((resolve, reject) => {
    httpServer.once('error', reject);
    httpServer.listen(options.port, host, () => {
      httpServer.off('error', reject);
      resolve();
    });
  });
  httpServer.on('error', (err) => log.error({ err: err.message }, 'MCP face server error'));
  const port = (httpServer.address() as AddressInfo).port;
  try {
    allowed = allowedOrigins({ host, port, allowedHosts: face.allowedHosts, allowedOrigins: face.allowedOrigins });
  } catch (err) {
    httpServer.close();
    throw err;
  }

  // ---- background: idle sessions, expired approvals, tool list changes --------------------

  const idleTimer = setInterval(
    () => {
      const cutoff = Date.now() - idleSessionMs;
      for (const s of sessions.values()) {
        if (s.open === 0 && s.lastSeen < cutoff) void s.transport.close().catch(() => undefined);
      }
    },
    Math.min(60_000, idleSessionMs),
  );
  idleTimer.unref();

  let sweeping = false;
  const sweep = async (): Promise<void> => {
    if (sweeping || closing) return;
    sweeping = true;
    try {
      const now = Date.now();
      for (const a of await approvals.pending()) {
        if (closing) break;
        if (a.runId !== FACE_RUN || a.agent !== MCP_CLIENT || !ApprovalWaiter.isDue(a, now)) continue;
        await waiter
          .expire(a)
          .catch((err: unknown) =>
            log.warn(
              { approvalId: a.id, err: err instanceof Error ? err.message : String(err) },
              'could not deny an expired MCP face approval',
            ),
          );
      }
    } catch (err) {
      log.warn({ err: err instanceof Error ? err.message : String(err) }, 'could not sweep expired MCP face approvals');
    } finally {
      sweeping = false;
    }
  };
  const sweepTimer = setInterval(() => void sweep(), sweepMs);
  sweepTimer.unref();
  void sweep();

  const previous = gateway.servers.map((s) => s.onToolsChanged);
  gateway.servers.forEach((s, i) => {
    s.onToolsChanged = () => {
      previous[i]?.();
      for (const session of sessions.values()) void session.server.sendToolListChanged().catch(() => undefined);
    };
  });

  return {
    port,
    async close() {
      if (closing) return;
      closing = true;
      clearInterval(idleTimer);
      clearInterval(sweepTimer);
      gateway.servers.forEach((s, i) => {
        s.onToolsChanged = previous[i];
      });
      const stopped = new Promise<void>((resolve) => httpServer.close(() => resolve()));
      // Approval waits end (their approvals stay pending); tool calls already sent finish and
      // are recorded, so nothing is left in doubt by closing the face.
      stopping.abort(new Error('the gateway MCP face is closing'));
      await Promise.allSettled([...inflight]);
      await Promise.allSettled([...sessions.values()].map((s) => s.transport.close()));
      httpServer.closeAllConnections();
      await stopped;
      while (sweeping) await sleep(20);
      log.info('MCP face closed');
    },
  };
}
