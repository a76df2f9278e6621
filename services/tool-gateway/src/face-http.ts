import { createHash, timingSafeEqual } from 'node:crypto';
import { normalizeHost, normalizeOrigin } from '@bosun/config';

/**
 * The checks the gateway's MCP face makes on an HTTP request before any MCP handling: where the
 * request claims to go (`Host`, `Origin`: DNS-rebinding protection) and who sends it (the bearer
 * token).
 */

/** The `Host` and `Origin` values a face accepts, normalized. */
export interface AllowedOrigins {
  hosts: ReadonlySet<string>;
  origins: ReadonlySet<string>;
}

/** Addresses that listen on every interface: not a name a client would use. */
const WILDCARDS = new Set(['0.0.0.0', '::', '[::]']);

/**
 * The values a face listening on `host`:`port` accepts: the configured ones, or by default
 * `localhost`, `127.0.0.1`, `[::1]` and `host` (unless it is a wildcard address), each with
 * `port`, as `Host`, and `http://` each of them as `Origin`.
 */
export function allowedOrigins(options: {
  host: string;
  port: number;
  allowedHosts?: readonly string[];
  allowedOrigins?: readonly string[];
}): AllowedOrigins {
  const { port } = options;
  const names = ['localhost', '127.0.0.1', '[::1]'];
  if (!WILDCARDS.has(options.host))
    names.push(options.host.includes(':') && !options.host.startsWith('[') ? `[${options.host}]` : options.host);
  const hosts = options.allowedHosts ?? names.map((n) => `${n}:${port}`);
  const origins = options.allowedOrigins ?? names.map((n) => `http://${n}:${port}`);
  const normalized = (values: readonly string[], normalize: (v: string) => string | undefined, field: string): Set<string> =>
    new Set(
      values.map((v) => {
        const n = normalize(v);
        if (n === undefined) throw new Error(`gateway.mcpServer.${field}: ${JSON.stringify(v)} is not a valid value`);
        return n;
      }),
    );
  return { hosts: normalized(hosts, normalizeHost, 'allowedHosts'), origins: normalized(origins, normalizeOrigin, 'allowedOrigins') };
}

/**
 * Why a request is refused for its `Host` or `Origin` header, or undefined when it may go on. A
 * request must name an allowed host; a request without `Origin` (not from a browser) passes, one
 * with an `Origin` must name an allowed origin.
 */
export function rebindingRefusal(allowed: AllowedOrigins, host: string | undefined, origin: string | undefined): string | undefined {
  const h = host === undefined ? undefined : normalizeHost(host);
  if (h === undefined || !allowed.hosts.has(h))
    return `Forbidden: Host ${JSON.stringify(host ?? '')} is not allowed (gateway.mcpServer.allowedHosts)`;
  if (origin === undefined) return undefined;
  const o = normalizeOrigin(origin);
  if (o === undefined || !allowed.origins.has(o))
    return `Forbidden: Origin ${JSON.stringify(origin)} is not allowed (gateway.mcpServer.allowedOrigins)`;
  return undefined;
}

/** How an `Authorization` header fares: the right token, none (or another scheme), or a wrong bearer token. */
export type BearerCheck = 'ok' | 'missing' | 'invalid';

/** A checker of `Authorization: Bearer <token>` headers against `token`, in constant time. */
export function bearerChecker(token: string): (header: string | undefined) => BearerCheck {
  const expected = createHash('sha256').update(token).digest();
  return (header) => {
    if (!/^Bearer(?:[ \t]|$)/i.test(header ?? '')) return 'missing';
    const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header ?? '');
    // Hash both sides so the comparison takes the same time whatever the presented length.
    const presented = createHash('sha256')
      .update(m?.[1] ?? '')
      .digest();
    return timingSafeEqual(presented, expected) && m !== null ? 'ok' : 'invalid';
  };
}

/**
 * The `WWW-Authenticate` challenge of a 401 (RFC 6750, section 3): a request without a bearer
 * token gets a bare challenge, a wrong token `error="invalid_token"`.
 */
export function bearerChallenge(check: Exclude<BearerCheck, 'ok'>): string {
  const base = 'Bearer realm="bosun-gateway"';
  return check === 'missing' ? base : `${base}, error="invalid_token", error_description="the bearer token is not valid"`;
}
