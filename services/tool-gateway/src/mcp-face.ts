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
 *
 * Where the parts live: the HTTP checks and JSON-RPC error answers in `face-http.ts` (with the
 * HTTP toolkit of `libs/transport`: bearer auth, routing, listen and close); sessions in
 * `face-sessions.ts`; each session's MCP server in `face-server.ts` (tools/list paging in
 * `face-tools.ts`); calls in `face-calls.ts` and their approvals (requests, waits through the
 * shared `ApprovalWaiter`) in `face-approvals.ts`; the expiry sweep in `face-sweep.ts`; result
 * shapes and `_meta` keys in `face-results.ts`. This file wires them and runs the HTTP server.
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CatalogTool } from '@bosun/contract';
import { ConfigError, type ClusterConfig, type Logger } from '@bosun/config';
import { offeredTools, type Caller } from '@bosun/policy';
import { BearerAuth, HttpServer, Router, sendJson, type ApprovalStore, type EventSink } from '@bosun/transport';
import { FaceApprovals } from './face-approvals.js';
import { FaceCalls } from './face-calls.js';
import { FACE_REALM, allowedOrigins, jsonRpcError, rebindingRefusal, sendJsonRpcError, type AllowedOrigins } from './face-http.js';
import { createFaceServer } from './face-server.js';
import { FaceSessions } from './face-sessions.js';
import { ApprovalSweep } from './face-sweep.js';
import type { ToolGateway } from './gateway.js';

export { FACE_META } from './face-results.js';

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

/** The face's settings, defaults applied. */
interface FaceSettings {
  face: NonNullable<ClusterConfig['gateway']['mcpServer']>;
  caller: Caller;
  host: string;
  log: Logger;
}

/** Checks the options and applies the defaults that need the config. */
function settingsOf(options: McpFaceOptions): FaceSettings {
  const face = options.config.gateway.mcpServer;
  if (!face) throw new ConfigError('gateway.mcpServer is not configured: the MCP face has no policy');
  if (!options.token) throw new ConfigError('the MCP face needs a non-empty token');
  return {
    face,
    caller: { tools: face.tools, mode: face.mode, approvalTimeoutMs: face.approvalTimeoutMs },
    host: options.host ?? face.host ?? '127.0.0.1',
    log: options.log.child({ component: 'mcp-face' }),
  };
}

/** A started face: its parts, the HTTP server, and the order in which it closes. */
class Face implements McpFace {
  private readonly stopping = new AbortController();
  private readonly inflight = new Set<Promise<unknown>>();
  private readonly auth: BearerAuth;
  private readonly router: Router;
  private readonly sessions: FaceSessions;
  private readonly sweep: ApprovalSweep;
  private readonly previousHooks: ((() => void) | undefined)[];
  private http: HttpServer | undefined;
  /** Known once listening (a configured port 0 picks one). */
  private allowed: AllowedOrigins | undefined;
  private closed: Promise<void> | undefined;

  constructor(
    private readonly options: McpFaceOptions,
    private readonly settings: FaceSettings,
  ) {
    const { config, gateway, events } = options;
    const { caller, log } = settings;
    this.auth = new BearerAuth({ token: options.token, realm: FACE_REALM });
    this.router = new Router({ notFound: notFoundPlain }).on('*', '/mcp', ({ req, res }) => this.serveMcp(req, res));
    const approvals = new FaceApprovals({
      config,
      caller,
      approvals: options.approvals,
      events,
      log,
      pollMs: options.pollMs ?? 250,
      progressMs: options.progressMs ?? 5_000,
    });
    const calls = new FaceCalls({ gateway, config, caller, approvals, log, stopping: this.stopping.signal });
    this.sessions = new FaceSessions({
      newServer: () =>
        createFaceServer({
          catalog: () => gateway.catalog().tools,
          offered: (): CatalogTool[] => offeredTools(config, caller, gateway.catalog().tools),
          pageSize: options.pageSize ?? 100,
          calls,
          stopping: this.stopping.signal,
          track: (work) => this.track(work),
          log,
        }),
      log,
      idleSessionMs: options.idleSessionMs ?? 30 * 60_000,
      maxSessions: options.maxSessions ?? 1_000,
      maxBodyBytes: options.maxBodyBytes ?? 4 * 1024 * 1024,
      ...pick(options, ['retryMs', 'resumeRetainMs', 'resumeMaxBytes']),
    });
    this.sweep = new ApprovalSweep({
      approvals: options.approvals,
      waiter: approvals.waiter,
      owns: (a) => FaceApprovals.isFaceApproval(a),
      everyMs: options.sweepMs ?? 5_000,
      log,
    });
    this.previousHooks = gateway.servers.map((s) => s.onToolsChanged);
  }

  /** The port actually listened on. */
  get port(): number {
    return this.http?.port ?? 0;
  }

  /** Listens, then starts expiring idle sessions and approvals and passing on tool list changes. */
  async start(): Promise<void> {
    const { face, host, log } = this.settings;
    this.http = await HttpServer.listen({
      name: 'MCP face',
      host,
      port: this.options.port,
      log,
      handle: (req, res) => this.handle(req, res),
      onError: (err, _req, res) => {
        log.warn({ err }, 'MCP face request failed');
        sendJsonRpcError(res, 500, { code: -32603, message: 'Internal error' });
      },
    });
    try {
      this.allowed = allowedOrigins({ host, port: this.http.port, allowedHosts: face.allowedHosts, allowedOrigins: face.allowedOrigins });
    } catch (err) {
      await this.http.close();
      throw err;
    }
    this.sessions.start();
    this.sweep.start();
    this.options.gateway.servers.forEach((s, i) => {
      s.onToolsChanged = () => {
        this.previousHooks[i]?.();
        this.sessions.toolsChanged();
      };
    });
  }

  close(): Promise<void> {
    this.closed ??= this.shutdown();
    return this.closed;
  }

  /** HTTP checks in order: Host and Origin (403), path (plain 404), then `/mcp`. */
  private handle(req: IncomingMessage, res: ServerResponse): Promise<void> | void {
    const refused = this.allowed && rebindingRefusal(this.allowed, req.headers.host, req.headers.origin);
    if (refused || !this.allowed) {
      req.resume();
      this.settings.log.debug(
        { host: req.headers.host, origin: req.headers.origin },
        'MCP face request refused: Host or Origin not allowed',
      );
      return sendJsonRpcError(res, 403, { code: -32000, message: refused || 'Forbidden' });
    }
    return this.router.handle(req, res);
  }

  /** `/mcp`: the bearer token (401), then the session's transport (503 once closing). */
  private serveMcp(req: IncomingMessage, res: ServerResponse): Promise<void> | void {
    const unauthorized = jsonRpcError(-32000, 'Unauthorized: a valid bearer token is required');
    if (!this.auth.admit(req, res, unauthorized, { connection: 'close' })) return;
    if (this.closed) {
      req.resume();
      return sendJsonRpcError(res, 503, { code: -32000, message: 'The gateway is stopping' });
    }
    return this.sessions.handle(req, res);
  }

  private track(work: Promise<unknown>): void {
    this.inflight.add(work);
    void work.finally(() => this.inflight.delete(work));
  }

  /**
   * Stops taking requests, ends approval waits (their approvals stay pending), lets tool calls
   * already sent finish and be recorded (so closing leaves nothing in doubt), closes every session.
   */
  private async shutdown(): Promise<void> {
    const swept = this.sweep.stop();
    this.options.gateway.servers.forEach((s, i) => {
      s.onToolsChanged = this.previousHooks[i];
    });
    const stopped = this.http?.close({ graceMs: Number.POSITIVE_INFINITY });
    this.stopping.abort(new Error('the gateway MCP face is closing'));
    await Promise.allSettled([...this.inflight]);
    await this.sessions.close();
    this.http?.closeAllConnections();
    await stopped;
    await swept;
    this.settings.log.info('MCP face closed');
  }
}

/** Any path but `/mcp`: a plain 404, not a JSON-RPC envelope (and no "session not found" code). */
function notFoundPlain(req: IncomingMessage, res: ServerResponse, path: string): void {
  req.resume();
  sendJson(res, 404, { error: 'not_found', message: `Not found: ${path} (MCP is served at /mcp)` });
}

/** The entries of `o` named in `names` that are set. */
function pick<T extends object, K extends keyof T>(o: T, names: readonly K[]): Partial<Pick<T, K>> {
  const out: Partial<Pick<T, K>> = {};
  for (const n of names) if (o[n] !== undefined) out[n] = o[n];
  return out;
}

/** Starts the gateway's MCP face; resolves once it listens. */
export async function startMcpFace(options: McpFaceOptions): Promise<McpFace> {
  const face = new Face(options, settingsOf(options));
  await face.start();
  return face;
}
