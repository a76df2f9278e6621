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
 * Every request needs `Authorization: Bearer <operator token>`; without it the answer is 401
 * `{"error": "unauthorized"}` with a `WWW-Authenticate` challenge (realm `bosun-operator`). The
 * token is a secret: it is compared in constant time and never logged or echoed. The HTTP
 * plumbing (auth, body limit, routing, listen and close) is the toolkit of `libs/transport`.
 */
import { ConfigError, type Logger } from '@bosun/config';
import { DecisionError, parseDecision, sleep } from '@bosun/contract';
import {
  ApprovalError,
  BearerAuth,
  CANCEL_BY_MAX,
  CANCEL_REASON_MAX,
  HttpError,
  HttpServer,
  RUN_STATES,
  RunControlError,
  Router,
  approvalResolvedEvent,
  readBody,
  sendJson,
  type Approval,
  type ApprovalStore,
  type Decision,
  type EventSink,
  type RouteContext,
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
/** The realm of the operator API's `WWW-Authenticate` challenge. */
const OPERATOR_REALM = 'bosun-operator';

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

/** The operator API's answers, one method a route. */
class OperatorRoutes {
  constructor(private readonly options: OperatorApiOptions) {}

  /** The routes: approvals always, runs when there is run control. */
  router(): Router {
    const router = new Router()
      .on('GET', '/approvals', (c) => this.listApprovals(c))
      .on('GET', '/approvals/:id', (c) => this.showApproval(c))
      .on('POST', '/approvals/:id', (c) => this.decide(c));
    const { runs } = this.options;
    if (runs)
      router
        .on('GET', '/runs', (c) => this.listRuns(runs, c))
        .on('GET', '/runs/:runId', (c) => this.showRun(runs, c))
        .on('POST', '/runs/:runId/cancel', (c) => this.cancel(runs, c));
    return router;
  }

  private get maxBody(): number {
    return this.options.maxBodyBytes ?? DEFAULT_MAX_BODY;
  }

  private async listApprovals({ res }: RouteContext): Promise<void> {
    sendJson(res, 200, await this.options.approvals.pending());
  }

  private async showApproval({ req, res, params }: RouteContext): Promise<void> {
    req.resume();
    const id = params.id!;
    const a = await this.options.approvals.get(id);
    return a ? sendJson(res, 200, a) : sendJson(res, 404, { error: `no approval ${id}` });
  }

  private async decide({ req, res, params }: RouteContext): Promise<void> {
    const { approvals, events, log } = this.options;
    const id = params.id!;
    const decision = parseDecisionBody(await readBody(req, this.maxBody));
    let decided: Approval;
    try {
      decided = await approvals.decide(id, decision);
    } catch (err) {
      if (!(err instanceof ApprovalError)) throw err;
      const status = err.code === 'not_found' ? 404 : err.code === 'already_decided' ? 409 : 400;
      if (err.code === 'already_decided') log.info({ approvalId: id, by: decision.by }, 'approval decision refused: already decided');
      return sendJson(res, status, { error: err.message, code: err.code });
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
    await Promise.race([events.flush(), sleep(FLUSH_WAIT_MS, undefined, { unref: true })]);
    sendJson(res, 200, decided);
  }

  private async listRuns(runs: RunControl, { req, res, query }: RouteContext): Promise<void> {
    req.resume();
    sendJson(res, 200, await runs.list(parseRunsQuery(query)));
  }

  private async showRun(runs: RunControl, { req, res, params }: RouteContext): Promise<void> {
    req.resume();
    const runId = params.runId!;
    const run = await runs.get(runId);
    return run ? sendJson(res, 200, run) : sendJson(res, 404, { error: `no run ${runId}` });
  }

  private async cancel(runs: RunControl, { req, res, params }: RouteContext): Promise<void> {
    const runId = params.runId!;
    const request = parseCancelBody(await readBody(req, this.maxBody));
    try {
      const outcome = await runs.cancel(runId, request);
      this.options.log.info(
        { runId, incidentId: outcome.incidentId, by: outcome.cancelled.by, already: outcome.already, state: outcome.state },
        'run cancelled over HTTP',
      );
      return sendJson(res, outcome.state === 'cancelled' ? 200 : 202, outcome);
    } catch (err) {
      if (!(err instanceof RunControlError)) throw err;
      const status = err.code === 'not_found' ? 404 : err.code === 'finished' ? 409 : 400;
      return sendJson(res, status, { error: err.message, code: err.code });
    }
  }
}

/**
 * Starts the operator API; resolves once it listens.
 *
 * @throws ConfigError when the token is empty; ListenError when `host:port` cannot be listened on.
 */
export async function startOperatorApi(options: OperatorApiOptions): Promise<OperatorApi> {
  const host = options.host ?? '127.0.0.1';
  if (options.token.length === 0) throw new ConfigError('operator API: the operator token is empty');
  const auth = new BearerAuth({ token: options.token, realm: OPERATOR_REALM });
  const router = new OperatorRoutes(options).router();
  const server = await HttpServer.listen({
    name: 'operator API',
    host,
    port: options.port,
    log: options.log,
    timeouts: { requestMs: 30_000, headersMs: 15_000, keepAliveMs: 5_000 },
    handle: (req, res) => (auth.admit(req, res, { error: 'unauthorized' }) ? router.handle(req, res) : undefined),
  });
  return { port: server.port, host, close: () => server.close() };
}
