/**
 * The operator web console (`npm run console`, `cli/dist/bundle/console.js`): static pages built at build
 * time (cli/web, compiled by tsc) and a JSON + Server-Sent Events API over the shared operator
 * code. See docs/observability.md, "The console".
 *
 *   GET  /login, POST /login     the login page (`?failed=1`, `?refused=…`: says why); the operator token → session cookie
 *   GET  /auth/login             OpenID Connect: a login attempt (cookie) and off to the provider
 *   GET  /auth/callback          OpenID Connect: the provider's answer → session cookie (or /login?refused=…)
 *   POST /logout
 *   GET  /healthz                liveness/readiness (no session needed)
 *   GET  /, /app.js, /style.css  the single-page console (session needed, else → /login)
 *   GET  /api/session            the session's CSRF token
 *   GET  /api/runs[?status=]     GET /api/runs/<runId>
 *   GET  /api/events[?run=<id>]  run events (SSE)
 *   GET  /api/approvals          GET /api/approvals/<id> (records the person as a viewer), POST /api/approvals/<id>
 *   GET  /api/dead-letters[?kind=]  POST /api/dead-letters/<id>/retry, POST /api/dead-letters/<id>/drop
 *   POST /api/tool-calls/<key>/ack  `{"action": "done" | "retry" | "skip"}` (an in-doubt call, as `bosun ack`)
 *   GET  /api/stats              runs per minute, p50/p99 duration, degraded results
 *   GET  /queues/…               bull-board, read-only (any other method: 403)
 *
 * Every POST but the login needs the session's CSRF token in `x-csrf-token` (403 without), and
 * an operator's session: a read-only person (OpenID Connect, outside `operatorGroups`) gets 403.
 */
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import { findUp, type Logger, type OperatorEntry } from '@bosun/config';
import { RUN_ID_PATTERN, type Role } from '@bosun/contract';
import { ForbiddenError, HttpServer, Router, readBody, requireRole, sendError, sendJson, type Identity } from '@bosun/transport';
import { ConsoleApi, type ConsoleDeps } from './api.js';
import { loginPages, type LoginRefusal } from './login-page.js';
import { OidcLoginError, type OidcLogin } from './oidc.js';
import { QUEUES_PATH, QueueBoard } from './queues.js';
import { EventStreams } from './sse.js';
import { Sessions, oidcIdentity, readCookie } from './session.js';

/** Options of {@link startConsole}. */
export interface ConsoleOptions {
  port: number;
  host: string;
  /** The shared operator token; never logged. Undefined: token login is off (OpenID Connect only). */
  token: string | undefined;
  /** Login through OpenID Connect; off when absent. */
  oidc?: OidcLogin;
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

/** The CLI package's folder: found upwards, as this module runs compiled and bundled (scripts/bundle.mjs). */
const CLI_ROOT = findUp(import.meta.url, 'web/login.html');
/** The pages and styles (in the package), and the compiled script (cli/dist/web). */
const PAGES = join(CLI_ROOT, 'web');
const SCRIPTS = join(CLI_ROOT, 'dist/web');

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

/** The cookie of a login attempt through the provider: Lax, as the provider's redirect back is a cross-site navigation. */
const ATTEMPT_COOKIE = 'bosun_oidc';

/**
 * What the callback answers after a login: a page of this origin that moves on to the console.
 * A redirect would not do: the navigation began at the provider, so the browser would not send
 * the new SameSite=Strict session cookie with it.
 */
const LOGGED_IN = Buffer.from(
  '<!doctype html><html lang="en"><head><meta charset="utf-8" /><meta http-equiv="refresh" content="0;url=/" />' +
    '<title>Bosun console: logged in</title></head><body><p><a href="/">Logged in: on to the console</a></p></body></html>',
);

function loadAssets(methods: { token: boolean; oidc: boolean }): Map<string, Asset> {
  const html = 'text/html; charset=utf-8';
  const asset = (dir: string, file: string, type: string): Asset => ({ type, body: readFileSync(join(dir, file)) });
  const logins = loginPages(readFileSync(join(PAGES, 'login.html'), 'utf8'), methods);
  return new Map([
    ['/', asset(PAGES, 'index.html', html)],
    ...[...logins].map(([key, page]): [string, Asset] => [
      key === '' ? '/login' : `/login?refused=${key}`,
      { type: html, body: Buffer.from(page) },
    ]),
    ['/logged-in', { type: html, body: LOGGED_IN }],
    ['/style.css', asset(PAGES, 'style.css', 'text/css; charset=utf-8')],
    ['/app.js', asset(SCRIPTS, 'app.js', 'text/javascript; charset=utf-8')],
  ]);
}

/** The login page asked for: `?failed=1` (a wrong token, as before) or `?refused=<why>`. */
function loginPageOf(query: URLSearchParams): string {
  if (query.get('failed') === '1') return '/login?refused=token';
  const refused = query.get('refused');
  return refused === null ? '/login' : `/login?refused=${refused}`;
}

function sendAsset(res: ServerResponse, a: Asset): void {
  res.writeHead(200, { 'content-type': a.type, 'content-length': String(a.body.length), ...SECURITY_HEADERS });
  res.end(a.body);
}

function redirect(res: ServerResponse, to: string, headers: Record<string, string | string[]> = {}): void {
  res.writeHead(303, { location: to, 'content-length': '0', ...SECURITY_HEADERS, ...headers });
  res.end();
}

/** The console's routes and their guards. */
class ConsoleRoutes {
  private readonly sessions: Sessions;
  private readonly api: ConsoleApi;
  private readonly assets: Map<string, Asset>;

  constructor(
    private readonly options: ConsoleOptions,
    readonly streams: EventStreams,
  ) {
    this.sessions = new Sessions(options.token, Date.now, options.operators ?? []);
    this.api = new ConsoleApi(options.deps);
    this.assets = loadAssets({ token: options.token !== undefined, oidc: options.oidc !== undefined });
  }

  router(): Router {
    const page = (path: string) => (c: { req: IncomingMessage; res: ServerResponse }) =>
      this.sessions.csrfOf(c.req) === null ? redirect(c.res, '/login') : sendAsset(c.res, this.assets.get(path)!);
    return (
      new Router()
        .on('GET', '/healthz', ({ res }) => sendJson(res, 200, { ok: true }))
        // After a refused login (`/login?failed=1`, `/login?refused=…`), the same page says why.
        .on('GET', '/login', ({ res, query }) => sendAsset(res, this.assets.get(loginPageOf(query)) ?? this.assets.get('/login')!))
        .on('POST', '/login', ({ req, res }) => this.login(req, res))
        .on('GET', '/auth/login', ({ req, res }) => this.oidcBegin(req, res))
        .on('GET', '/auth/callback', ({ req, res, query }) => this.oidcFinish(req, res, query))
        .on('POST', '/logout', ({ req, res }) => this.logout(req, res))
        .on('GET', '/style.css', ({ res }) => sendAsset(res, this.assets.get('/style.css')!))
        .on('GET', '/', page('/'))
        .on('GET', '/app.js', page('/app.js'))
        .on('GET', '/api/session', ({ req, res }) => this.guard(req, res, (who) => this.session(req, res, who)))
        .on('GET', '/api/events', (c) => this.guard(c.req, c.res, () => this.events(c.req, c.res, c.query.get('run')), 'read'))
        .on('GET', '/api/runs', (c) => this.guard(c.req, c.res, () => this.api.listRuns(c), 'read'))
        .on('GET', '/api/runs/:runId', (c) => this.guard(c.req, c.res, () => this.api.showRun(c), 'read'))
        .on('GET', '/api/approvals', (c) => this.guard(c.req, c.res, () => this.api.listApprovals(c), 'read'))
        .on('GET', '/api/approvals/:id', (c) => this.guard(c.req, c.res, (who) => this.api.showApproval(c, who), 'read'))
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
        this.options.log.warn({ by: who.actor.name, sub: who.actor.sub, role, path: req.url }, 'console: refused for want of a role');
        // A person logged in through the provider but outside its operator groups may only look.
        const readOnly = who.actor.sub !== undefined && !who.roles.includes('approve');
        const message = readOnly
          ? `read-only: ${who.actor.name} is not in console.oidc.operatorGroups, and may look but not decide`
          : err.message;
        return sendJson(res, 403, { error: message, code: err.code });
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

  /** The session's CSRF token and who it is: the actor and roles, and the person as the page shows it. */
  private session(req: IncomingMessage, res: ServerResponse, who: Identity): void {
    const { name, email, sub } = who.actor;
    const person = {
      name,
      ...(email !== undefined ? { email } : {}),
      role: who.roles.includes('approve') ? 'operator' : 'read-only',
      via: sub !== undefined ? 'oidc' : 'token',
    };
    sendJson(res, 200, { csrf: this.sessions.csrfOf(req), actor: who.actor, roles: who.roles, person });
  }

  /** Off to the provider, with a new login attempt in a cookie. */
  private async oidcBegin(req: IncomingMessage, res: ServerResponse): Promise<void> {
    req.resume();
    if (!this.options.oidc) return sendError(res, 404, 'OpenID Connect login is not configured (console.oidc)');
    const { attempt, authorizationUrl } = await this.options.oidc.begin();
    const secure = this.options.secureCookie ? '; Secure' : '';
    const cookie = `${ATTEMPT_COOKIE}=${attempt}; HttpOnly; SameSite=Lax; Path=/auth; Max-Age=600${secure}`;
    redirect(res, authorizationUrl.href, { 'set-cookie': cookie });
  }

  /** The provider's answer: a session of the person it names, or back to the login page saying why not. */
  private async oidcFinish(req: IncomingMessage, res: ServerResponse, query: URLSearchParams): Promise<void> {
    req.resume();
    if (!this.options.oidc) return sendError(res, 404, 'OpenID Connect login is not configured (console.oidc)');
    const clear = `${ATTEMPT_COOKIE}=; HttpOnly; SameSite=Lax; Path=/auth; Max-Age=0`;
    const from = req.socket.remoteAddress;
    try {
      const person = await this.options.oidc.finish(readCookie(req, ATTEMPT_COOKIE), query);
      const id = this.sessions.open(oidcIdentity(person, from));
      this.options.log.info({ from, sub: person.sub, email: person.email, role: person.role }, 'console login (OpenID Connect)');
      const page = this.assets.get('/logged-in')!;
      res.writeHead(200, {
        'content-type': page.type,
        'content-length': String(page.body.length),
        ...SECURITY_HEADERS,
        'set-cookie': [Sessions.cookie(id, this.options.secureCookie ?? false), clear],
      });
      res.end(page.body);
    } catch (err) {
      if (!(err instanceof OidcLoginError)) throw err;
      this.options.log.warn({ from, reason: err.reason, err }, 'console login refused (OpenID Connect)');
      const why: LoginRefusal = err.reason === 'not_allowed' ? 'not-allowed' : 'sign-in';
      redirect(res, `/login?refused=${why}`, { 'set-cookie': clear });
    }
  }

  private async login(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const form = new URLSearchParams(await readBody(req, 4096));
    if (this.options.token === undefined) {
      this.options.log.warn(
        { from: req.socket.remoteAddress },
        'console login refused: token login is off (console.oidc without allowTokenLogin)',
      );
      return redirect(res, '/login?refused=token-off');
    }
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
