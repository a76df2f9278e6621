/**
 * The A2A server's HTTP face, built from the SDK's Express handlers: the agent card at the
 * well-known path (public), JSON-RPC at `/a2a/jsonrpc` and HTTP+JSON at `/a2a/rest` (behind the
 * bearer check), health at `/healthz`.
 */
import type { Server } from 'node:http';
import express from 'express';
import { AGENT_CARD_PATH, AgentCard } from '@a2a-js/sdk';
import { agentCardHandler, jsonRpcHandler, restHandler } from '@a2a-js/sdk/server/express';
import { ListenError } from '@bosun/transport';
import type { Logger } from '@bosun/config';
import { requestCaller, requireCaller, type TokenTable } from './auth.js';
import { JSONRPC_PATH, REST_PATH } from './card.js';
import type { BosunA2AHandler } from './handler.js';

/** A listening A2A server. */
export interface A2aServer {
  port: number;
  host: string;
  close(): Promise<void>;
}

/** Room for the envelope and JSON escaping around a message of `maxMessageBytes`. */
const ENVELOPE_BYTES = 64 * 1024;

/**
 * The request body, parsed here with the configured limit (the SDK's own parser then leaves it
 * alone): a body over it gets 413 with a JSON-RPC error, malformed JSON -32700, as the SDK does.
 */
function bodyParser(limit: number): [express.RequestHandler, express.ErrorRequestHandler] {
  const parse = express.json({ limit, type: ['application/json', 'application/a2a+json'] });
  const onError: express.ErrorRequestHandler = (err: { type?: string }, _req, res, next) => {
    if (err.type === 'entity.too.large')
      return void res
        .status(413)
        .json({ jsonrpc: '2.0', id: null, error: { code: -32600, message: `request body over the limit of ${limit} bytes` } });
    if (err instanceof SyntaxError)
      return void res.status(200).json({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Invalid JSON payload.' } });
    next(err);
  };
  return [parse, onError];
}

/** The Express app: card, transports, auth (then the body limit) in front of the transports. */
export function a2aApp(handler: BosunA2AHandler, tokens: TokenTable, maxMessageBytes: number): express.Express {
  const app = express();
  app.disable('x-powered-by');
  // Served in the protocol's JSON form (oneofs by field name), which the SDK's card resolver reads.
  const served = async () => AgentCard.toJSON(await handler.getAgentCard()) as AgentCard;
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: served, cache: { maxAge: 60 } }));
  const userBuilder = (req: express.Request) => Promise.resolve(requestCaller(req));
  const body = bodyParser(maxMessageBytes + ENVELOPE_BYTES);
  app.use(
    JSONRPC_PATH,
    requireCaller(tokens),
    ...body,
    jsonRpcHandler({ requestHandler: handler, userBuilder, legacyCompat: { enabled: true } }),
  );
  app.use(REST_PATH, requireCaller(tokens), ...body, restHandler({ requestHandler: handler, userBuilder }));
  return app;
}

/** Listens on `host:port` (0: a free port). */
export async function listenA2a(app: express.Express, options: { host: string; port: number; log: Logger }): Promise<A2aServer> {
  const server: Server = await new Promise<Server>((resolve, reject) => {
    const s = app.listen(options.port, options.host, (err?: Error) => (err ? reject(err) : resolve(s)));
    s.once('error', reject);
  }).catch((err: unknown) => {
    const code = (err as NodeJS.ErrnoException).code === 'EADDRINUSE' ? 'address_in_use' : 'listen_failed';
    throw new ListenError(code, `A2A server: cannot listen on ${options.host}:${options.port}: ${(err as Error).message}`, err);
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
