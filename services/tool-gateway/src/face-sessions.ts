import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Logger } from '@bosun/config';
import { SessionEventStore } from './face-event-store.js';
import { sendJsonRpcError } from './face-http.js';

/** Options of {@link FaceSessions}. */
export interface FaceSessionsOptions {
  /** Makes the MCP server of a new session. */
  newServer: () => Server;
  log: Logger;
  /** Sessions with no open request for this long are closed. */
  idleSessionMs: number;
  /** The most concurrent sessions; further `initialize` requests get 503. */
  maxSessions: number;
  /** The largest request body the transport accepts. */
  maxBodyBytes: number;
  /** The reconnection delay suggested to clients on SSE streams (`retry:`). Default 1 s. */
  retryMs?: number;
  /** How long a session keeps an answered request's events for a reconnecting client. */
  resumeRetainMs?: number;
  /** The most bytes of events a session keeps for reconnecting clients. */
  resumeMaxBytes?: number;
}

interface Session {
  server: Server;
  transport: StreamableHTTPServerTransport;
  id?: string;
  /** Open HTTP requests of this session. */
  open: number;
  lastSeen: number;
}

/**
 * The face's MCP sessions: an `initialize` request opens one (its own MCP server and Streamable
 * HTTP transport with an event store, id in `Mcp-Session-Id`); later requests are routed by that
 * header; DELETE ends one (the transport answers it); sessions idle for `idleSessionMs` are
 * closed. Sessions hold nothing durable.
 */
export class FaceSessions {
  private readonly sessions = new Map<string, Session>();
  private idleTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: FaceSessionsOptions) {}

  /** Closes idle sessions from now on (checked every minute, or every `idleSessionMs` if shorter). */
  start(): void {
    const { idleSessionMs } = this.options;
    this.idleTimer = setInterval(() => this.closeIdle(Date.now() - idleSessionMs), Math.min(60_000, idleSessionMs));
    this.idleTimer.unref();
  }

  /** Answers a request to `/mcp` in its session, or opens a session for an `initialize` request. */
  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const header = req.headers['mcp-session-id'];
    const sessionId = Array.isArray(header) ? header[0] : header;
    let session: Session | undefined;
    if (sessionId) {
      session = this.sessions.get(sessionId);
      if (!session) return refuse(req, res, 404, { code: -32001, message: 'Session not found' });
    } else if (req.method === 'POST') {
      // Presumably an initialize request: the transport reads and checks it (and answers
      // anything else 400); a session that did not initialize is closed below.
      const { maxSessions } = this.options;
      if (this.sessions.size >= maxSessions)
        return refuse(req, res, 503, { code: -32000, message: `Too many sessions (at most ${maxSessions})` });
      session = this.open();
      await session.server.connect(session.transport);
    } else {
      return refuse(req, res, 400, { code: -32000, message: 'Bad Request: no valid session id (start with an initialize request)' });
    }
    await this.serve(session, req, res);
    // An initialize request that did not initialize leaves a transport nobody can reach.
    if (!sessionId && !session.id) await session.transport.close();
  }

  /** Tells every session's client that the tool list changed. */
  toolsChanged(): void {
    for (const session of this.sessions.values())
      session.server.sendToolListChanged().catch((err: unknown) => this.options.log.debug({ err }, 'MCP face tools/list_changed not sent'));
  }

  /** Stops closing idle sessions and closes every session. */
  async close(): Promise<void> {
    clearInterval(this.idleTimer);
    await Promise.allSettled([...this.sessions.values()].map((s) => s.transport.close()));
  }

  /** A new session, registered under its id once the transport has initialized it. */
  private open(): Session {
    const { log } = this.options;
    const session: Session = {
      server: this.options.newServer(),
      transport: new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          session.id = id;
          this.sessions.set(id, session);
          log.debug({ session: id }, 'MCP face session opened');
        },
        eventStore: new SessionEventStore({ retainMs: this.options.resumeRetainMs, maxBytes: this.options.resumeMaxBytes }),
        retryInterval: this.options.retryMs ?? 1_000,
        maxRequestBodySize: this.options.maxBodyBytes,
      }),
      open: 0,
      lastSeen: Date.now(),
    };
    session.transport.onclose = () => {
      if (session.id && this.sessions.get(session.id) === session) {
        this.sessions.delete(session.id);
        log.debug({ session: session.id }, 'MCP face session closed');
      }
    };
    return session;
  }

  /** Hands the request to the session's transport, counting it open until its answer ends. */
  private async serve(s: Session, req: IncomingMessage, res: ServerResponse): Promise<void> {
    s.open++;
    s.lastSeen = Date.now();
    res.once('close', () => {
      s.open--;
      s.lastSeen = Date.now();
    });
    await s.transport.handleRequest(req, res);
  }

  /** Closes the sessions with no open request, last seen before `cutoff`. */
  private closeIdle(cutoff: number): void {
    for (const s of this.sessions.values()) {
      if (s.open === 0 && s.lastSeen < cutoff)
        s.transport
          .close()
          .catch((err: unknown) => this.options.log.debug({ err, session: s.id }, 'MCP face idle session did not close cleanly'));
    }
  }
}

/** Answers a request the sessions cannot take, without reading its body. */
function refuse(req: IncomingMessage, res: ServerResponse, status: number, error: { code: number; message: string }): void {
  req.resume();
  sendJsonRpcError(res, status, error);
}
