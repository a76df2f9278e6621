/**
 * The operators' HTTP API on the coordinator: approvals of tool calls, and run control.
 *
 *   GET  /approvals        the pending approvals, oldest first (JSON array); each as its
 *                          `approvalView`: with `progress` ("1 of 2") and `decisions` (person,
 *                          path, time), beside the incident, the run so far (`steps`) and the calls
 *   GET  /approvals/<id>   one approval, as above (404 when there is none)
 *   POST /approvals/<id>   decide it: `{ "decision": "approve" | "deny", "only"?: number[],
 *                          "reason"?: string, "by"?: string }` → 200 with the decided approval;
 *                          400 bad body (naming the field), 403 not this person's to approve
 *                          (a role missing, the requester, an unverified vote under a rule of
 *                          several people), 404 unknown, 409 already decided. Under a rule of
 *                          several people a vote that leaves it short answers 200 with the
 *                          approval still `pending` and its `votes` ("1 of 2")
 *   GET  /runs             runs, newest first: `?status=<state>&limit=<n>` (JSON array)
 *   GET  /runs/<runId>     one run (404 when there is none)
 *   POST /runs/<runId>/cancel  cancel it: `{ "reason"?: string, "by"?: string }` → 202 (it ends
 *                          shortly), 200 when it had already ended cancelled; 400 bad body,
 *                          404 unknown run, 409 already finished
 *
 * Every request needs `Authorization: Bearer <token>`: a person's token from the config's
 * `operators` (the decision records them, verified; each route needs a role: `read` for GETs,
 * `approve` to decide, `cancel` to cancel — else 403 `{"error", "code": "forbidden"}`), or the
 * shared operator token (recorded unverified, under the `by` given, holding every role). Without
 * one the answer is 401 `{"error": "unauthorized"}` with a `WWW-Authenticate` challenge (realm
 * `bosun-operator`). Tokens are secrets: compared in constant time, never logged or echoed. The HTTP
 * plumbing (auth, body limit, routing, listen and close) is the toolkit of `libs/transport`.
 */
import type { IncomingMessage } from 'node:http';
import { ConfigError, type Logger, type OperatorEntry } from '@bosun/config';
import { DecisionError, parseDecision, sleep, type Actor, type Role } from '@bosun/contract';
import {
  ApprovalError,
  ForbiddenError,
  OperatorDirectory,
  bearerChallenge,
  bearerToken,
  requireRole,
  type Identity,
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
  type ApprovalReader,
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
  /** The shared operator token (already `${ENV}`-substituted). Never logged. */
  token: string;
  /** The config's `operators`: people with their own tokens and roles; default none. */
  operators?: readonly OperatorEntry[];
  approvals: ApprovalStore;
  /** Reads each approval answered with its run's other specialists and its viewers, and records who reads one. */
  reader: ApprovalReader;
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

/** The HTTP status of each refusal of a decision. */
const APPROVAL_STATUS = { not_found: 404, already_decided: 409, bad_request: 400, forbidden: 403 } as const;

/** The name a shared-token caller gets when the body gives no `by`. */
const SHARED_NAME = 'http-operator';

/**
 * Checks a decision body with the contract's `parseDecision`; a 400 names the field at fault.
 * With `actor`, the decision is that actor's (see `ParseDecisionOptions.actor`).
 */
export function parseDecisionBody(text: string, defaultBy = SHARED_NAME, actor?: Actor): Decision {
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
    return parseDecision(body, { defaultBy, ...(actor ? { actor } : {}) });
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
  /** The identity of each admitted request. */
  private readonly callers = new WeakMap<IncomingMessage, Identity>();

  constructor(private readonly options: OperatorApiOptions) {}

  /** Admits a request with its identity; the route runs once the caller holds `role`. */
  admitted(req: IncomingMessage, identity: Identity): void {
    this.callers.set(req, identity);
  }

  /** The caller of `req`, checked for `role` (a {@link ForbiddenError} otherwise). */
  private caller(req: IncomingMessage, role: Role, what: string): Identity {
    const identity = this.callers.get(req);
    if (!identity) throw new Error('operator API: a request reached a route without an identity');
    requireRole(identity, role, what);
    return identity;
  }

  /** A route that needs `role`: a 403 names the role when the caller lacks it. */
  private guarded(role: Role, what: string, fn: (c: RouteContext, who: Identity) => Promise<void>) {
    return async (c: RouteContext): Promise<void> => {
      let who: Identity;
      try {
        who = this.caller(c.req, role, what);
      } catch (err) {
        if (!(err instanceof ForbiddenError)) throw err;
        c.req.resume();
        this.options.log.info(
          { path: c.path, role, by: this.callers.get(c.req)?.actor.name },
          'operator API request refused: role missing',
        );
        return sendJson(c.res, 403, { error: err.message, code: err.code });
      }
      return fn(c, who);
    };
  }

  /** The routes: approvals always, runs when there is run control. */
  router(): Router {
    const router = new Router()
      .on(
        'GET',
        '/approvals',
        this.guarded('read', 'reading approvals', (c) => this.listApprovals(c)),
      )
      .on(
        'GET',
        '/approvals/:id',
        this.guarded('read', 'reading approvals', (c, who) => this.showApproval(c, who)),
      )
      .on(
        'POST',
        '/approvals/:id',
        this.guarded('approve', 'deciding an approval', (c, who) => this.decide(c, who)),
      );
    const { runs } = this.options;
    if (runs)
      router
        .on(
          'GET',
          '/runs',
          this.guarded('read', 'reading runs', (c) => this.listRuns(runs, c)),
        )
        .on(
          'GET',
          '/runs/:runId',
          this.guarded('read', 'reading runs', (c) => this.showRun(runs, c)),
        )
        .on(
          'POST',
          '/runs/:runId/cancel',
          this.guarded('cancel', 'cancelling a run', (c, who) => this.cancel(runs, c, who)),
        );
    return router;
  }

  private get maxBody(): number {
    return this.options.maxBodyBytes ?? DEFAULT_MAX_BODY;
  }

  private async listApprovals({ res }: RouteContext): Promise<void> {
    // A list records no viewer: listing is not looking at one approval.
    sendJson(res, 200, await this.options.reader.views(await this.options.approvals.pending()));
  }

  private async showApproval({ req, res, params }: RouteContext, who: Identity): Promise<void> {
    req.resume();
    const id = params.id!;
    const a = await this.options.approvals.get(id);
    if (!a) return sendJson(res, 404, { error: `no approval ${id}` });
    // Only a person the token identified is recorded: the shared token names nobody in particular.
    sendJson(res, 200, await this.options.reader.view(a, who.actor.verified ? who.actor : undefined));
  }

  private async decide({ req, res, params }: RouteContext, who: Identity): Promise<void> {
    const { approvals, events, log } = this.options;
    const id = params.id!;
    const decision = parseDecisionBody(await readBody(req, this.maxBody), SHARED_NAME, who.actor);
    let decided: Approval;
    try {
      decided = await approvals.decide(id, decision);
    } catch (err) {
      if (!(err instanceof ApprovalError)) throw err;
      const status = APPROVAL_STATUS[err.code];
      if (err.code === 'already_decided') log.info({ approvalId: id, by: decision.by }, 'approval decision refused: already decided');
      return sendJson(res, status, { error: err.message, code: err.code });
    }
    log.info(
      {
        approvalId: id,
        decision: decision.approve ? 'approve' : 'deny',
        by: decided.decidedBy,
        verified: who.actor.verified,
        approved: decided.approved,
        runId: decided.runId,
        agent: decided.agent,
      },
      decided.status === 'pending' ? 'approval vote recorded over HTTP' : 'approval decided over HTTP',
    );
    // A vote that leaves the rule short ("1 of 2") decides nothing yet: no event.
    if (decided.status === 'pending') return sendJson(res, 200, await this.options.reader.view(decided));
    events.emit(approvalResolvedEvent(decided));
    // The decision stands whatever happens to the event; do not hold the operator for long.
    await Promise.race([events.flush(), sleep(FLUSH_WAIT_MS, undefined, { unref: true })]);
    sendJson(res, 200, await this.options.reader.view(decided));
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

  private async cancel(runs: RunControl, { req, res, params }: RouteContext, who: Identity): Promise<void> {
    const runId = params.runId!;
    const parsed = parseCancelBody(await readBody(req, this.maxBody), who.actor.name);
    // A verified caller cancels under their own name, whatever `by` says.
    const request = who.actor.verified ? { ...parsed, by: who.actor.name } : parsed;
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
  const directory = new OperatorDirectory({ operators: options.operators ?? [], shared: { token: options.token, name: SHARED_NAME } });
  const routes = new OperatorRoutes(options);
  const router = routes.router();
  const server = await HttpServer.listen({
    name: 'operator API',
    host,
    port: options.port,
    log: options.log,
    timeouts: { requestMs: 30_000, headersMs: 15_000, keepAliveMs: 5_000 },
    handle: (req, res) => {
      const bearer = bearerToken(req.headers.authorization);
      const identity = 'token' in bearer ? directory.resolve(bearer.token, 'http', req.socket.remoteAddress) : null;
      if (!identity) {
        req.resume();
        const check = 'problem' in bearer ? bearer.problem : 'invalid';
        return sendJson(res, 401, { error: 'unauthorized' }, { 'www-authenticate': bearerChallenge(OPERATOR_REALM, check) });
      }
      routes.admitted(req, identity);
      return router.handle(req, res);
    },
  });
  return { port: server.port, host, close: () => server.close() };
}
