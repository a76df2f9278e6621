import { Job, Queue } from 'bullmq';
import {
  BosunError,
  INCIDENT_JOB,
  INCIDENTS_QUEUE,
  INTAKE_RESOLUTION_TTL_SECONDS,
  intakeResolvedKey,
  intakeGroupKey,
  intakeJoinedKey,
  intakeJoinedIdsKey,
  intakeRateKey,
  runIdFor,
  type IncidentInput,
  type JoinedAlert,
  type IntakeResolution,
  errorMessage,
} from '@bosun/contract';
import { RunControl, RunControlError, type RedisClient } from '@bosun/transport';

/** Redis did not take the work in time (or is not connected): the request is answered 503. */
export class RedisUnavailableError extends BosunError {
  constructor(message: string, cause?: unknown) {
    super('redis_unreachable', message, { cause });
    this.name = 'RedisUnavailableError';
  }
}

/** A source's rate limit (`intake.sources.<name>.rateLimit`). */
export interface RateLimit {
  source: string;
  max: number;
  perMs: number;
}

/** GCRA over one key: returns how long the next start must wait (ms), and moves the theoretical arrival time on. */
const RATE_SCRIPT = `
local now = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local tolerance = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local delay = tat - tolerance - now
if delay < 0 then delay = 0 end
tat = tat + interval
redis.call('SET', KEYS[1], tostring(tat), 'PX', math.ceil(tat - now + tolerance + 1000))
return tostring(delay)
`;

/**
 * Appends each joined alert (ARGV pairs: its incident id, its entry) to the list KEYS[1] unless
 * the set KEYS[2] already holds its id, so that Alertmanager's repeats of a group list each alert
 * once; both keys live ARGV[1] seconds from the last write.
 */
const JOIN_SCRIPT = `
local added = 0
for i = 2, #ARGV - 1, 2 do
  if redis.call('SADD', KEYS[2], ARGV[i]) == 1 then
    redis.call('RPUSH', KEYS[1], ARGV[i + 1])
    added = added + 1
  end
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[1])
return added
`;

/** One incident as queued: its run, and whether a job of that id was already there (then it runs once). */
export interface Queued {
  incidentId: string;
  runId: string;
  duplicate: boolean;
}

/**
 * The intake's side of Redis: incidents added to `incidents` with their id as the job id (a
 * repeat adds nothing), and resolutions recorded. Each call fails with a
 * {@link RedisUnavailableError} when Redis is not connected or does not answer within
 * `timeoutMs` — the caller answers 503, never 2xx, for work not stored.
 */
export class IntakeQueue {
  private readonly queue: Queue;
  private readonly runs: RunControl;

  constructor(private readonly options: { redis: RedisClient; prefix: string; timeoutMs: number }) {
    this.queue = new Queue(INCIDENTS_QUEUE, { connection: options.redis, prefix: options.prefix });
    this.runs = new RunControl({ redis: options.redis, prefix: options.prefix });
  }

  /** Runs `work` against Redis within the timeout ({@link RedisUnavailableError} otherwise). */
  async within<T>(what: string, work: () => Promise<T>): Promise<T> {
    const { redis, timeoutMs } = this.options;
    if (redis.status !== 'ready') throw new RedisUnavailableError(`Redis is not connected (${redis.status}); ${what} was not stored`);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new RedisUnavailableError(`Redis did not answer within ${timeoutMs} ms; ${what} may not be stored`)),
        timeoutMs,
      );
    });
    try {
      return await Promise.race([work(), timeout]);
    } catch (err) {
      if (err instanceof RedisUnavailableError) throw err;
      throw new RedisUnavailableError(`Redis failed: ${errorMessage(err)}; ${what} was not stored`, err);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Adds an incident (job id = its id); a repeat keeps the first job and reports its run. With a
   * rate limit, an incident past it is added as a delayed job that starts when its turn comes
   * (the backlog: `bosun runs list --status waiting` shows it), never dropped.
   */
  add(incident: IncidentInput, rate?: RateLimit): Promise<Queued & { delayedMs?: number; startsAt?: string }> {
    return this.within(`incident ${incident.id}`, async () => {
      const existing = await Job.fromId(this.queue, incident.id);
      if (existing) return { incidentId: incident.id, runId: runIdFor(incident.id, existing.timestamp), duplicate: true };
      const delayedMs = rate ? await this.rateDelay(rate) : 0;
      const added = await this.queue.add(INCIDENT_JOB, incident, {
        jobId: incident.id,
        removeOnComplete: false,
        removeOnFail: false,
        ...(delayedMs > 0 ? { delay: delayedMs } : {}),
      });
      const stored = (await Job.fromId(this.queue, incident.id)) ?? added;
      const queued = {
        incidentId: incident.id,
        runId: runIdFor(incident.id, stored.timestamp),
        duplicate: stored.timestamp !== added.timestamp,
      };
      return delayedMs > 0 ? { ...queued, delayedMs, startsAt: new Date(added.timestamp + delayedMs).toISOString() } : queued;
    });
  }

  /**
   * The delay of the next incident of a source under its rate limit (GCRA): `max` may start at
   * once in any `perMs`, the rest are spaced `perMs / max` apart, in the order they came.
   */
  private async rateDelay(rate: RateLimit): Promise<number> {
    const { redis, prefix } = this.options;
    const interval = rate.perMs / rate.max;
    const delay = await redis.eval(RATE_SCRIPT, 1, intakeRateKey(prefix, rate.source), Date.now(), interval, rate.perMs - interval);
    return Math.max(0, Math.ceil(Number(delay)));
  }

  /**
   * The incident a group's alerts join: `incidentId` when it opens the group (or the group's
   * incident is gone from the queue), else the incident that did within `windowMs`.
   */
  claimGroup(group: { source: string; groupHash: string; incidentId: string; windowMs: number }): Promise<string> {
    const { redis, prefix } = this.options;
    const key = intakeGroupKey(prefix, group.source, group.groupHash);
    return this.within(`the group of ${group.incidentId}`, async () => {
      if ((await redis.set(key, group.incidentId, 'PX', group.windowMs, 'NX')) !== null) return group.incidentId;
      const owner = await redis.get(key);
      // An owner whose job never made it to the queue (its request got a 503) does not hold the group.
      if (owner !== null && (owner === group.incidentId || (await Job.fromId(this.queue, owner)))) return owner;
      await redis.set(key, group.incidentId, 'PX', group.windowMs);
      return group.incidentId;
    });
  }

  /**
   * Records alerts that joined an incident (its group's), for operators:
   * `<prefix>:intake:joined:<incidentId>`, each alert once however often its group is sent again.
   */
  recordJoined(incidentId: string, alerts: readonly IncidentInput[]): Promise<void> {
    const { redis, prefix } = this.options;
    const at = new Date().toISOString();
    const pairs = alerts.flatMap((a) => [
      a.id,
      JSON.stringify({ incidentId: a.id, summary: a.summary.split('\n')[0] ?? '', at } satisfies JoinedAlert),
    ]);
    return this.within(`the alerts joining ${incidentId}`, async () => {
      await redis.eval(
        JOIN_SCRIPT,
        2,
        intakeJoinedKey(prefix, incidentId),
        intakeJoinedIdsKey(prefix, incidentId),
        INTAKE_RESOLUTION_TTL_SECONDS,
        ...pairs,
      );
    });
  }

  /**
   * Records that an incident's alert was resolved, and with `cancel` cancels its run when it is
   * still under way (an unknown incident is recorded as `not-started`, a finished run as `finished`).
   */
  resolve(resolution: { incidentId: string; endsAt?: string; source: string; cancel: boolean }): Promise<IntakeResolution> {
    return this.within(`the resolution of ${resolution.incidentId}`, async () => {
      const { incidentId, endsAt, source, cancel } = resolution;
      const job = await Job.fromId(this.queue, incidentId);
      const runId = job ? runIdFor(incidentId, job.timestamp) : undefined;
      let run: IntakeResolution['run'] = job ? 'recorded' : 'not-started';
      if (cancel && runId !== undefined) run = await this.cancel(runId, source, endsAt);
      const record: IntakeResolution = {
        v: 1,
        incidentId,
        source,
        at: new Date().toISOString(),
        ...(endsAt !== undefined ? { endsAt } : {}),
        run,
        ...(runId !== undefined ? { runId } : {}),
      };
      await this.options.redis.set(
        intakeResolvedKey(this.options.prefix, incidentId),
        JSON.stringify(record),
        'EX',
        INTAKE_RESOLUTION_TTL_SECONDS,
      );
      return record;
    });
  }

  private async cancel(runId: string, source: string, endsAt: string | undefined): Promise<IntakeResolution['run']> {
    try {
      await this.runs.cancel(runId, { by: `intake/${source}`, reason: `the alert was resolved${endsAt ? ` (ends at ${endsAt})` : ''}` });
      return 'cancelled';
    } catch (err) {
      if (err instanceof RunControlError && err.code === 'finished') return 'finished';
      if (err instanceof RunControlError && err.code === 'not_found') return 'not-started';
      throw err;
    }
  }

  async close(): Promise<void> {
    await Promise.all([this.queue.close(), this.runs.close()]);
  }
}
