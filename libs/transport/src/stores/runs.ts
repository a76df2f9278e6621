/**
 * Run control for operators: find a run by its id, list runs, and cancel one. Used by the
 * `bosun` CLI (`bosun runs`, `bosun cancel`) and the coordinator's operator API (`GET /runs`,
 * `POST /runs/<runId>/cancel`), so both answer the same way.
 *
 * A cancellation is a key, `<prefix>:cancel:run:<runId>` (JSON `{ by, reason, at }`, written
 * once), plus a `cancel-run` job on the coordinator's timers queue so that a parked run is ended
 * at once. Specialists read the key before each effect; the coordinator reads it at each step.
 */
import { Job, Queue } from 'bullmq';
import {
  BosunError,
  CANCEL_TTL_SECONDS,
  COORDINATOR_TIMERS_QUEUE,
  INCIDENTS_QUEUE,
  RUN_ID_PATTERN,
  RunCancellation,
  RunCheckpoint,
  runCancelKey,
  runCheckpointKey,
  runIdFor,
  timerJobId,
  type RunStatus,
  type TimerJob,
} from '@bosun/contract';
import type { RedisClient } from '../base/connections.js';

/**
 * The state of a run as `bosun runs` shows it: `waiting` (not started), `active` (a coordinator
 * works on it), `parked` (it waits for its specialists), or, once finished, its result's status
 * (`completed`, `partial`, `failed`, `cancelled`). An incident job that failed (rejected input, an
 * unusable checkpoint) is `failed` too.
 */
export const RUN_STATES = ['waiting', 'active', 'parked', 'completed', 'partial', 'failed', 'cancelled'] as const;
export type RunState = (typeof RUN_STATES)[number];

/** One run, as `bosun runs list` and `GET /runs` give it. */
export interface RunSummary {
  runId: string;
  incidentId: string;
  state: RunState;
  /** When the incident job was created (ISO). */
  createdAt: string;
  /** When it finished (ISO), once it has. */
  finishedAt?: string;
  /** The specialists delegated to (or chosen), when known. */
  specialists: string[];
  /** A cancellation requested while the run has not ended yet. */
  cancelRequested?: RunCancellation;
  /** Why the incident job failed, for a job that failed without a run result. */
  reason?: string;
}

/** Why a run-control request was refused: `not_found` (404), `finished` (409), `bad_request` (400). */
export class RunControlError extends BosunError {
  declare readonly code: 'not_found' | 'finished' | 'bad_request';
  constructor(code: 'not_found' | 'finished' | 'bad_request', message: string) {
    super(code, message);
    this.name = 'RunControlError';
  }
}

/** What {@link RunControl.cancel} did. */
export interface CancelOutcome {
  runId: string;
  incidentId: string;
  /** The cancellation in force: this request's, or an earlier one's (cancelling twice is fine). */
  cancelled: RunCancellation;
  /** True when the run was already cancelled, or being cancelled, before this request. */
  already: boolean;
  /** The run's state when the request was made (`cancelled` when it had already ended so). */
  state: RunState;
}

/** Longest `by` accepted. */
export const CANCEL_BY_MAX = 200;
/** Longest `reason` accepted. */
export const CANCEL_REASON_MAX = 10_000;
/** Jobs read per page while looking through the incidents queue. */
const PAGE = 500;
/** At most this many jobs of one state are looked through to list or find runs. */
const SCAN_MAX = 20_000;

/** The BullMQ states of each run state, in the order they are looked through. */
const JOB_TYPES: Record<RunState, ('waiting' | 'prioritized' | 'delayed' | 'active' | 'waiting-children' | 'completed' | 'failed')[]> = {
  waiting: ['waiting', 'prioritized', 'delayed'],
  active: ['active'],
  parked: ['waiting-children'],
  completed: ['completed'],
  partial: ['completed'],
  cancelled: ['completed'],
  failed: ['failed', 'completed'],
};
const ALL_TYPES = ['waiting', 'prioritized', 'delayed', 'active', 'waiting-children', 'completed', 'failed'] as const;

type Data = Record<string, unknown>;
const isObject = (v: unknown): v is Data => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Reads a run's cancellation. A key that exists but does not parse still cancels the run (the
 * specialists go by its existence): it is reported as cancelled by `unknown`.
 */
export async function readRunCancellation(redis: RedisClient, prefix: string, runId: string): Promise<RunCancellation | null> {
  return parseCancellation(await redis.get(runCancelKey(prefix, runId)));
}

function parseCancellation(raw: string | null): RunCancellation | null {
  if (raw === null) return null;
  try {
    const parsed = RunCancellation.safeParse(JSON.parse(raw));
    if (parsed.success) return parsed.data;
  } catch {
    // Not JSON: fall through to the placeholder below.
  }
  return { by: 'unknown', reason: '(the cancel record could not be read)', at: new Date(0).toISOString() };
}

/** The state of a run from its incident job's BullMQ state and return value. */
function stateOf(jobState: string, job: Job): RunState {
  switch (jobState) {
    case 'active':
      return 'active';
    case 'waiting-children':
      return 'parked';
    case 'failed':
      return 'failed';
    case 'completed': {
      const status: unknown = isObject(job.returnvalue) ? job.returnvalue.status : undefined;
      const finished: readonly RunStatus[] = ['partial', 'failed', 'cancelled'];
      return finished.find((s) => s === status) ?? 'completed';
    }
    default:
      return 'waiting';
  }
}

function specialistsOf(job: Job, checkpoint: RunCheckpoint | undefined): string[] {
  const result = job.returnvalue as unknown;
  if (isObject(result) && Array.isArray(result.specialists)) {
    return result.specialists.map((s) => (isObject(s) && typeof s.name === 'string' ? s.name : '?'));
  }
  if (!checkpoint) return [];
  return checkpoint.routed ?? [...new Set(checkpoint.delegations.map((d) => d.agent))];
}

/** A run checkpoint's text parsed with its schema; undefined when absent or unusable (a summary shows what it can without it). */
function parseRunCheckpoint(raw: string | null | undefined): RunCheckpoint | undefined {
  if (raw === null || raw === undefined) return undefined;
  try {
    const parsed = RunCheckpoint.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : undefined;
  } catch {
    // Not JSON: the summary goes without it (`bosun runs show` reports the broken checkpoint).
    return undefined;
  }
}

/** Run control over the incidents queue, the run checkpoints and the cancel keys of one prefix. */
export class RunControl {
  private readonly redis: RedisClient;
  private readonly prefix: string;
  private readonly incidents: Queue;
  private readonly timers: Queue;

  constructor(options: { redis: RedisClient; prefix: string }) {
    this.redis = options.redis;
    this.prefix = options.prefix;
    this.incidents = new Queue(INCIDENTS_QUEUE, { connection: options.redis, prefix: options.prefix });
    this.timers = new Queue(COORDINATOR_TIMERS_QUEUE, { connection: options.redis, prefix: options.prefix });
  }

  /** The incident job of a run: through its checkpoint, else by looking through the queue (a run not started yet has none). */
  async findJob(runId: string): Promise<Job | null> {
    if (!RUN_ID_PATTERN.test(runId)) return null;
    const jobId = parseRunCheckpoint(await this.redis.get(runCheckpointKey(this.prefix, runId)))?.jobId;
    if (jobId !== undefined) {
      const job = await Job.fromId(this.incidents, jobId);
      if (job?.id !== undefined && runIdFor(job.id, job.timestamp) === runId) return job;
    }
    for (const type of ALL_TYPES) {
      for (let start = 0; start < SCAN_MAX; start += PAGE) {
        const jobs = (await this.incidents.getJobs([type], start, start + PAGE - 1, false)) as Job[];
        const found = jobs.find((j) => j?.id !== undefined && runIdFor(j.id, j.timestamp) === runId);
        if (found) return found;
        if (jobs.length === 0) break;
      }
    }
    return null;
  }

  /**
   * Cancels a run: records who and why (once), and asks the coordinator to end it. A parked run
   * ends at once, an active one at its next step, one not started yet as soon as a coordinator
   * picks it up; specialists stop before their next effect. Cancelling a run already cancelled,
   * or being cancelled, returns the cancellation in force. Refuses an unknown run (`not_found`)
   * and a finished one (`finished`).
   */
  async cancel(runId: string, request: { by: string; reason: string }): Promise<CancelOutcome> {
    const by = request.by.trim();
    const reason = request.reason.trim();
    if (by === '' || by.length > CANCEL_BY_MAX)
      throw new RunControlError('bad_request', `by: must be a non-empty string of at most ${CANCEL_BY_MAX} characters`);
    if (reason === '' || reason.length > CANCEL_REASON_MAX)
      throw new RunControlError('bad_request', `reason: must be a non-empty string of at most ${CANCEL_REASON_MAX} characters`);
    const job = await this.findJob(runId);
    if (!job) {
      const format = RUN_ID_PATTERN.test(runId) ? '' : ' (a run id is r and 20 hex digits, as bosun publish prints it)';
      throw new RunControlError('not_found', `no run ${runId} under BOSUN_PREFIX=${this.prefix}${format}`);
    }
    const incidentId = String(job.id);
    const state = stateOf(await job.getState(), job);
    if (state === 'cancelled') {
      const result = job.returnvalue as unknown;
      const earlier = isObject(result) ? RunCancellation.safeParse(result.cancelled) : undefined;
      const cancelled = earlier?.success
        ? earlier.data
        : ((await readRunCancellation(this.redis, this.prefix, runId)) ?? { by: 'unknown', reason: '', at: '' });
      return { runId, incidentId, cancelled, already: true, state };
    }
    if (state === 'completed' || state === 'partial' || state === 'failed') {
      throw new RunControlError(
        'finished',
        `run ${runId} (incident ${incidentId}) has already finished: ${state}; there is nothing to cancel`,
      );
    }
    const mine: RunCancellation = { by, reason, at: new Date().toISOString() };
    const written = await this.redis.set(runCancelKey(this.prefix, runId), JSON.stringify(mine), 'EX', CANCEL_TTL_SECONDS.run, 'NX');
    const cancelled = written === null ? ((await readRunCancellation(this.redis, this.prefix, runId)) ?? mine) : mine;
    // Added on every request: a request that died between the key and this job is completed by
    // the next one, and the coordinator's handler does nothing twice.
    const timer: TimerJob = { kind: 'cancel-run', runId };
    await this.timers.add(timer.kind, timer, { jobId: timerJobId(timer), removeOnComplete: true, removeOnFail: { age: 7 * 24 * 3600 } });
    return { runId, incidentId, cancelled, already: written === null, state };
  }

  /** The run's current summary, or null when there is no such run. */
  async get(runId: string): Promise<RunSummary | null> {
    const job = await this.findJob(runId);
    if (!job) return null;
    const [summary] = await this.summarize([{ job, jobState: await job.getState() }]);
    return summary ?? null;
  }

  /** Runs newest first (by creation), `limit` of them (default 50), only those in `state` when given. */
  async list(options: { state?: RunState; limit?: number } = {}): Promise<RunSummary[]> {
    const limit = options.limit ?? 50;
    if (options.state !== undefined && !Object.hasOwn(JOB_TYPES, options.state))
      throw new RunControlError('bad_request', `status: must be one of ${RUN_STATES.join(', ')}`);
    const types = options.state ? JOB_TYPES[options.state] : ALL_TYPES;
    const found: { job: Job; jobState: string }[] = [];
    for (const type of types) {
      let matched = 0;
      for (let start = 0; start < SCAN_MAX && matched < limit; start += PAGE) {
        const jobs = ((await this.incidents.getJobs([type], start, start + PAGE - 1, false)) as Job[]).filter((j) => j?.id !== undefined);
        for (const job of jobs) {
          const jobState: string = type;
          if (options.state && stateOf(jobState, job) !== options.state) continue;
          found.push({ job, jobState });
          if (++matched >= limit) break;
        }
        if (jobs.length === 0) break;
      }
    }
    // A job that moved between two states while they were read is listed once.
    const byId = new Map(found.map((f) => [String(f.job.id), f] as const));
    const unique = [...byId.values()];
    unique.sort((a, b) => b.job.timestamp - a.job.timestamp || String(b.job.id).localeCompare(String(a.job.id)));
    return this.summarize(unique.slice(0, limit));
  }

  /** Summaries, reading the checkpoints and cancel keys of the unfinished runs in one MGET. */
  private async summarize(entries: { job: Job; jobState: string }[]): Promise<RunSummary[]> {
    const rows = entries.map(({ job, jobState }) => ({
      job,
      runId: runIdFor(String(job.id), job.timestamp),
      state: stateOf(jobState, job),
    }));
    const open = rows.filter((r) => r.state === 'waiting' || r.state === 'active' || r.state === 'parked');
    const values =
      open.length > 0
        ? await this.redis.mget(...open.flatMap((r) => [runCheckpointKey(this.prefix, r.runId), runCancelKey(this.prefix, r.runId)]))
        : [];
    const extra = new Map<string, { checkpoint: RunCheckpoint | undefined; cancel: RunCancellation | null }>();
    open.forEach((r, i) => {
      extra.set(r.runId, { checkpoint: parseRunCheckpoint(values[2 * i]), cancel: parseCancellation(values[2 * i + 1] ?? null) });
    });
    return rows.map(({ job, runId, state }) => {
      const more = extra.get(runId);
      const summary: RunSummary = {
        runId,
        incidentId: String(job.id),
        state,
        createdAt: new Date(job.timestamp).toISOString(),
        specialists: specialistsOf(job, more?.checkpoint),
      };
      if (job.finishedOn && state !== 'waiting' && state !== 'active' && state !== 'parked')
        summary.finishedAt = new Date(job.finishedOn).toISOString();
      if (more?.cancel) summary.cancelRequested = more.cancel;
      if (state === 'failed' && !isObject(job.returnvalue) && job.failedReason) summary.reason = job.failedReason;
      return summary;
    });
  }

  async close(): Promise<void> {
    await Promise.all([this.incidents.close(), this.timers.close()]);
  }
}
