/**
 * The console's sessions: a token is checked once, at login (in constant time) — a person's token
 * from the config's `operators` (the session is that person's, verified, with their roles) or the
 * shared operator token (unverified `console-operator`, every role) — or a person logs in through
 * OpenID Connect (`oidc.ts`); either way the login is exchanged for a random session id in an
 * HttpOnly, SameSite=Strict cookie, and the session holds the person's identity. Each session has its
 * own CSRF token, which every POST must echo in the `x-csrf-token` header. Sessions live in this
 * process only: a restart logs everyone out.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { OperatorEntry } from '@bosun/config';
import { ACTOR_LIMITS, ROLES, sameSecret } from '@bosun/contract';
import { OperatorDirectory, type Identity } from '@bosun/transport';
import type { Person } from './oidc.js';

/** The session cookie's name. */
export const SESSION_COOKIE = 'bosun_console';
/** How long a session lasts without a new login. */
export const SESSION_TTL_MS = 12 * 60 * 60 * 1000;

interface Session {
  csrf: string;
  expiresAt: number;
  /** Who logged in. */
  identity: Identity;
}

/** The name of a session opened with the shared token. */
export const SHARED_CONSOLE_NAME = 'console-operator';

/**
 * The identity of a person logged in through the provider: verified, with their `sub` and email;
 * an operator (in `console.oidc.operatorGroups`) holds every role, anyone else only `read`.
 */
export function oidcIdentity(person: Person, address?: string): Identity {
  return {
    actor: {
      name: person.name.slice(0, ACTOR_LIMITS.name),
      verified: true,
      path: 'console',
      sub: person.sub,
      ...(person.email !== undefined ? { email: person.email } : {}),
      ...(address ? { address } : {}),
    },
    roles: person.role === 'operator' ? ROLES : ['read'],
  };
}

/** The value of one cookie of a request, or undefined. */
export function readCookie(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** Logins, sessions and their CSRF tokens. */
export class Sessions {
  private readonly directory: OperatorDirectory;
  private readonly tokenLogin: boolean;
  private readonly sessions = new Map<string, Session>();

  /**
   * `token`: the shared operator token, or undefined when token login is off (OpenID Connect
   * only: then no token, a person's or the shared one, opens a session); `operators`: the
   * config's people (default none).
   */
  constructor(
    token: string | undefined,
    private readonly now: () => number = Date.now,
    operators: readonly OperatorEntry[] = [],
  ) {
    this.tokenLogin = token !== undefined;
    this.directory = new OperatorDirectory({ operators, ...(token !== undefined ? { shared: { token, name: SHARED_CONSOLE_NAME } } : {}) });
  }

  /** A new session id when `token` is a person's token or the shared one, else null. `address`: the client's. */
  login(token: string, address?: string): string | null {
    const identity = !this.tokenLogin || token === '' ? null : this.directory.resolve(token, 'console', address);
    if (!identity) return null;
    return this.open(identity);
  }

  /** A new session of `identity` (a token login, or a person logged in through the provider); its id. */
  open(identity: Identity): string {
    this.sweep();
    const id = randomBytes(32).toString('base64url');
    this.sessions.set(id, { csrf: randomBytes(32).toString('base64url'), expiresAt: this.now() + SESSION_TTL_MS, identity });
    return id;
  }

  /** Who the request's live session belongs to, or null. */
  identityOf(req: IncomingMessage): Identity | null {
    if (this.csrfOf(req) === null) return null;
    return this.identityOfSession(readCookie(req, SESSION_COOKIE)!);
  }

  /** Who session `id` belongs to (live or not), or null. */
  identityOfSession(id: string): Identity | null {
    return this.sessions.get(id)?.identity ?? null;
  }

  /** Ends the request's session, if any. */
  logout(req: IncomingMessage): void {
    const id = readCookie(req, SESSION_COOKIE);
    if (id !== undefined) this.sessions.delete(id);
  }

  /** The CSRF token of the request's session, or null when it has no live session. */
  csrfOf(req: IncomingMessage): string | null {
    return this.live(req)?.csrf ?? null;
  }

  private live(req: IncomingMessage): Session | undefined {
    const id = readCookie(req, SESSION_COOKIE);
    const s = id === undefined ? undefined : this.sessions.get(id);
    if (!s) return undefined;
    if (s.expiresAt <= this.now()) {
      this.sessions.delete(id!);
      return undefined;
    }
    return s;
  }

  /** Whether a request of a live session carries its CSRF token in `x-csrf-token`. */
  csrfOk(req: IncomingMessage): boolean {
    const csrf = this.csrfOf(req);
    const sent = req.headers['x-csrf-token'];
    if (csrf === null || typeof sent !== 'string') return false;
    return sameSecret(sent, csrf);
  }

  /** The `Set-Cookie` value of a new session. */
  static cookie(id: string, secure: boolean): string {
    const attrs = `HttpOnly; SameSite=Strict; Path=/; Max-Age=${SESSION_TTL_MS / 1000}`;
    return `${SESSION_COOKIE}=${id}; ${attrs}${secure ? '; Secure' : ''}`;
  }

  /** The `Set-Cookie` value that removes the session cookie. */
  static clearCookie(): string {
    return `${SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0`;
  }

  private sweep(): void {
    const now = this.now();
    for (const [id, s] of this.sessions) if (s.expiresAt <= now) this.sessions.delete(id);
  }
}
