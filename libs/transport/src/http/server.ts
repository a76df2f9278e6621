import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '@bosun/config';
import { HttpError, ListenError } from './errors.js';
import { sendError } from './json.js';

/** Answers one request. */
export type RequestHandler = (req: IncomingMessage, res: ServerResponse) => Promise<void> | void;

/** Answers a request whose handler failed. */
export type ErrorAnswer = (err: unknown, req: IncomingMessage, res: ServerResponse) => void;

/** Options of {@link HttpServer.listen}. */
export interface HttpServerOptions {
  /** Names the server in errors and log lines, e.g. `operator API`. */
  name: string;
  /** 0 picks a free port (see {@link HttpServer.port}). */
  port: number;
  /** The address to listen on; default every interface. */
  host?: string;
  log: Logger;
  handle: RequestHandler;
  /**
   * Answers a request whose handler threw or rejected. Default: an {@link HttpError} is answered
   * `{"error": message}` with its status and headers; anything else is logged
   * (`<name> request failed`) and answered 500 `{"error": "internal error"}`, or the connection is
   * ended when the answer had already begun.
   */
  onError?: ErrorAnswer;
  /** `node:http` timeouts; Node's defaults where not given. */
  timeouts?: { requestMs?: number; headersMs?: number; keepAliveMs?: number };
}

/** `host:port` as a client would write it (`[::1]:80`; `*:80` for every interface). */
function hostPort(host: string | undefined, port: number): string {
  if (host === undefined) return `*:${port}`;
  return `${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${port}`;
}

/** The default {@link ErrorAnswer}. */
function defaultErrorAnswer(name: string, log: Logger): ErrorAnswer {
  return (err, req, res) => {
    if (err instanceof HttpError && !res.headersSent) return sendError(res, err.status, err.message, { ...err.headers });
    log.error({ err, method: req.method, path: (req.url ?? '').split('?')[0] }, `${name} request failed`);
    if (!res.headersSent) sendError(res, 500, 'internal error');
    else res.destroy();
  };
}

/**
 * A `node:http` server with Bosun's conventions: a handler's failure is always answered (see
 * {@link HttpServerOptions.onError}), listening fails with a {@link ListenError} naming
 * `host:port`, later server errors are logged, and {@link close} is graceful.
 */
export class HttpServer {
  /** The address it listens on; undefined for every interface. */
  readonly host: string | undefined;
  private readonly server: Server;
  /** Requests not answered yet. */
  private readonly open = new Set<ServerResponse>();
  private closing: Promise<void> | undefined;
  private boundPort = 0;

  private constructor(options: HttpServerOptions) {
    const { name, log, handle } = options;
    const onError = options.onError ?? defaultErrorAnswer(name, log);
    this.host = options.host;
    this.server = createServer((req, res) => {
      this.track(res);
      Promise.resolve()
        .then(() => handle(req, res))
        .catch((err: unknown) => onError(err, req, res))
        .catch((err: unknown) => {
          log.error({ err }, `${name} could not answer a failed request`);
          res.destroy();
        });
    });
    const { requestMs, headersMs, keepAliveMs } = options.timeouts ?? {};
    if (requestMs !== undefined) this.server.requestTimeout = requestMs;
    if (headersMs !== undefined) this.server.headersTimeout = headersMs;
    if (keepAliveMs !== undefined) this.server.keepAliveTimeout = keepAliveMs;
  }

  /**
   * Starts a server; resolves once it listens.
   *
   * @throws ListenError `address_in_use` (another process holds `host:port`) or `listen_failed`.
   */
  static async listen(options: HttpServerOptions): Promise<HttpServer> {
    const { name, log, host, port } = options;
    const http = new HttpServer(options);
    const server = http.server;
    await new Promise<void>((resolve, reject) => {
      const where = hostPort(host, port);
      const failed = (err: NodeJS.ErrnoException) => {
        if (err.code === 'EADDRINUSE')
          return reject(new ListenError('address_in_use', `${name}: cannot listen on ${where}: the address is already in use`, err));
        reject(new ListenError('listen_failed', `${name}: cannot listen on ${where}: ${err.message}`, err));
      };
      server.once('error', failed);
      server.listen(port, host, () => {
        server.off('error', failed);
        resolve();
      });
    });
    server.on('error', (err) => log.error({ err }, `${name} server error`));
    http.boundPort = (server.address() as AddressInfo).port;
    return http;
  }

  /** The port it listens on (the actual one when started with port 0). */
  get port(): number {
    return this.boundPort;
  }

  /**
   * Stops taking connections and resolves once every connection has ended: idle ones are closed
   * at once, and each open one once its request is answered (its answer says `connection: close`
   * when not already begun); those still open after `graceMs` (default 5 s; `Infinity` waits for
   * them, or for {@link closeAllConnections}) are ended. Calling it again returns the same promise.
   */
  close(options: { graceMs?: number } = {}): Promise<void> {
    const graceMs = options.graceMs ?? 5_000;
    this.closing ??= new Promise<void>((resolve) => {
      const force = Number.isFinite(graceMs) ? setTimeout(() => this.server.closeAllConnections(), graceMs) : undefined;
      force?.unref();
      // Its only error is "not running", which is what is wanted.
      this.server.close(() => {
        clearTimeout(force);
        resolve();
      });
      for (const res of this.open) if (!res.headersSent) res.setHeader('connection', 'close');
      this.server.closeIdleConnections();
    });
    return this.closing;
  }

  /** Ends every connection now, open requests included. */
  closeAllConnections(): void {
    this.server.closeAllConnections();
  }

  /** Keeps `res` among the open requests until it is answered; once closing, its connection ends after it. */
  private track(res: ServerResponse): void {
    if (this.closing) res.setHeader('connection', 'close');
    this.open.add(res);
    res.once('close', () => {
      this.open.delete(res);
      // A keep-alive connection whose last request was answered during the close is idle now.
      if (this.closing) setImmediate(() => this.server.closeIdleConnections());
    });
  }
}
