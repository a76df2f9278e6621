import type { ServerResponse } from 'node:http';

/**
 * Answers with `body` as JSON (one line, then a newline), `cache-control: no-store` and a
 * `content-length`; `headers` are added to (or replace) those.
 */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = `${JSON.stringify(body)}\n`;
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(text)),
    'cache-control': 'no-store',
    ...headers,
  });
  res.end(text);
}

/** Answers `{"error": message}` with `status` (see {@link sendJson}). */
export function sendError(res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}): void {
  sendJson(res, status, { error: message }, headers);
}
