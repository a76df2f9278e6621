/**
 * A local stand-in for the Gemini REST API (`POST /v1beta/models/<model>:generateContent`),
 * answering with the recorded bodies of `test/fixtures/gemini/` (an `error.code` in a body is its
 * HTTP status), chosen by a function of the request's index; records every request body.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ROOT } from './paths.js';

/** The running server: its base URL (for `baseUrl`), the bodies it received, and `close`. */
export interface GeminiServer {
  baseUrl: string;
  bodies: unknown[];
  close(): Promise<void>;
}

/** Starts the server; `fixture(index)` names the recording of the index-th request. */
export async function startGeminiServer(fixture: (index: number, body: unknown) => string): Promise<GeminiServer> {
  const bodies: unknown[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      bodies.push(body);
      const text = readFileSync(`${ROOT}/test/fixtures/gemini/${fixture(bodies.length - 1, body)}.json`, 'utf8');
      const status = (JSON.parse(text) as { error?: { code?: number } }).error?.code ?? 200;
      res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8' });
      res.end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    bodies,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
