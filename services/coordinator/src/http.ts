/**
 * The operators' HTTP API on the coordinator: approvals of tool calls, and run control.
 *
 *   GET  /approvals        the pending approvals, oldest first (JSON array)
 *   GET  /approvals/<id>   one approval (404 when there is none)
 *   POST /approvals/<id>   decide it: `{ "decision": "approve" | "deny", "only"?: number[],
 *                          "reason"?: string, "by"?: string }` → 200 with the decided approval;
 *                          400 bad body (naming the field), 404 unknown, 409 already decided
 *   GET  /runs             runs, newest first: `?status=<state>&limit=<n>` (JSON array)
 *   GET  /runs/<runId>     one run (404 when there is none)
 *   POST /runs/<runId>/cancel  cancel it: `{ "reason"?: string, "by"?: string }` → 202 (it ends
 *                          shortly), 200 when it had already ended cancelled; 400 bad body,
 *                          404 unknown run, 409 already finished
 *
 * Every request needs `Authorization: Bearer <operator token>`; without it the answer is a bare
 * 401. The token is a secret: it is compared in constant time and never logged or echoed.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DecisionError, parseDecision } from '@bosun/contract';
import type { Logger } from '@bosun/config';
import {
  ApprovalError,
  CANCEL_BY_MAX,
  CANCEL_REASON_MAX,
  RUN_STATES,
  RunControlError,
  approvalResolvedEvent,
  type Approval,
  type ApprovalStore,
  type Decision,
  type EventSink,
  type RunControl,
  type RunState,
} from '@bosun/transport';

/** Options of {@link startOperatorApi}. */
export interface OperatorApiOptions {
  /** 0 picks a free port (see {@link OperatorApi.port}). */
  port: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** The operator token (already `${ENV}`-substituted). Never logged. */
  token: string;
  approvals: ApprovalStore;
  /** Run control (`/runs`); without it those paths answer 404. */
  runs?: RunControl;
  /** Where `approval.resolved` is published. */
  events: EventSink;
  log: Logger;
  /** Largest request body accepted; default 64 KiB (past it: 413). */
  maxBodyBytes?: number;
}

/** A running operator API. */
export interface OperatorApi {
  /** The port it listens on (the actual one when started with port 0). */
  port: number;
  host: string;
  close(): Promise<void>;
}

const DEFAULT_MAX_BODY = 64 * 1024;
const BY_MAX = CANCEL_BY_MAX;
const REASON_MAX = CANCEL_REASON_MAX;
/** The reason of a cancellation that gives none. */
export const NO_REASON_GIVEN = 'no reason given';
const FLUSH_WAIT_MS = 2_000;

class HttpError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}

/**
 * True when the request carries `Authorization: Bearer <token>`. Both sides are hashed first, so
 * `timingSafeEqual` compares buffers of equal length and the token's length does not leak either.
 */
function authorized(req: IncomingMessage, expected: Buffer): boolean {
  const header = req.headers.authorization;
  if (typeof header !== 'string') return false;
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  const presented = digest(m?.[1] ?? '');
  // Compare even when the header is malformed, so every refusal costs the same.
  return timingSafeEqual(presented, expected) && m !== null;
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = `${JSON.stringify(body)}\n`;
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(text)),
    'cache-control': 'no-store',
    ...headers,
  });
  res.end(text);
}

/** Reads the body, at most `max` bytes (413 past it). */
function readBody(req: IncomingMessage, max: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > max) return reject(new HttpError(413, `request body larger than ${max} bytes`));
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    req.on('data', (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      if (size > max) {
        done = true;
        req.pause();
        return reject(new HttpError(413, `request body larger than ${max} bytes`));
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

/** Checks a decision body with the contract's `parseDecision`; a 400 names the field at fault. */
export function parseDecisionBody(text: string, defaultBy = 'http-operator'): Decision {
  let body: unknown;
  try {
    body = JSON.parse(text) as unknown;
  } catch {
    throw new HttpError(
      400,
      'body: not valid JSON (expected {"decision": "approve" | "deny", "only"?: number[], "reason"?: string, "by"?: string})',
    );
  }
  try {
    return parseDecision(body, { defaultBy });
  } catch (err) {
    if (err instanceof DecisionError) throw new HttpError(400, err.message);
    throw err;
  }
}

/** Checks a cancel body (`{ "reason"?: string, "by"?: string }`, or none); a 400 names the field at fault. */
export function parseCancelBody(text: string, defaultBy = 'http-operator'): { by: string; reason: string } {
  if (text.trim() === '') return { by: defaultBy, reason: NO_REASON_GIVEN };
  let body: unknown;
  try {
    body = JSON.parse(text) as unknown;
  } catch {
    throw new HttpError(400, 'body: not valid JSON (expected {"reason"?: string, "by"?: string})');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new HttpError(400, 'body: must be a JSON object');
  const b = body as Record<string, unknown>;
  const unknown = Object.keys(b).filter((k) => k !== 'reason' && k !== 'by');
  if (unknown.length > 0) throw new HttpError(400, `${unknown[0]}: unknown field (known: reason, by)`);
  if (b.by !== undefined && (typeof b.by !== 'string' || b.by.trim() === '' || b.by.length > BY_MAX)) {
    throw new HttpError(400, `by: must be a non-empty string of at most ${BY_MAX} characters`);
  }
  if (b.reason !== undefined && (typeof b.reason !== 'string' || b.reason.trim() === '' || b.reason.length > REASON_MAX)) {
    throw new HttpError(400, `reason: must be a non-empty string of at most ${REASON_MAX} characters`);
  }
  return {
    by: typeof b.by === 'string' ? b.by.trim() : defaultBy,
    reason: typeof b.reason === 'string' ? b.reason.trim() : NO_REASON_GIVEN,
  };
}

/** Checks `?status=&limit=` of `GET /runs`; a 400 names the parameter at fault. */
export function parseRunsQuery(search: URLSearchParams): { state?: RunState; limit: number } {
  const status = search.get('status');
  const limitText = search.get('limit') ?? '50';
  if (status !== null && !(RUN_STATES as readonly string[]).includes(status))
    throw new HttpError(400, `status: must be one of ${RUN_STATES.join(', ')}`);
  const limit = Number(limitText);
  if (!/^\d+$/.test(limitText) || !Number.isSafeInteger(limit) || limit < 1 || limit > 1000)
    throw new HttpError(400, 'limit: must be an integer from 1 to 1000');
  return { ...(status !== null ? { state: status as RunState } : {}), limit };
}

/** `/runs`, `/runs/<runId>`, `/runs/<runId>/cancel`. */
async function handleRuns(
  req: IncomingMessage,
  res: ServerResponse,
  runs: RunControl,
  parts: string[],
  search: URLSearchParams,
  maxBody: number,
  log: Logger,
): Promise<void> {
  const allow = (methods: string) => {
    req.resume();
    send(res, 405, { error: `method ${req.method ?? '?'} not allowed` }, { allow: methods });
  };
  if (parts.length === 1) {
    if (req.method !== 'GET') return allow('GET');
    req.resume();
    return send(res, 200, await runs.list(parseRunsQuery(search)));
  }
  let runId: string;
  try {
    runId = decodeURIComponent(parts[1]!);
  } catch {
    req.resume();
    return send(res, 404, { error: 'not found' });
  }
  if (parts.length === 2) {
    if (req.method !== 'GET') return allow('GET');
    req.resume();
    const run = await runs.get(runId);
    return run ? send(res, 200, run) : send(res, 404, { error: `no run ${runId}` });
  }
  if (parts.length !== 3 || parts[2] !== 'cancel') {
    req.resume();
    return send(res, 404, { error: 'not found' });
  }
  if (req.method !== 'POST') return allow('POST');
  const request = parseCancelBody(await readBody(req, maxBody));
  try {
    const outcome = await runs.cancel(runId, request);
    log.info(
      { runId, incidentId: outcome.incidentId, by: outcome.cancelled.by, already: outcome.already, state: outcome.state },
      'run cancelled over HTTP',
    );
    return send(res, outcome.state === 'cancelled' ? 200 : 202, outcome);
  } catch (err) {
    if (!(err instanceof RunControlError)) throw err;
    const status = err.code === 'not_found' ? 404 : err.code === 'finished' ? 409 : 400;
    return send(res, status, { error: err.message, code: err.code });
  }
}

/** Starts the operator API; resolves once it listens. */
export async function startOperatorApi(options: OperatorApiOptions): Promise<OperatorApi> {
  const { approvals, events, log } = options;
  const host = options.host ?? '127.0.0.1';
  const maxBody = options.maxBodyBytes ?? DEFAULT_MAX_BODY;
  if (options.token.length === 0) throw new Error('operator API: the operator token is empty');
  const expected = digest(options.token);

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (!authorized(req, expected)) {
      req.resume();
      return send(res, 401, { error: 'unauthorized' }, { 'www-authenticate': 'Bearer' });
    }
    const [path = '/', query = ''] = (req.url ?? '/').split('?');
    const parts = path.split('/').filter((p) => p !== '');
    if (parts[0] === 'runs' && options.runs && parts.length <= 3)
      return handleRuns(req, res, options.runs, parts, new URLSearchParams(query), maxBody, log);
    if (parts[0] !== 'approvals' || parts.length > 2) {
      req.resume();
      return send(res, 404, { error: 'not found' });
    }
    if (parts.length === 1) {
      if (req.method !== 'GET') {
        req.resume();
        return send(res, 405, { error: `method ${req.method ?? '?'} not allowed` }, { allow: 'GET' });
      }
      return send(res, 200, await approvals.pending());
    }
    let id: string;
    try {
      id = decodeURIComponent(parts[1]!);
    } catch {
      req.resume();
      return send(res, 404, { error: 'not found' });
    }
    if (req.method === 'GET') {
      req.resume();
      const a = await approvals.get(id);
      return a ? send(res, 200, a) : send(res, 404, { error: `no approval ${id}` });
    }
    if (req.method !== 'POST') {
      req.resume();
      return send(res, 405, { error: `method ${req.method ?? '?'} not allowed` }, { allow: 'GET, POST' });
    }
    const decision = parseDecisionBody(await readBody(req, maxBody));
    let decided: Approval;
    try {
      decided = await approvals.decide(id, decision);
    } catch (err) {
      if (!(err instanceof ApprovalError)) throw err;
      const status = err.code === 'not_found' ? 404 : err.code === 'already_decided' ? 409 : 400;
      if (err.code === 'already_decided') log.info({ approvalId: id, by: decision.by }, 'approval decision refused: already decided');
      return send(res, status, { error: err.message, code: err.code });
    }
    log.info(
      {
        approvalId: id,
        decision: decision.approve ? 'approve' : 'deny',
        by: decided.decidedBy,
        approved: decided.approved,
        runId: decided.runId,
        agent: decided.agent,
      },
      'approval decided over HTTP',
    );
    events.emit(approvalResolvedEvent(decided));
    // The decision stands whatever happens to the event; do not hold the operator for long.
    await Promise.race([events.flush(), new Promise((r) => setTimeout(r, FLUSH_WAIT_MS).unref())]);
    send(res, 200, decided);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (err instanceof HttpError) {
        // A body past the cap is not read: close the connection after answering.
        send(res, err.status, { error: err.message }, err.status === 413 ? { connection: 'close' } : {});
        return;
      }
      log.error({ err, method: req.method, path: (req.url ?? '').split('?')[0] }, 'operator API request failed');
      if (!res.headersSent) send(res, 500, { error: 'internal error' });
      else res.destroy();
    });
  });
  server.requestTimeout = 30_000;
  server.headersTimeout = 15_000;
  server.keepAliveTimeout = 5_000;

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', (err) => log.error({ err }, 'operator API server error'));
  const port = (server.address() as AddressInfo).port;

  return {
    port,
    host,
    close: () =>
      new Promise<void>((resolve) => {
        const force = setTimeout(() => server.closeAllConnections(), 5_000);
        force.unref();
        server.close(() => {
          clearTimeout(force);
          resolve();
        });
        server.closeIdleConnections();
      }),
  };
}
