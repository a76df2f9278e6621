import type { IncomingMessage, ServerResponse } from 'node:http';
import { BosunError, sameSecret, sha256 } from '@bosun/contract';
import { sendJson } from './json.js';

/** How an `Authorization` header fares: the right token, none (or another scheme), or a wrong bearer token. */
export type BearerCheck = 'ok' | 'missing' | 'invalid';

/** The token of an `Authorization: Bearer <token>` header, or why there is none (no bearer header; a malformed one). */
export function bearerToken(header: string | undefined): { token: string } | { problem: 'missing' | 'invalid' } {
  if (!/^Bearer(?:[ \t]|$)/i.test(header ?? '')) return { problem: 'missing' };
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header ?? '');
  return m ? { token: m[1]! } : { problem: 'invalid' };
}

/** The `WWW-Authenticate` challenge of a 401 in `realm` (RFC 6750, section 3); see {@link BearerAuth.challenge}. */
export function bearerChallenge(realm: string, check: Exclude<BearerCheck, 'ok'>): string {
  const base = `Bearer realm="${realm}"`;
  return check === 'missing' ? base : `${base}, error="invalid_token", error_description="the bearer token is not valid"`;
}

/** Options of {@link BearerAuth}. */
export interface BearerAuthOptions {
  /** The token clients present. A secret: never logged, echoed or kept in clear. */
  token: string;
  /** The protection space named in the challenge, e.g. `bosun-gateway`. */
  realm: string;
}

/**
 * `Authorization: Bearer <token>` (RFC 6750), compared in constant time with `sameSecret` (which
 * hashes both sides, so the token's length does not leak either); only the token's digest is
 * kept, and a malformed header is compared too, so every refusal costs the same.
 */
export class BearerAuth {
  private readonly expected: Buffer;
  private readonly realm: string;

  /** @throws BosunError `invalid_config` when the token is empty. */
  constructor(options: BearerAuthOptions) {
    if (options.token.length === 0) throw new BosunError('invalid_config', `the bearer token of realm ${options.realm} is empty`);
    this.expected = sha256(options.token);
    this.realm = options.realm;
  }

  /** Checks an `Authorization` header. */
  check(header: string | undefined): BearerCheck {
    if (!/^Bearer(?:[ \t]|$)/i.test(header ?? '')) return 'missing';
    const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header ?? '');
    return sameSecret(sha256(m?.[1] ?? ''), this.expected) && m !== null ? 'ok' : 'invalid';
  }

  /**
   * The `WWW-Authenticate` challenge of a 401 (RFC 6750, section 3): a request without a bearer
   * token gets a bare challenge naming the realm, a wrong token `error="invalid_token"`.
   */
  challenge(check: Exclude<BearerCheck, 'ok'>): string {
    return bearerChallenge(this.realm, check);
  }

  /**
   * Whether `req` carries the token. When it does not, answers 401 with `body` (as JSON), the
   * challenge and `headers`, discards the request body, and returns false.
   */
  admit(req: IncomingMessage, res: ServerResponse, body: unknown, headers: Record<string, string> = {}): boolean {
    const check = this.check(req.headers.authorization);
    if (check === 'ok') return true;
    req.resume();
    sendJson(res, 401, body, { 'www-authenticate': this.challenge(check), ...headers });
    return false;
  }
}
