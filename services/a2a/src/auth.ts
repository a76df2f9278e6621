/**
 * Who calls the A2A server: the bearer token, hashed, looked up among the config's token hashes.
 * The tenant comes from the token, never from the request (the SDK's `tenant` field, a REST
 * path prefix, a context id): every key the server reads or writes is under that tenant.
 */
import type { NextFunction, Request, Response } from 'express';
import type { User } from '@a2a-js/sdk/server';
import type { A2aConfig, OperatorEntry } from '@bosun/config';
import { sameSecret, sha256 } from '@bosun/contract';

/** The tenant of callers without a token, when the config allows them. */
export const ANONYMOUS_TENANT = 'anonymous';
/** The realm of the server's `WWW-Authenticate` challenge. */
export const A2A_REALM = 'bosun-a2a';

/** What else a {@link Caller} carries: the operator its token belongs to, and where the request came from. */
export interface CallerDetails {
  /** The operator of the config the token belongs to (`a2a.tokens[].person`). */
  person?: OperatorEntry;
  /** The client's address as the server saw it: a decision by this caller records it. */
  address?: string;
}

/**
 * An authenticated caller: an A2A SDK user that carries its tenant and rights, the operator of
 * the config the token belongs to (`a2a.tokens[].person`), if any, and the client's address.
 */
export class Caller implements User {
  readonly person?: OperatorEntry;
  readonly address?: string;
  constructor(
    readonly tenant: string,
    readonly operator: boolean,
    private readonly anonymous = false,
    details: CallerDetails = {},
  ) {
    if (details.person) this.person = details.person;
    if (details.address !== undefined) this.address = details.address;
  }
  get isAuthenticated(): boolean {
    return !this.anonymous;
  }
  get userName(): string {
    return this.anonymous ? ANONYMOUS_TENANT : `tenant:${this.tenant}`;
  }
}

/** Resolves callers from `Authorization: Bearer <token>` against the config's hashes, in constant time per hash. */
export class TokenTable {
  private readonly entries: { hash: Buffer; tenant: string; operator: boolean; person?: OperatorEntry }[];
  /** `operators`: the config's people, whom a token's `person` names (checked when the config was parsed). */
  constructor(
    private readonly config: Pick<A2aConfig, 'tokens' | 'allowAnonymous'>,
    operators: readonly OperatorEntry[] = [],
  ) {
    this.entries = config.tokens.map((t) => {
      const person = t.person === undefined ? undefined : operators.find((o) => o.name === t.person);
      if (t.person !== undefined && !person) throw new Error(`a2a.tokens: person "${t.person}" is not one of the config's operators`);
      // A token that names a person answers approvals as that person: `operator` follows.
      return {
        hash: Buffer.from(t.sha256, 'hex'),
        tenant: t.tenant,
        operator: t.operator || person !== undefined,
        ...(person ? { person } : {}),
      };
    });
  }

  /**
   * The caller of a request (from `address`, when given): a {@link Caller}, or why there is none
   * (`missing`: no bearer token; `invalid`: an unknown one).
   */
  resolve(header: string | undefined, address?: string): Caller | 'missing' | 'invalid' {
    const where = address !== undefined ? { address } : {};
    const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header ?? '');
    if (!m) {
      if (/^Bearer(?:[ \t]|$)/i.test(header ?? '')) return 'invalid';
      return this.config.allowAnonymous && header === undefined ? new Caller(ANONYMOUS_TENANT, false, true, where) : 'missing';
    }
    const given = sha256(m[1]!);
    let found: (typeof this.entries)[number] | undefined;
    // Every hash is compared, so the time does not tell which entry matched.
    for (const e of this.entries) if (sameSecret(given, e.hash) && !found) found = e;
    return found
      ? new Caller(found.tenant, found.operator, false, { ...(found.person ? { person: found.person } : {}), ...where })
      : 'invalid';
  }
}

/** The caller stored on an admitted request. */
export function requestCaller(req: Request): Caller {
  const caller = (req as Request & { bosunCaller?: Caller }).bosunCaller;
  if (!caller) throw new Error('A2A request reached the SDK without an authenticated caller');
  return caller;
}

/**
 * Express middleware: admits a request whose token resolves to a caller, else answers 401 with
 * a bearer challenge (RFC 6750) and nothing of the request read. The body is in the binding's
 * error shape: HTTP+JSON's AIP-193 error (spec §11.6), a plain `{error}` on JSON-RPC (no JSON-RPC
 * code means "unauthenticated").
 */
export function requireCaller(tokens: TokenTable, binding: 'jsonrpc' | 'rest' = 'jsonrpc') {
  return (req: Request, res: Response, next: NextFunction): void => {
    const caller = tokens.resolve(req.headers.authorization, req.socket.remoteAddress);
    if (caller instanceof Caller) {
      (req as Request & { bosunCaller?: Caller }).bosunCaller = caller;
      next();
      return;
    }
    const challenge =
      caller === 'missing'
        ? `Bearer realm="${A2A_REALM}"`
        : `Bearer realm="${A2A_REALM}", error="invalid_token", error_description="the bearer token is not valid"`;
    const message = caller === 'missing' ? 'a bearer token is required' : 'the bearer token is not valid';
    const body =
      binding === 'rest' ? { error: { code: 401, status: 'UNAUTHENTICATED', message, details: [] } } : { error: 'unauthorized', message };
    res.status(401).set('www-authenticate', challenge).json(body);
  };
}
