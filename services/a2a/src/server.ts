/**
 * The A2A server's HTTP face, built from the SDK's Express handlers: the agent card at the
 * well-known path (public), JSON-RPC at `/a2a/jsonrpc` and HTTP+JSON at `/a2a/rest` (behind the
 * bearer check), each in protocol 1.0 and, through the SDK's compat layer, 0.3. In front of the
 * SDK: the body limit, the version query parameter, and the JSON-RPC envelope check.
 */
import { errorMessage } from '@bosun/contract';
import type { Server } from 'node:http';
import express from 'express';
import { AGENT_CARD_PATH, type AgentCard } from '@a2a-js/sdk';
import { agentCardHandler, jsonRpcHandler, restHandler } from '@a2a-js/sdk/server/express';
import { type A2AError, A2A_ERROR_CODE, RequestMalformedError, toRestErrorBody } from '@a2a-js/sdk/errors';
import { ListenError } from '@bosun/transport';
import type { Logger } from '@bosun/config';
import { requestCaller, requireCaller, type TokenTable } from './auth.js';
import { JSONRPC_PATH, REST_PATH, servedCard } from './card.js';
import type { BosunA2AHandler } from './handler.js';

/** A listening A2A server. */
export interface A2aServer {
  port: number;
  host: string;
  close(): Promise<void>;
}

/** Room for the envelope and JSON escaping around a message of `maxMessageBytes`. */
const ENVELOPE_BYTES = 64 * 1024;

/** The protocol version header, and the query parameter a client may use instead (spec §3.6.1). */
const VERSION_HEADER = 'a2a-version';
const VERSION_PARAM = 'A2A-Version';

type Binding = 'jsonrpc' | 'rest';

/** Whether a request speaks protocol 0.3: no version named, or a 0.x version (the SDK's own rule). */
function legacyRequest(req: express.Request): boolean {
  const v = req.headers[VERSION_HEADER];
  return v === undefined || v === '' || (typeof v === 'string' && /^0\./.test(v.trim()));
}

/** An HTTP+JSON error body (AIP-193, spec §11.6) for 1.0, or the 0.3 binding's `{code, message}`. */
function restError(req: express.Request, status: number, error: A2AError, legacyCode: number): unknown {
  return legacyRequest(req) ? { code: legacyCode, message: error.message } : toRestErrorBody(error, status);
}

/**
 * `?A2A-Version=` stands for the header when the header is absent (spec §3.6.1); the SDK reads
 * only the header, so the value is copied there before it looks.
 */
export const versionFromQuery: express.RequestHandler = (req, _res, next) => {
  const given = new URL(req.originalUrl, 'http://x').searchParams.get(VERSION_PARAM);
  if (req.headers[VERSION_HEADER] === undefined && given !== null) req.headers[VERSION_HEADER] = given;
  next();
};

/**
 * The request body, parsed here with the configured limit (the SDK's own parser then leaves it
 * alone). A body over it gets 413, malformed JSON a parse error, each in the binding's own shape:
 * JSON-RPC answers HTTP 200 with -32700 (413 with -32600), HTTP+JSON a 4xx with its error body.
 */
function bodyParser(limit: number, binding: Binding): [express.RequestHandler, express.ErrorRequestHandler] {
  const parse = express.json({ limit, type: ['application/json', 'application/a2a+json'] });
  const onError: express.ErrorRequestHandler = (err: { type?: string }, req, res, next) => {
    if (err.type === 'entity.too.large') {
      const message = `request body over the limit of ${limit} bytes`;
      if (binding === 'rest')
        return void res.status(413).json(restError(req, 413, new RequestMalformedError(message), A2A_ERROR_CODE.INVALID_REQUEST));
      return void res.status(413).json({ jsonrpc: '2.0', id: null, error: { code: A2A_ERROR_CODE.INVALID_REQUEST, message } });
    }
    if (err instanceof SyntaxError) {
      const message = 'Invalid JSON payload.';
      if (binding === 'rest')
        return void res.status(400).json(restError(req, 400, new RequestMalformedError(message), A2A_ERROR_CODE.PARSE_ERROR));
      return void res.status(200).json({ jsonrpc: '2.0', id: null, error: { code: A2A_ERROR_CODE.PARSE_ERROR, message } });
    }
    next(err);
  };
  return [parse, onError];
}

/** Why a parsed JSON-RPC body is not a request object (JSON-RPC 2.0 §4), or undefined when it is one. */
export function envelopeProblem(body: unknown): string | undefined {
  if (Array.isArray(body)) return 'batch requests are not supported: send one request object';
  if (typeof body !== 'object' || body === null) return 'the body must be a JSON-RPC request object';
  const r = body as Record<string, unknown>;
  if (r.jsonrpc !== '2.0') return 'jsonrpc: must be "2.0"';
  if (typeof r.method !== 'string' || r.method === '') return 'method: required, a string';
  if ('id' in r && r.id !== null && typeof r.id !== 'string' && !(typeof r.id === 'number' && Number.isFinite(r.id)))
    return 'id: must be a string, a number or null';
  return undefined;
}

/**
 * Refuses what is not a JSON-RPC request object with -32600 (Invalid Request), before the SDK,
 * which answers some of these with -32602 in protocol 1.0.
 */
const jsonRpcEnvelope: express.RequestHandler = (req, res, next) => {
  // A body of another content type was not parsed: the SDK answers it (-32005).
  if (req.body === undefined) return next();
  const problem = envelopeProblem(req.body);
  if (problem === undefined) return next();
  const raw = (req.body as { id?: unknown } | undefined)?.id;
  const id = typeof raw === 'string' || typeof raw === 'number' ? raw : null;
  res.status(200).json({ jsonrpc: '2.0', id, error: { code: A2A_ERROR_CODE.INVALID_REQUEST, message: `Invalid Request: ${problem}` } });
};

/** The Express app: card, transports, auth (then the body limit) in front of the transports. */
export function a2aApp(handler: BosunA2AHandler, tokens: TokenTable, maxMessageBytes: number): express.Express {
  const app = express();
  app.disable('x-powered-by');
  // One card for 0.3 and 1.0 clients alike (card.ts): no negotiation by A2A-Version.
  const served = async () => servedCard(await handler.getAgentCard()) as unknown as AgentCard;
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: served, cache: { maxAge: 60 } }));
  const userBuilder = (req: express.Request) => Promise.resolve(requestCaller(req));
  const limit = maxMessageBytes + ENVELOPE_BYTES;
  app.use(
    JSONRPC_PATH,
    requireCaller(tokens, 'jsonrpc'),
    versionFromQuery,
    ...bodyParser(limit, 'jsonrpc'),
    jsonRpcEnvelope,
    jsonRpcHandler({ requestHandler: handler, userBuilder, legacyCompat: { enabled: true } }),
  );
  app.use(
    REST_PATH,
    requireCaller(tokens, 'rest'),
    versionFromQuery,
    ...bodyParser(limit, 'rest'),
    restHandler({ requestHandler: handler, userBuilder, legacyCompat: { enabled: true } }),
  );
  return app;
}

/** Listens on `host:port` (0: a free port). */
export async function listenA2a(app: express.Express, options: { host: string; port: number; log: Logger }): Promise<A2aServer> {
  const server: Server = await new Promise<Server>((resolve, reject) => {
    const s = app.listen(options.port, options.host, (err?: Error) => (err ? reject(err) : resolve(s)));
    s.once('error', reject);
  }).catch((err: unknown) => {
    const code = (err as NodeJS.ErrnoException).code === 'EADDRINUSE' ? 'address_in_use' : 'listen_failed';
    throw new ListenError(code, `A2A server: cannot listen on ${options.host}:${options.port}: ${errorMessage(err)}`, err);
  });
  server.headersTimeout = 15_000;
  server.keepAliveTimeout = 5_000;
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : options.port;
  return {
    port,
    host: options.host,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
