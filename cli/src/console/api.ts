/**
 * The console's JSON API: the same shared code as the CLI's commands — `RunControl` (runs),
 * `ApprovalStore` (decide), `dead-letters.ts` (list, retry, drop, as `bosun dlq`), `run-view.ts`
 * (`bosun runs show`) — answered as JSON. Every route here is behind the session (and every POST
 * behind its CSRF token), see `server.ts`.
 */
import type { Job } from 'bullmq';
import { DeadLetterKind, RunResult, parseDecision, DecisionError, errorMessage, sleep } from '@bosun/contract';
import {
  ApprovalError,
  ApprovalReader,
  HttpError,
  RUN_STATES,
  approvalResolvedEvent,
  readBody,
  sendJson,
  type ApprovalStore,
  type EventSink,
  type RouteContext,
  type RunControl,
  type RunState,
  type Identity,
} from '@bosun/transport';
import { dropDeadLetter, listDeadLetters, retryDeadLetter } from '../dead-letters.js';
import { readStats } from '../commands/stats.js';
import { OPERATOR_HTTP_STATUS, OperatorError, type OperatorDeps } from '../operator.js';
import { showRun } from '../run-view.js';
import { ackToolCall } from '../tool-calls.js';
import { runStats } from './stats.js';

/** What the API works with. */
export interface ConsoleDeps extends OperatorDeps {
  runs: RunControl;
  approvals: ApprovalStore;
  /** Where `approval.resolved` is published after a decision. */
  events: EventSink;
}

const MAX_BODY = 64 * 1024;
const FLUSH_WAIT_MS = 2_000;

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text === '' ? '{}' : text) as unknown;
  } catch {
    throw new HttpError(400, 'body: not valid JSON');
  }
}

/** An {@link OperatorError} as an answer, its status from its reason (`OPERATOR_HTTP_STATUS`). */
function operatorAnswer(err: unknown): HttpError {
  if (!(err instanceof OperatorError)) throw err;
  return new HttpError(OPERATOR_HTTP_STATUS[err.reason], err.message, { cause: err });
}

/** The incident job's summary fields and result, as the run page shows them. */
function jobDetail(job: Job | null): { incident?: unknown; result?: RunResult } {
  if (!job) return {};
  const data = job.data as Record<string, unknown>;
  const incident = { id: data.id, source: data.source, reason: data.reason, summary: data.summary };
  const parsed = RunResult.safeParse(job.returnvalue);
  return { incident, ...(parsed.success ? { result: parsed.data } : {}) };
}

export class ConsoleApi {
  /** Reads approvals with the run's other specialists and their viewers, and records who reads one. */
  private readonly reader: ApprovalReader;

  constructor(private readonly deps: ConsoleDeps) {
    this.reader = new ApprovalReader(deps);
  }

  async listRuns({ res, query }: RouteContext): Promise<void> {
    const status = query.get('status') ?? '';
    if (status !== '' && !(RUN_STATES as readonly string[]).includes(status))
      throw new HttpError(400, `status: must be one of ${RUN_STATES.join(', ')}`);
    const runs = await this.deps.runs.list({ limit: 200, ...(status ? { state: status as RunState } : {}) });
    sendJson(res, 200, runs);
  }

  async showRun({ res, params }: RouteContext): Promise<void> {
    const runId = params.runId!;
    const summary = await this.deps.runs.get(runId);
    if (!summary) throw new HttpError(404, `no run ${runId}`);
    const job = await this.deps.runs.findJob(runId);
    const view = await showRun(this.deps, runId).catch((err: unknown) => ({ problems: [errorMessage(err)] }));
    // Each decision of the run, with its person, path and time, as the run page shows them.
    const approvals = await this.reader.views(await this.deps.approvals.ofRun(runId));
    sendJson(res, 200, { summary, ...jobDetail(job), view, approvals });
  }

  async listApprovals({ res }: RouteContext): Promise<void> {
    sendJson(res, 200, await this.reader.views(await this.deps.approvals.pending()));
  }

  /**
   * One approval (its console page), recording the session's person as a viewer when the
   * session names one (single sign-on or a person's token; the shared token names nobody).
   */
  async showApproval({ req, res, params }: RouteContext, who: Identity): Promise<void> {
    req.resume();
    const id = params.id!;
    const a = await this.deps.approvals.get(id);
    if (!a) throw new HttpError(404, `no approval ${id}`);
    sendJson(res, 200, await this.reader.view(a, who.actor.verified ? who.actor : undefined));
  }

  /** Decides an approval as the session's person (`who`); a typed `by` renames only an unverified one. */
  async decide({ req, res, params }: RouteContext, who: Identity): Promise<void> {
    const id = params.id!;
    let decision;
    try {
      decision = parseDecision(parseJson(await readBody(req, MAX_BODY)), { defaultBy: who.actor.name, actor: who.actor });
    } catch (err) {
      if (err instanceof DecisionError) throw new HttpError(400, err.message);
      throw err;
    }
    try {
      const decided = await this.deps.approvals.decide(id, decision);
      // A vote that leaves the rule short ("1 of 2") decides nothing yet: no event.
      if (decided.status === 'pending') return sendJson(res, 200, await this.reader.view(decided));
      this.deps.events.emit(approvalResolvedEvent(decided));
      await Promise.race([this.deps.events.flush(), sleep(FLUSH_WAIT_MS, undefined, { unref: true })]);
      sendJson(res, 200, await this.reader.view(decided));
    } catch (err) {
      if (!(err instanceof ApprovalError)) throw err;
      const status = { not_found: 404, already_decided: 409, bad_request: 400, forbidden: 403 }[err.code];
      throw new HttpError(status, err.message);
    }
  }

  async listDeadLetters({ res, query }: RouteContext): Promise<void> {
    const kind = query.get('kind') ?? '';
    if (kind !== '' && !DeadLetterKind.safeParse(kind).success)
      throw new HttpError(400, `kind: must be one of ${DeadLetterKind.options.join(', ')}`);
    const { entries, problems } = await listDeadLetters(this.deps, kind ? { kind } : {});
    sendJson(res, 200, { entries, problems });
  }

  async retryDeadLetter({ req, res, params }: RouteContext): Promise<void> {
    req.resume();
    try {
      sendJson(res, 200, await retryDeadLetter(this.deps, params.id!));
    } catch (err) {
      throw operatorAnswer(err);
    }
  }

  /** `bosun ack <key> --done|--retry|--skip` for an in-doubt tool call. */
  async ack({ req, res, params }: RouteContext, who: Identity): Promise<void> {
    const body = parseJson(await readBody(req, MAX_BODY)) as { action?: unknown };
    const action = body.action;
    if (action !== 'done' && action !== 'retry' && action !== 'skip') throw new HttpError(400, 'action: must be one of done, retry, skip');
    try {
      sendJson(res, 200, await ackToolCall(this.deps, params.key!, action, { by: who.actor.name }));
    } catch (err) {
      throw operatorAnswer(err);
    }
  }

  /** Runs per minute, p50/p99 durations (of the latest runs) and the degraded-result counters of `bosun stats`. */
  async stats({ res }: RouteContext): Promise<void> {
    const [runs, counters] = await Promise.all([this.deps.runs.list({ limit: 1000 }), readStats(this.deps)]);
    sendJson(res, 200, { ...runStats(runs, Date.now()), ...counters });
  }

  async dropDeadLetter({ req, res, params }: RouteContext): Promise<void> {
    req.resume();
    try {
      await dropDeadLetter(this.deps, params.id!);
      sendJson(res, 200, { dropped: params.id });
    } catch (err) {
      throw operatorAnswer(err);
    }
  }
}
