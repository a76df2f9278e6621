import type { ServerResponse } from 'node:http';
import { ConfigError, normalizeHost, normalizeOrigin } from '@bosun/config';
import { sendJson } from '@bosun/transport';

/**
 * The checks the gateway's MCP face makes on an HTTP request before any MCP handling: where the
 * request claims to go (`Host`, `Origin`: DNS-rebinding protection) and, with the bearer auth of
 * the HTTP toolkit (`BearerAuth` in `libs/transport`, realm {@link FACE_REALM}), who sends it;
 * and its JSON-RPC error answers.
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
        if (n === undefined) throw new ConfigError(`gateway.mcpServer.${field}: ${JSON.stringify(v)} is not a valid value`);
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

/** The realm of the face's `WWW-Authenticate` challenge. */
export const FACE_REALM = 'bosun-gateway';

/**
 * Answers with a JSON-RPC error envelope (`{"jsonrpc": "2.0", "error": {code, message}, "id": null}`),
 * as the SDK's transport answers its own HTTP errors; ends the answer when it had already begun.
 */
export function sendJsonRpcError(
  res: ServerResponse,
  status: number,
  error: { code: number; message: string },
  headers: Record<string, string> = {},
): void {
  if (res.headersSent) return void res.end();
  sendJson(res, status, jsonRpcError(error.code, error.message), headers);
}

/** A JSON-RPC error envelope without an id. */
export function jsonRpcError(code: number, message: string): { jsonrpc: '2.0'; error: { code: number; message: string }; id: null } {
  return { jsonrpc: '2.0', error: { code, message }, id: null };
}
