import { Job, Queue } from 'bullmq';
import {
  BosunError,
  INCIDENT_JOB,
  INCIDENTS_QUEUE,
  INTAKE_RESOLUTION_TTL_SECONDS,
  intakeResolvedKey,
  runIdFor,
  type IncidentInput,
  type IntakeResolution,
} from '@bosun/contract';
import { RunControl, RunControlError, type RedisClient } from '@bosun/transport';

/** Redis did not take the work in time (or is not connected): the request is answered 503. */
export class RedisUnavailableError extends BosunError {
  constructor(message: string, cause?: unknown) {
    super('redis_unreachable', message, { cause });
    this.name = 'RedisUnavailableError';
  }
}

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
      throw new RedisUnavailableError(`Redis failed: ${(err as Error).message}; ${what} was not stored`, err);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Adds an incident (job id = its id); a repeat keeps the first job and reports its run. */
  add(incident: IncidentInput): Promise<Queued> {
    return this.within(`incident ${incident.id}`, async () => {
      const added = await this.queue.add(INCIDENT_JOB, incident, { jobId: incident.id, removeOnComplete: false, removeOnFail: false });
      const stored = (await Job.fromId(this.queue, incident.id)) ?? added;
      return { incidentId: incident.id, runId: runIdFor(incident.id, stored.timestamp), duplicate: stored.timestamp !== added.timestamp };
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
