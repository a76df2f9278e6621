/**
 * The operator web console (`npm run console`, `cli/dist/console/main.js`): static pages built at build
 * time (cli/web, compiled by tsc) and a JSON + Server-Sent Events API over the shared operator
 * code. See docs/observability.md, "The console".
 *
 *   GET  /login, POST /login     the login page (`?failed=1`: says the token was wrong); the operator token → session cookie
 *   POST /logout
 *   GET  /healthz                liveness/readiness (no session needed)
 *   GET  /, /app.js, /style.css  the single-page console (session needed, else → /login)
 *   GET  /api/session            the session's CSRF token
 *   GET  /api/runs[?status=]     GET /api/runs/<runId>
 *   GET  /api/events[?run=<id>]  run events (SSE)
 *   GET  /api/approvals          POST /api/approvals/<id>
 *   GET  /api/dead-letters[?kind=]  POST /api/dead-letters/<id>/retry, POST /api/dead-letters/<id>/drop
 *   POST /api/tool-calls/<key>/ack  `{"action": "done" | "retry" | "skip"}` (an in-doubt call, as `bosun ack`)
 *   GET  /api/stats              runs per minute, p50/p99 duration, degraded results
 *   GET  /queues/…               bull-board, read-only (any other method: 403)
 *
 * Every POST but the login needs the session's CSRF token in `x-csrf-token` (403 without).
 */
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger, OperatorEntry } from '@bosun/config';
import { RUN_ID_PATTERN, type Role } from '@bosun/contract';
import { ForbiddenError, HttpServer, Router, readBody, requireRole, sendError, sendJson, type Identity } from '@bosun/transport';
import { ConsoleApi, type ConsoleDeps } from './api.js';
import { QUEUES_PATH, QueueBoard } from './queues.js';
import { EventStreams } from './sse.js';
import { Sessions } from './session.js';

/** Options of {@link startConsole}. */
export interface ConsoleOptions {
  port: number;
  host: string;
  /** The shared operator token; never logged. */
  token: string;
  /** The config's `operators`: people who log in with their own token (default none). */
  operators?: readonly OperatorEntry[];
  deps: ConsoleDeps;
  nats: NatsConnection;
  log: Logger;
  /** Marks the cookie `Secure` (behind TLS). */
  secureCookie?: boolean;
}

/** A running console. */
export interface Console {
  port: number;
  host: string;
  close(): Promise<void>;
}

const here = dirname(fileURLToPath(import.meta.url));
/** The pages and styles (in the package), and the compiled script (cli/dist/web). */
const PAGES = resolve(here, '../../web');
const SCRIPTS = resolve(here, '../web');

const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

interface Asset {
  type: string;
  body: Buffer;
}

/** Where login.html takes the message of a refused login. */
const LOGIN_MESSAGE_SLOT = '<!-- bosun:login-message -->';
/** The message of a refused login: fixed text (nothing from the request), announced to screen readers. */
const LOGIN_REFUSED =
  '<p class="error" id="login-error" role="alert">Wrong token: that is not this console\'s operator token (BOSUN_CONSOLE_TOKEN). Try again.</p>';

function loadAssets(): Map<string, Asset> {
  const asset = (dir: string, file: string, type: string): Asset => ({ type, body: readFileSync(join(dir, file)) });
  const login = asset(PAGES, 'login.html', 'text/html; charset=utf-8');
  if (!login.body.includes(LOGIN_MESSAGE_SLOT)) throw new Error(`cli/web/login.html has no ${LOGIN_MESSAGE_SLOT}`);
  const refused = { type: login.type, body: Buffer.from(login.body.toString('utf8').replace(LOGIN_MESSAGE_SLOT, LOGIN_REFUSED)) };
  return new Map([
    ['/', asset(PAGES, 'index.html', 'text/html; charset=utf-8')],
    ['/login', login],
    ['/login?failed=1', refused],
    ['/style.css', asset(PAGES, 'style.css', 'text/css; charset=utf-8')],
    ['/app.js', asset(SCRIPTS, 'app.js', 'text/javascript; charset=utf-8')],
  ]);
}

function sendAsset(res: ServerResponse, a: Asset): void {
  res.writeHead(200, { 'content-type': a.type, 'content-length': String(a.body.length), ...SECURITY_HEADERS });
  res.end(a.body);
}

function redirect(res: ServerResponse, to: string, headers: Record<string, string> = {}): void {
  res.writeHead(303, { location: to, 'content-length': '0', ...SECURITY_HEADERS, ...headers });
  res.end();
}

/** The console's routes and their guards. */
class ConsoleRoutes {
  private readonly sessions: Sessions;
  private readonly api: ConsoleApi;
  private readonly assets = loadAssets();

  constructor(
    private readonly options: ConsoleOptions,
    readonly streams: EventStreams,
  ) {
    this.sessions = new Sessions(options.token, Date.now, options.operators ?? []);
    this.api = new ConsoleApi(options.deps);
  }

  router(): Router {
    const page = (path: string) => (c: { req: IncomingMessage; res: ServerResponse }) =>
      this.sessions.csrfOf(c.req) === null ? redirect(c.res, '/login') : sendAsset(c.res, this.assets.get(path)!);
    return (
      new Router()
        .on('GET', '/healthz', ({ res }) => sendJson(res, 200, { ok: true }))
        // After a refused login (`/login?failed=1`), the same page says why.
        .on('GET', '/login', ({ res, query }) =>
          sendAsset(res, this.assets.get(query.get('failed') === '1' ? '/login?failed=1' : '/login')!),
        )
        .on('POST', '/login', ({ req, res }) => this.login(req, res))
        .on('POST', '/logout', ({ req, res }) => this.logout(req, res))
        .on('GET', '/style.css', ({ res }) => sendAsset(res, this.assets.get('/style.css')!))
        .on('GET', '/', page('/'))
        .on('GET', '/app.js', page('/app.js'))
        .on('GET', '/api/session', ({ req, res }) =>
          this.guard(req, res, (who) => sendJson(res, 200, { csrf: this.sessions.csrfOf(req), actor: who.actor, roles: who.roles })),
        )
        .on('GET', '/api/events', (c) => this.guard(c.req, c.res, () => this.events(c.req, c.res, c.query.get('run')), 'read'))
        .on('GET', '/api/runs', (c) => this.guard(c.req, c.res, () => this.api.listRuns(c), 'read'))
        .on('GET', '/api/runs/:runId', (c) => this.guard(c.req, c.res, () => this.api.showRun(c), 'read'))
        .on('GET', '/api/approvals', (c) => this.guard(c.req, c.res, () => this.api.listApprovals(c), 'read'))
        .on('POST', '/api/approvals/:id', (c) => this.guardPost(c.req, c.res, 'approve', (who) => this.api.decide(c, who)))
        .on('GET', '/api/dead-letters', (c) => this.guard(c.req, c.res, () => this.api.listDeadLetters(c), 'read'))
        .on('POST', '/api/dead-letters/:id/retry', (c) => this.guardPost(c.req, c.res, 'retry', () => this.api.retryDeadLetter(c)))
        .on('POST', '/api/dead-letters/:id/drop', (c) => this.guardPost(c.req, c.res, 'retry', () => this.api.dropDeadLetter(c)))
        .on('POST', '/api/tool-calls/:key/ack', (c) => this.guardPost(c.req, c.res, 'retry', (who) => this.api.ack(c, who)))
        .on('GET', '/api/stats', (c) => this.guard(c.req, c.res, () => this.api.stats(c), 'read'))
    );
  }

  /** bull-board at /queues: a page without a session goes to /login; read-only. */
  queues(board: QueueBoard, req: IncomingMessage, res: ServerResponse): Promise<void> | void {
    if (this.sessions.csrfOf(req) === null) return redirect(res, '/login');
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      req.resume();
      return sendError(res, 403, 'the queues view is read-only');
    }
    return board.handle(req, res);
  }

  /** One run's events (a run id, checked), or every run's. */
  private events(req: IncomingMessage, res: ServerResponse, runId: string | null): Promise<void> | void {
    if (runId !== null && !RUN_ID_PATTERN.test(runId)) {
      req.resume();
      return sendError(res, 400, 'run: not a run id (r and 20 hex digits)');
    }
    return this.streams.serve(req, res, runId ?? undefined);
  }

  /** Runs `fn` for a request of a live session whose person holds `role` (if given); else 401 or 403. */
  private async guard(req: IncomingMessage, res: ServerResponse, fn: (who: Identity) => Promise<void> | void, role?: Role): Promise<void> {
    const who = this.sessions.identityOf(req);
    if (who === null) {
      req.resume();
      return sendError(res, 401, 'not logged in: log in at /login with your operator token');
    }
    if (role !== undefined) {
      try {
        requireRole(who, role, `${req.method ?? 'GET'} ${req.url ?? ''}`);
      } catch (err) {
        if (!(err instanceof ForbiddenError)) throw err;
        req.resume();
        return sendJson(res, 403, { error: err.message, code: err.code });
      }
    }
    return fn(who);
  }

  /** Runs `fn` for a POST of a live session that carries its CSRF token, by a person holding `role`; else 401 or 403. */
  private guardPost(req: IncomingMessage, res: ServerResponse, role: Role, fn: (who: Identity) => Promise<void>): Promise<void> {
    return this.guard(req, res, async () => {
      if (!this.sessions.csrfOk(req)) {
        req.resume();
        return sendError(res, 403, 'missing or wrong CSRF token (x-csrf-token)');
      }
      return this.guard(req, res, fn, role);
    });
  }

  private async login(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const form = new URLSearchParams(await readBody(req, 4096));
    const id = this.sessions.login(form.get('token') ?? '', req.socket.remoteAddress);
    if (id === null) {
      this.options.log.warn({ from: req.socket.remoteAddress }, 'console login refused: wrong operator token');
      return redirect(res, '/login?failed=1');
    }
    const who = this.sessions.identityOfSession(id);
    this.options.log.info({ from: req.socket.remoteAddress, by: who?.actor.name, verified: who?.actor.verified }, 'console login');
    redirect(res, '/', { 'set-cookie': Sessions.cookie(id, this.options.secureCookie ?? false) });
  }

  private logout(req: IncomingMessage, res: ServerResponse): void {
    req.resume();
    if (!this.sessions.csrfOk(req)) return sendError(res, 403, 'missing or wrong CSRF token (x-csrf-token)');
    this.sessions.logout(req);
    redirect(res, '/login', { 'set-cookie': Sessions.clearCookie() });
  }
}

/** Starts the console; resolves once it listens. @throws ListenError when host:port is taken. */
export async function startConsole(options: ConsoleOptions): Promise<Console> {
  const streams = new EventStreams(options.nats, options.deps.prefix, options.log);
  const routes = new ConsoleRoutes(options, streams);
  const router = routes.router();
  const board = new QueueBoard(options.deps.redis, options.deps.prefix);
  const isQueues = (url: string | undefined) =>
    url === QUEUES_PATH || (url ?? '').startsWith(`${QUEUES_PATH}/`) || (url ?? '').startsWith(`${QUEUES_PATH}?`);
  const server = await HttpServer.listen({
    name: 'console',
    host: options.host,
    port: options.port,
    log: options.log,
    // Event streams stay open: no request timeout.
    timeouts: { requestMs: 0, headersMs: 15_000, keepAliveMs: 5_000 },
    handle: (req, res) => (isQueues(req.url) ? routes.queues(board, req, res) : router.handle(req, res)),
  });
  return {
    port: server.port,
    host: options.host,
    async close() {
      streams.close();
      await server.close({ graceMs: 2_000 });
      await board.close();
    },
  };
}
