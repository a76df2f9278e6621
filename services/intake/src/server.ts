/**
 * The intake's HTTP server: `POST /alerts/<source>` for each configured source, and
 * `POST /slack/interactions` when a Slack app sink is configured (answers in slack-interactions.ts).
 *
 *   202 {"accepted": [{incidentId, runId, duplicate, delayedMs?}], "joined": [{incidentId, alerts}], "resolved": [resolution]}
 *       queued (a repeat is `duplicate`; past the rate limit `delayedMs`), joined to a group's incident, resolutions recorded
 *   400 {"error": reason}   not the source's format, not JSON, or not a valid incident (the body is a `poison` dead letter)
 *   401 {"error": reason}   missing or wrong bearer token or signature
 *   404                     no such source
 *   413 {"error": reason}   body past the source's `maxBodyBytes` (its first bytes are a `poison` dead letter)
 *   415 {"error": reason}   a declared `content-type` that is not JSON (the body is a `poison` dead letter)
 *   503 {"error": reason}   Redis did not take it: nothing was queued, the sender should retry
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { IntakeSource, Logger, ResolvedIntakeConfig } from '@bosun/config';
import { Incident, InvalidInputError, describeIssues, parseWith, type IncidentInput, errorMessage } from '@bosun/contract';
import { HttpServer, Router, sendJson, type DeadLetters, type RouteContext } from '@bosun/transport';
import { AlertmanagerPayload, alertmanagerBatch } from './alertmanager.js';
import { SourceAuth } from './auth.js';
import { readBounded } from './body.js';
import { MappingError, genericBatch } from './generic.js';
import type { IntakeBatch } from './mapping.js';
import { RedisUnavailableError, type IntakeQueue } from './queue.js';
import { IntakeFlow } from './flow.js';
import { withRunbook, type LoadedRunbook } from './runbooks.js';
import { SLACK_INTERACTIONS_PATH, type SlackInteractions } from './slack-interactions.js';

/** What the intake's server needs. */
export interface IntakeServerOptions {
  config: ResolvedIntakeConfig;
  queue: IntakeQueue;
  deadLetters: Pick<DeadLetters, 'add'>;
  log: Logger;
  /** The runbooks, read at start-up (`loadRunbooks`). */
  runbooks?: readonly LoadedRunbook[];
  /** The Slack app sinks' buttons, served at `POST /slack/interactions`; absent: no such route. */
  slack?: Pick<SlackInteractions, 'handle'>;
}

/** A webhook Bosun cannot take: answered with `status` and `reason`, its body kept as poison. */
class Rejected {
  constructor(
    readonly status: 400 | 413 | 415,
    readonly reason: string,
    readonly input: unknown,
  ) {}
}

const REALM = 'bosun-intake';

/**
 * Whether a request's `content-type` says JSON: `application/json` or `application/<x>+json`
 * (any parameters), or no `content-type` at all (RFC 9110 lets the recipient look at the data;
 * it is parsed as JSON). Anything else (`text/plain`, a form) is a 415: a sender that declares
 * another type is misconfigured, and guessing would hide it.
 */
export function declaresJson(contentType: string | undefined): boolean {
  if (contentType === undefined) return true;
  const type = (contentType.split(';')[0] ?? '').trim().toLowerCase();
  return type === 'application/json' || /^application\/[a-z0-9!#$&^_.-]+\+json$/.test(type);
}

/** The incidents and resolutions of a parsed body, per the source's format (a {@link Rejected} when it is not that format). */
function batchOf(name: string, source: IntakeSource, body: unknown): IntakeBatch | Rejected {
  if (source.format === 'alertmanager') {
    const parsed = AlertmanagerPayload.safeParse(body);
    if (!parsed.success)
      return new Rejected(400, `not an Alertmanager webhook (version 4): ${describeIssues(parsed.error).issues.join('; ')}`, body);
    return alertmanagerBatch(name, source, parsed.data);
  }
  try {
    return genericBatch(name, source, body);
  } catch (err) {
    if (err instanceof MappingError) return new Rejected(400, err.message, body);
    throw err;
  }
}

/** Checks every incident against the envelope; the first that fails rejects the whole webhook. */
function checkIncidents(batch: IntakeBatch, body: unknown): IncidentInput[] | Rejected {
  try {
    return batch.incidents.map((i) => parseWith(Incident, i, `incident ${i.id}`) as IncidentInput);
  } catch (err) {
    if (err instanceof InvalidInputError) return new Rejected(400, err.message, body);
    throw err;
  }
}

class IntakeRoutes {
  private readonly auths = new Map<string, SourceAuth>();

  constructor(private readonly options: IntakeServerOptions) {
    for (const [name, source] of Object.entries(options.config.sources)) this.auths.set(name, new SourceAuth(source.auth, REALM));
  }

  router(): Router {
    const router = new Router().on('POST', '/alerts/:source', (c) => this.receive(c));
    const slack = this.options.slack;
    if (slack) router.on('POST', SLACK_INTERACTIONS_PATH, ({ req, res }) => slack.handle(req, res));
    return router;
  }

  private async receive({ req, res, params }: RouteContext): Promise<void> {
    const name = params.source!;
    const source = Object.hasOwn(this.options.config.sources, name) ? this.options.config.sources[name] : undefined;
    const auth = this.auths.get(name);
    if (!source || !auth) {
      req.resume();
      return sendJson(res, 404, { error: `no source ${name}` });
    }
    const headerCheck = auth.checkHeaders(req.headers);
    if (!headerCheck.ok) return this.unauthorized(req, res, headerCheck);
    const body = await readBounded(req, source.maxBodyBytes);
    if (body.tooLarge) {
      const input = { source: name, contentLength: body.declared, bodyStart: body.start };
      return this.reject(res, name, new Rejected(413, `request body larger than ${source.maxBodyBytes} bytes`, input), {
        connection: 'close',
      });
    }
    const bodyCheck = auth.checkBody(req.headers, body.text);
    if (!bodyCheck.ok) return this.unauthorized(req, res, bodyCheck);
    const contentType = req.headers['content-type'];
    if (!declaresJson(contentType)) {
      const why = `content-type ${JSON.stringify((contentType ?? '').slice(0, 100))} is not JSON: send application/json`;
      return this.reject(res, name, new Rejected(415, why, body.text), { accept: 'application/json' });
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.text) as unknown;
    } catch (err) {
      return this.reject(res, name, new Rejected(400, `body: not valid JSON (${errorMessage(err)})`, body.text));
    }
    const batch = batchOf(name, source, parsed);
    if (batch instanceof Rejected) return this.reject(res, name, batch);
    const incidents = checkIncidents(
      { ...batch, incidents: batch.incidents.map((i) => withRunbook(this.options.runbooks ?? [], i)) },
      parsed,
    );
    if (incidents instanceof Rejected) return this.reject(res, name, incidents);
    await this.queue(res, name, source, { incidents, resolved: batch.resolved });
  }

  private unauthorized(req: IncomingMessage, res: ServerResponse, outcome: { reason: string; challenge?: string }): void {
    req.resume();
    sendJson(res, 401, { error: `unauthorized: ${outcome.reason}` }, outcome.challenge ? { 'www-authenticate': outcome.challenge } : {});
  }

  /** Queues the incidents and records the resolutions: 202 once all are stored, 503 when Redis did not take them. */
  private async queue(res: ServerResponse, name: string, source: IntakeSource, batch: IntakeBatch): Promise<void> {
    const { queue, log } = this.options;
    try {
      const { accepted, joined } = await new IntakeFlow(queue).take(name, source, batch);
      const resolved = [];
      for (const r of batch.resolved) resolved.push(await queue.resolve({ ...r, source: name, cancel: source.onResolved === 'cancel' }));
      log.info(
        { source: name, accepted, joined, resolved: resolved.map((r) => ({ incidentId: r.incidentId, run: r.run })) },
        'webhook taken',
      );
      sendJson(res, 202, { accepted, joined, resolved });
    } catch (err) {
      if (!(err instanceof RedisUnavailableError)) throw err;
      log.warn({ source: name, err }, 'webhook not taken: Redis unavailable');
      sendJson(res, 503, { error: err.message }, { 'retry-after': '5' });
    }
  }

  /** Keeps the body as a `poison` dead letter and answers the rejection (503 when even the dead letter cannot be written). */
  private async reject(res: ServerResponse, name: string, rejected: Rejected, headers: Record<string, string> = {}): Promise<void> {
    const { deadLetters, log, queue } = this.options;
    try {
      await queue.within('the dead letter', () =>
        deadLetters.add({ kind: 'poison', reason: `intake/${name}: ${rejected.reason}`, input: rejected.input }),
      );
    } catch (err) {
      log.error({ source: name, err }, 'webhook rejected, and its dead letter could not be written');
      return sendJson(
        res,
        503,
        { error: `${rejected.reason}; and the body could not be kept (Redis unavailable)` },
        { 'retry-after': '5', ...headers },
      );
    }
    log.warn({ source: name, status: rejected.status, reason: rejected.reason }, 'webhook rejected as poison');
    sendJson(res, rejected.status, { error: rejected.reason }, headers);
  }
}

/** A running intake server. */
export interface IntakeServer {
  port: number;
  host: string;
  close(): Promise<void>;
}

/** Starts the intake's HTTP server; resolves once it listens (a ListenError names `host:port`). */
export async function startIntakeServer(options: IntakeServerOptions): Promise<IntakeServer> {
  const router = new IntakeRoutes(options).router();
  const { host, port } = options.config;
  const server = await HttpServer.listen({
    name: 'intake',
    host,
    port,
    log: options.log,
    timeouts: { requestMs: 30_000, headersMs: 15_000, keepAliveMs: 5_000 },
    handle: (req, res) => router.handle(req, res),
  });
  return { port: server.port, host, close: () => server.close() };
}
