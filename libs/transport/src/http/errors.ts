import { BosunError } from '@bosun/contract';

/** The codes of {@link HttpError}, by status. */
export type HttpErrorCode = 'bad_request' | 'not_found' | 'method_not_allowed' | 'body_too_large' | 'http_error';

const CODES: ReadonlyMap<number, HttpErrorCode> = new Map([
  [400, 'bad_request'],
  [404, 'not_found'],
  [405, 'method_not_allowed'],
  [413, 'body_too_large'],
]);

/**
 * A request that gets a 4xx answer: thrown by a handler (or {@link readBody}), answered by
 * {@link HttpServer} as `{"error": message}` with `status` and `headers`. The message is shown to
 * the client: it names what is wrong and holds no secret.
 */
export class HttpError extends BosunError {
  declare readonly code: HttpErrorCode;
  /** The HTTP status of the answer. */
  readonly status: number;
  /** Headers of the answer (e.g. `connection: close` after a body that was not read). */
  readonly headers: Readonly<Record<string, string>>;

  constructor(status: number, message: string, options: { headers?: Record<string, string>; cause?: unknown } = {}) {
    super(CODES.get(status) ?? 'http_error', message, { cause: options.cause, data: { status } });
    this.name = 'HttpError';
    this.status = status;
    this.headers = options.headers ?? {};
  }
}

/**
 * An HTTP server that could not listen: `address_in_use` when another process holds the port,
 * `listen_failed` otherwise. The message names the server and `host:port`.
 */
export class ListenError extends BosunError {
  declare readonly code: 'address_in_use' | 'listen_failed';

  constructor(code: ListenError['code'], message: string, cause: unknown) {
    super(code, message, { cause });
    this.name = 'ListenError';
  }
}
