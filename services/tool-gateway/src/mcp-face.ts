import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  isInitializeRequest,
  isJSONRPCRequest,
  type CallToolResult,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { CatalogTool, ToolCallJob, ToolCallResult } from '@bosun/contract';
import { approvalTimeoutFor, decideCall, offeredTools, type Caller, type ClusterConfig, type Logger } from '@bosun/config';
import { ApprovalError, approvalRequestedEvent, approvalResolvedEvent, matchesProposedCall, type Approval, type ApprovalStore, type EventSink } from '@bosun/transport';
import { MCP_CLIENT, type ToolGateway } from './gateway.js';

/**
 * The gateway's own MCP face: the aggregated, policy-enforced tool set served as an MCP server
 * over Streamable HTTP, so any MCP client (an IDE agent, an operator's assistant) uses the same
 * tools under the same policy, approvals, idempotency records and audit as the specialists.
 *
 * Design:
 * - One `node:http` server; MCP lives at `/mcp`. Every request must carry
 *   `Authorization: Bearer <token>` (compared in constant time); anything else is answered 401
 *   before any MCP handling. The token is never logged.
 * - Stateful sessions: an `initialize` request opens a session (its own low-level `Server` and
 *   `StreamableHTTPServerTransport`, id in `Mcp-Session-Id`); later requests are routed by that
 *   header, DELETE ends one, and sessions idle for `idleSessionMs` are closed. Sessions (rather
 *   than a fresh server per request) let an MCP `notifications/cancelled` reach the call it
 *   cancels. Sessions hold nothing durable: calls, approvals and results live in Redis, so a
 *   client that loses its session (gateway restart) initializes again and carries on.
 * - Calls are ToolCallJobs of agent `mcp-client`, run by {@link ToolGateway.process}, which
 *   applies the `gateway.mcpServer` policy, checks approvals, records the result under the
 *   call's idempotency key and writes the audit entry.
 * - An `ask` tool first gets an approval (`ap-mcp-<uuid>`, run `mcp`) and an
 *   `approval.requested` event. With `_meta: {"bosun/wait": false}` the call returns at once with
 *   an "approval pending" error naming the id; otherwise it blocks until the approval is decided
 *   (polling Redis), is cancelled (MCP cancellation or the HTTP request closed), or times out
 *   (then the face records the denial, reason `timeout`). While it waits it sends MCP progress
 *   notifications when the client gave a progress token, so a client using
 *   `resetTimeoutOnProgress` does not time out first.
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

/** Options of {@link startMcpFace}. */
export interface McpFaceOptions {
  gateway: Pick<ToolGateway, 'catalog' | 'process' | 'servers'>;
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
  /** Per JSON-RPC request id: aborted when its HTTP request closes before the answer was written. */
  http: Map<string | number, AbortController>;
}

class FaceError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
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
  const host = options.host ?? face.host ?? '127.0.0.1';

  const expected = createHash('sha256').update(token).digest();
  const sessions = new Map<string, Session>();
  const inflight = new Set<Promise<unknown>>();
  const stopping = new AbortController();
  let closing = false;

  // ---- authentication --------------------------------------------------------------------

  const authorized = (header: string | undefined): boolean => {
    const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header ?? '');
    // Hash both sides so the comparison takes the same time whatever the presented length.
    const presented = createHash('sha256').update(m?.[1] ?? '').digest();
    return timingSafeEqual(presented, expected) && m !== null;
  };

  // ---- tools -----------------------------------------------------------------------------

  const offered = (): CatalogTool[] => offeredTools(config, caller, gateway.catalog().tools);

  const toMcpTool = (t: CatalogTool): Tool =>
    ({
      name: t.name,
      description: t.description,
      inputSchema: t.inputSchema,
      annotations: t.annotations,
    }) as Tool;

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
    const data: ToolCallJob = {
      v: 1,
      key,
      runId: FACE_RUN,
      incidentId: FACE_RUN,
      agent: MCP_CLIENT,
      tool,
      args: args as ToolCallJob['args'],
      ...(approvalId ? { approvalId } : {}),
    };
    // The processor reads only the job's name, id and data.
    return gateway.process({ name: 'tool-call', id: key, data } as never);
  };

  // ---- approvals -------------------------------------------------------------------------

  /** Whether an approval was made by the face for exactly this call. */
  const covers = (a: Approval, tool: string, args: Record<string, unknown>): boolean =>
    a.runId === FACE_RUN && a.agent === MCP_CLIENT && a.calls.some((c) => c.needsApproval && matchesProposedCall(a, c, tool, args));

  /** Denies an undecided approval whose time is up; another process may have decided it first. */
  const expire = async (a: Approval): Promise<Approval> => {
    try {
      const decided = await approvals.decide(a.id, { approve: false, reason: 'timeout', by: 'bosun (approval timeout)' });
      events.emit(approvalResolvedEvent(decided));
      log.info({ approvalId: a.id }, 'approval timed out: denied');
      return decided;
    } catch (err) {
      if (!(err instanceof ApprovalError && err.code === 'already_decided')) throw err;
      return (await approvals.get(a.id)) ?? a;
    }
  };

  /**
   * Waits until the approval is decided or its time is up (then denies it). Returns undefined
   * when the wait was cancelled: the approval stays pending.
   */
  const waitForDecision = async (first: Approval, signal: AbortSignal, progress?: (message: string) => void): Promise<Approval | undefined> => {
    const deadline = Date.parse(first.timeoutAt);
    const message = `waiting for approval ${first.id} (bosun approve ${first.id} / bosun deny ${first.id} --reason "…")`;
    let lastProgress = Date.now();
    progress?.(message);
    for (;;) {
      if (signal.aborted) return undefined;
      const left = deadline - Date.now();
      if (left <= 0) return expire(first);
      try {
        await sleep(Math.min(pollMs, left), undefined, { signal });
      } catch {
        return undefined;
      }
      const current = await approvals.get(first.id);
      if (!current) throw new Error(`approval ${first.id} no longer exists`);
      if (current.status !== 'pending') return current;
      if (progress && Date.now() - lastProgress >= progressMs) {
        lastProgress = Date.now();
        progress(message);
      }
    }
  };

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
    progress?: (message: string) => void,
  ): Promise<CallToolResult> => {
    const wait = meta[FACE_META.wait] !== false;
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
      const reason = typeof meta[FACE_META.reason] === 'string' && meta[FACE_META.reason] !== '' ? (meta[FACE_META.reason] as string) : DEFAULT_REASON;
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
      const decided = await waitForDecision(approval, signal, progress);
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
    name: string,
    args: Record<string, unknown>,
    meta: Record<string, unknown>,
    signal: AbortSignal,
    progress?: (message: string) => void,
  ): Promise<CallToolResult> => {
    const tool = gateway.catalog().tools.find((t) => t.name === name);
    if (!tool) return textResult(`unknown tool "${name}"`, {});
    const decision = decideCall(config, caller, MCP_CLIENT, tool);
    // Refused or allowed: the gateway decides again, records and audits.
    if (decision.decision !== 'ask') return toMcpResult(await run(`mcp-${randomUUID()}`, name, args), {});
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
          'Tools that need an operator\'s approval block until it is decided; send _meta {"bosun/wait": false} to get an ' +
          '"approval pending" error with the approval id instead, and call again with _meta {"bosun/approvalId": "<id>"} once approved. ' +
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
      }),
      open: 0,
      lastSeen: Date.now(),
      http: new Map(),
    };
    session.transport.onclose = () => {
      if (session.id && sessions.get(session.id) === session) {
        sessions.delete(session.id);
        log.debug({ session: session.id }, 'MCP face session closed');
      }
    };
    server.onerror = (err) => log.debug({ err: err.message }, 'MCP face protocol error');

    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: offered().map(toMcpTool) }));

    server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
      const http = session.http.get(extra.requestId);
      // No entry: its HTTP request closed before the handler started.
      const httpSignal = http?.signal ?? AbortSignal.abort(new Error('the HTTP request was closed'));
      const signal = AbortSignal.any([extra.signal, httpSignal, stopping.signal]);
      const meta = (request.params._meta ?? {}) as Record<string, unknown>;
      const progressToken = request.params._meta?.progressToken;
      let tick = 0;
      const progress =
        progressToken === undefined
          ? undefined
          : (message: string) =>
              void extra
                .sendNotification({ method: 'notifications/progress', params: { progressToken, progress: ++tick, message } })
                .catch(() => undefined);
      const work = callTool(request.params.name, request.params.arguments ?? {}, meta, signal, progress).catch((err: unknown) => {
        const message = err instanceof Error ? err.message : String(err);
        log.warn({ tool: request.params.name, err: message }, 'MCP face call failed');
        return textResult(`the gateway could not run ${request.params.name}: ${message}`, {});
      });
      inflight.add(work);
      void work.finally(() => inflight.delete(work));
      return work;
    });
    return session;
  };

  // ---- HTTP ------------------------------------------------------------------------------

  const readJson = async (req: IncomingMessage): Promise<unknown> => {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > maxBodyBytes) throw new FaceError(413, `request body larger than ${maxBodyBytes} bytes`);
      chunks.push(chunk as Buffer);
    }
    try {
      return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
    } catch {
      throw new FaceError(400, 'Parse error: Invalid JSON');
    }
  };

  const jsonError = (res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}): void => {
    if (res.headersSent) return void res.end();
    const code = status === 400 && message.startsWith('Parse error') ? -32700 : status === 404 ? -32001 : -32000;
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (!authorized(req.headers.authorization)) {
      req.resume();
      return jsonError(res, 401, 'Unauthorized: a valid bearer token is required', { 'www-authenticate': 'Bearer realm="bosun-gateway"', connection: 'close' });
    }
    const path = new URL(req.url ?? '/', 'http://face').pathname;
    if (path !== '/mcp') {
      req.resume();
      return jsonError(res, 404, `Not found: MCP is served at /mcp`);
    }
    if (closing) {
      req.resume();
      return jsonError(res, 503, 'The gateway is stopping');
    }
    const body = req.method === 'POST' ? await readJson(req) : undefined;
    const header = req.headers['mcp-session-id'];
    const sessionId = Array.isArray(header) ? header[0] : header;
    let session: Session | undefined;
    let fresh = false;
    if (sessionId) {
      session = sessions.get(sessionId);
      if (!session) return jsonError(res, 404, 'Session not found');
    } else if (req.method === 'POST' && isInitializeRequest(body)) {
      if (sessions.size >= maxSessions) return jsonError(res, 503, `Too many sessions (at most ${maxSessions})`);
      session = newSession();
      fresh = true;
      await session.server.connect(session.transport);
    } else {
      return jsonError(res, 400, 'Bad Request: no valid session id (start with an initialize request)');
    }

    const s = session;
    const ids = (Array.isArray(body) ? body : [body]).filter((m) => isJSONRPCRequest(m)).map((m) => m.id);
    for (const id of ids) s.http.set(id, new AbortController());
    s.open++;
    s.lastSeen = Date.now();
    res.once('close', () => {
      for (const id of ids) {
        const ac = s.http.get(id);
        if (!ac) continue;
        if (!res.writableFinished) ac.abort(new Error('the HTTP request was closed'));
        s.http.delete(id);
      }
      s.open--;
      s.lastSeen = Date.now();
    });
    await s.transport.handleRequest(req, res, body);
    // An initialize request that did not initialize leaves a transport nobody can reach.
    if (fresh && !s.id) await s.transport.close();
  };

  const httpServer = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (err instanceof FaceError) return jsonError(res, err.status, err.message);
      log.warn({ err: err instanceof Error ? err.message : String(err) }, 'MCP face request failed');
      jsonError(res, 500, 'Internal error');
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

  // ---- background: idle sessions, expired approvals, tool list changes --------------------

  const idleTimer = setInterval(() => {
    const cutoff = Date.now() - idleSessionMs;
    for (const s of sessions.values()) {
      if (s.open === 0 && s.lastSeen < cutoff) void s.transport.close().catch(() => undefined);
    }
  }, Math.min(60_000, idleSessionMs));
  idleTimer.unref();

  let sweeping = false;
  const sweep = async (): Promise<void> => {
    if (sweeping || closing) return;
    sweeping = true;
    try {
      const now = Date.now();
      for (const a of await approvals.pending()) {
        if (closing) break;
        if (a.runId !== FACE_RUN || a.agent !== MCP_CLIENT || Date.parse(a.timeoutAt) > now) continue;
        await expire(a).catch((err: unknown) => log.warn({ approvalId: a.id, err: err instanceof Error ? err.message : String(err) }, 'could not deny an expired MCP face approval'));
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
