import type { IncomingMessage } from 'node:http';
import { HttpError } from './errors.js';

/**
 * Reads a request's body as UTF-8 text, at most `maxBytes`. Past it (as declared by
 * `content-length`, or as it arrives) the request is paused and an {@link HttpError} 413 is thrown,
 * whose answer closes the connection: the rest of the body is never read.
 */
export function readBody(req: IncomingMessage, maxBytes: number): Promise<string> {
  const tooLarge = () => new HttpError(413, `request body larger than ${maxBytes} bytes`, { headers: { connection: 'close' } });
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > maxBytes) return reject(tooLarge());
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    req.on('data', (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      if (size > maxBytes) {
        done = true;
        req.pause();
        return reject(tooLarge());
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (done) return;
      done = true;
      resolve(Buffer.concat(chunks).toString('utf8'));
    });
    req.on('error', (err) => {
      if (done) return;
      done = true;
      reject(err);
    });
  });
}
