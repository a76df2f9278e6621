/**
 * The console's sessions: the operator token is checked once, at login (in constant time), or a
 * person logs in through OpenID Connect (`oidc.ts`); either way the login is exchanged for a
 * random session id in an HttpOnly, SameSite=Strict cookie, and the session holds the person. Each session has its
 * own CSRF token, which every POST must echo in the `x-csrf-token` header. Sessions live in this
 * process only: a restart logs everyone out.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Person } from './oidc.js';

/** The session cookie's name. */
export const SESSION_COOKIE = 'bosun_console';
/** How long a session lasts without a new login. */
export const SESSION_TTL_MS = 12 * 60 * 60 * 1000;

interface Session {
  csrf: string;
  expiresAt: number;
  person: Person;
}

/** Who a shared-token login is: the operator token decides, as it always did. */
export const TOKEN_PERSON: Person = Object.freeze({ sub: 'token', name: 'console-operator', groups: [], role: 'operator', via: 'token' });

function digest(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
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
  private readonly expected: Buffer | undefined;
  private readonly sessions = new Map<string, Session>();

  /** `token`: the operator token, or undefined when token login is off (OpenID Connect only). */
  constructor(
    token: string | undefined,
    private readonly now: () => number = Date.now,
  ) {
    this.expected = token === undefined ? undefined : digest(token);
  }

  /** A new session id when `token` is the operator token, else null (always null without a token). */
  login(token: string): string | null {
    if (this.expected === undefined || !timingSafeEqual(digest(token), this.expected)) return null;
    return this.open(TOKEN_PERSON);
  }

  /** A new session of `person` (logged in through the provider); its id. */
  open(person: Person): string {
    this.sweep();
    const id = randomBytes(32).toString('base64url');
    this.sessions.set(id, { csrf: randomBytes(32).toString('base64url'), expiresAt: this.now() + SESSION_TTL_MS, person });
    return id;
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

  /** The person of the request's live session, or null. */
  personOf(req: IncomingMessage): Person | null {
    return this.live(req)?.person ?? null;
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
    return timingSafeEqual(digest(sent), digest(csrf));
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
