import type { IncomingMessage } from 'node:http';

/** What {@link readBounded} read: the whole body, or — past the limit — its first bytes only. */
export type BoundedBody = { tooLarge: false; text: string } | { tooLarge: true; start: string; declared: number | undefined };

/** How much of an oversized body is kept for its dead letter. */
export const OVERSIZED_KEEP_BYTES = 4096;

/**
 * Reads a request's body as UTF-8, at most `maxBytes`. Past it (declared by `content-length`, or
 * as it arrives) it stops reading and returns the first {@link OVERSIZED_KEEP_BYTES} bytes it has,
 * for the dead letter; the caller answers 413 and closes the connection.
 */
export function readBounded(req: IncomingMessage, maxBytes: number): Promise<BoundedBody> {
  const declaredHeader = Number(req.headers['content-length']);
  const declared = Number.isFinite(declaredHeader) ? declaredHeader : undefined;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const tooLarge = () => {
      done = true;
      req.pause();
      resolve({ tooLarge: true, start: Buffer.concat(chunks).subarray(0, OVERSIZED_KEEP_BYTES).toString('utf8'), declared });
    };
    if (declared !== undefined && declared > maxBytes) return tooLarge();
    req.on('data', (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      chunks.push(chunk);
      if (size > maxBytes) tooLarge();
    });
    req.on('end', () => {
      if (done) return;
      done = true;
      resolve({ tooLarge: false, text: Buffer.concat(chunks).toString('utf8') });
    });
    req.on('error', (err) => {
      if (done) return;
      done = true;
      reject(err);
    });
  });
}
