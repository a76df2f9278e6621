import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendError } from './json.js';

/** What a route's handler gets. */
export interface RouteContext {
  req: IncomingMessage;
  res: ServerResponse;
  /** The values of the pattern's `:name` segments, percent-decoded. */
  params: Readonly<Record<string, string>>;
  /** The query string. */
  query: URLSearchParams;
  /** The path, without the query string. */
  path: string;
}

/** Answers one request of a route. */
export type RouteHandler = (ctx: RouteContext) => Promise<void> | void;

/** Answers a request no route's path matches. */
export type NotFoundHandler = (req: IncomingMessage, res: ServerResponse, path: string) => void;

/** `*` matches every method. */
export type RouteMethod = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | '*';

interface Route {
  method: RouteMethod;
  segments: readonly string[];
  handler: RouteHandler;
}

/** The path's segments (empty ones dropped: `/a//b/` is `/a/b`) and its query. */
function splitUrl(url: string): { path: string; segments: string[]; query: URLSearchParams } {
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  return { path, segments: path.split('/').filter((s) => s !== ''), query: new URLSearchParams(q < 0 ? '' : url.slice(q + 1)) };
}

/** The params of `segments` on a route's pattern, or undefined when they do not match (or do not decode). */
function matchPath(pattern: readonly string[], segments: readonly string[]): Record<string, string> | undefined {
  if (pattern.length !== segments.length) return undefined;
  // Keys are the pattern's names; a null prototype keeps them plain data whatever they are.
  const params = Object.create(null) as Record<string, string>;
  for (const [i, p] of pattern.entries()) {
    const s = segments[i]!;
    if (!p.startsWith(':')) {
      if (p !== s) return undefined;
      continue;
    }
    try {
      params[p.slice(1)] = decodeURIComponent(s);
    } catch {
      return undefined;
    }
  }
  return params;
}

/** The default 404: `{"error": "not found"}`. */
const notFound: NotFoundHandler = (req, res) => {
  req.resume();
  sendError(res, 404, 'not found');
};

/**
 * Routing by method and path. Patterns are literal segments and `:name` segments (one segment
 * each, percent-decoded; one that does not decode does not match). A request whose path matches
 * no route gets 404 (by default `{"error": "not found"}`); one whose path matches but whose method
 * does not gets 405 `{"error": "method <M> not allowed"}` with `Allow` naming the methods there
 * are. Neither reads the request body. Routes are tried in the order they were added.
 */
export class Router {
  private readonly routes: Route[] = [];
  private readonly notFound: NotFoundHandler;

  constructor(options: { notFound?: NotFoundHandler } = {}) {
    this.notFound = options.notFound ?? notFound;
  }

  /** Adds a route for `method` (or each of `methods`) on `pattern`, e.g. `/runs/:runId/cancel`. */
  on(method: RouteMethod | readonly RouteMethod[], pattern: string, handler: RouteHandler): this {
    const segments = splitUrl(pattern).segments;
    for (const m of typeof method === 'string' ? [method] : method) this.routes.push({ method: m, segments, handler });
    return this;
  }

  /** Answers `req` with the first route that matches it (404 or 405 when none does). */
  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { path, segments, query } = splitUrl(req.url ?? '/');
    const allowed: string[] = [];
    for (const route of this.routes) {
      const params = matchPath(route.segments, segments);
      if (params === undefined) continue;
      if (route.method === '*' || route.method === req.method) return route.handler({ req, res, params, query, path });
      if (!allowed.includes(route.method)) allowed.push(route.method);
    }
    if (allowed.length === 0) return this.notFound(req, res, path);
    req.resume();
    sendError(res, 405, `method ${req.method ?? '?'} not allowed`, { allow: allowed.join(', ') });
  }
}
