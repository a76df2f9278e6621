/**
 * The one way Bosun reads the `Host` and `Origin` values it allows (DNS-rebinding protection of
 * the gateway's MCP face): the config check uses it to validate `gateway.mcpServer.allowedHosts`
 * and `allowedOrigins`, and the face uses it to compare a request's headers with them.
 */

/**
 * A `Host` value (`name[:port]`, `[v6][:port]`) as `hostname:port`: lowercase, the port always
 * written (80 when absent, the default of `http:`). Undefined when it is not such a value (a
 * path, user info, a scheme or spaces).
 */
export function normalizeHost(value: string): string | undefined {
  if (!/^[^\s/?#@\\]+$/.test(value)) return undefined;
  try {
    const url = new URL(`http://${value}`);
    return url.hostname === '' ? undefined : `${url.hostname}:${url.port || '80'}`;
  } catch {
    return undefined;
  }
}

/**
 * An `Origin` value (`http(s)://host[:port]`) in the form browsers send: lowercase, without a
 * default port or a trailing slash. Undefined for anything else, including the opaque origin
 * `null`.
 */
export function normalizeOrigin(value: string): string | undefined {
  try {
    const url = new URL(value);
    const bare = url.pathname === '/' && url.search === '' && url.hash === '' && url.username === '' && url.password === '';
    return (url.protocol === 'http:' || url.protocol === 'https:') && bare ? url.origin : undefined;
  } catch {
    return undefined;
  }
}
