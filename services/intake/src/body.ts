import type { IncomingMessage } from 'node:http';

/** What {@link readBounded} read: the whole body, or — past the limit — its first bytes only. */
export type BoundedBody = { tooLarge: false; text: string } | { tooLarge: true; start: string; declared: number | undefined };

/** How much of an oversized body is kept for its dead letter. */
export const OVERSIZED_KEEP_BYTES = 4096;

/**
 * How long an oversized body declared by `content-length` is read for its first
 * {@link OVERSIZED_KEEP_BYTES}: a sender that trickles cannot hold the request longer.
 */
export const OVERSIZED_KEEP_WAIT_MS = 2_000;

/**
 * Reads a request's body as UTF-8, at most `maxBytes`. A body past it — declared so by
 * `content-length`, or found so as it arrives (chunked) — is refused without reading the rest,
 * but its first {@link OVERSIZED_KEEP_BYTES} bytes are still read (within
 * {@link OVERSIZED_KEEP_WAIT_MS}) and returned for the dead letter, so that the poison entry
 * keeps the same start however the sender sent it. The caller answers 413 and closes the
 * connection.
 */
export function readBounded(req: IncomingMessage, maxBytes: number, keepWaitMs: number = OVERSIZED_KEEP_WAIT_MS): Promise<BoundedBody> {
  const declaredHeader = Number(req.headers['content-length']);
  const declared = Number.isFinite(declaredHeader) ? declaredHeader : undefined;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    let timer: NodeJS.Timeout | undefined;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      req.pause();
      resolve({ tooLarge: true, start: Buffer.concat(chunks).subarray(0, OVERSIZED_KEEP_BYTES).toString('utf8'), declared });
    };
    /** The body is too large: keep reading only until its first bytes are in. */
    const refuse = () => {
      if (size >= OVERSIZED_KEEP_BYTES) return finish();
      timer ??= setTimeout(finish, keepWaitMs);
    };
    let refused = declared !== undefined && declared > maxBytes;
    if (refused) refuse();
    req.on('data', (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      if (size <= maxBytes || size - chunk.length < OVERSIZED_KEEP_BYTES) chunks.push(chunk);
      if (size > maxBytes) refused = true;
      if (refused) refuse();
    });
    req.on('end', () => {
      if (refused) return finish();
      if (done) return;
      done = true;
      resolve({ tooLarge: false, text: Buffer.concat(chunks).toString('utf8') });
    });
    req.on('error', (err) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      reject(err);
    });
  });
}
