import { UnrecoverableError, WaitingChildrenError, WaitingError, type Job } from 'bullmq';
import { Incident, LockLostError, TimerJob, type RunResult, errorMessage } from '@bosun/contract';
import type { ClusterConfig, Logger } from '@bosun/config';
import type { Model } from '@bosun/models';
import { handleTimer, runIncident, type LocalSpecialists, type RunDeps } from '@bosun/agent';
import {
  DeliveryQueue,
  TraceNotes,
  metrics,
  RunUsageLedger,
  type ApprovalStore,
  type DeadLetters,
  type EventSink,
  type RedisClient,
  type RevisedCheckpointStore,
} from '@bosun/transport';
import { BullRunJobs, BullRunTimers, RedisCancelKeys } from './ports.js';
import { inRunSpan } from './run-trace.js';

/** The ports a coordinator uses. */
export interface CoordinatorDeps {
  redis: RedisClient;
  prefix: string;
  config: ClusterConfig;
  model: Model;
  events: EventSink;
  checkpoints: RevisedCheckpointStore;
  deadLetters: Pick<DeadLetters, 'add'>;
  log: Logger;
  /** Where approvals live: a cancelled run denies the approvals its tasks wait for. Optional. */
  approvals?: Pick<ApprovalStore, 'decide'>;
  /** Told when a run's pass finds it lost the incident job's lock (counted and logged once per burst: `watchWorkerLocks`). */
  onLockLost?: (jobId: string) => void;
  /** The specialists of this process (`bosun serve`): their tasks run here, without child jobs. */
  local?: LocalSpecialists;
}

/**
 * The BullMQ processors of the coordinator: the `incidents` queue (the run loop, `runIncident`
 * in `@bosun/agent`) and its timers queue (`handleTimer`). Waiting for specialists holds no
 * worker: the incident job is parked in BullMQ's waiting-children state until its children
 * finish, then resumed from its checkpoint — in any coordinator process.
 */
export class Coordinator {
  private readonly jobs: BullRunJobs;
  private readonly timers: BullRunTimers;
  private readonly run: RunDeps;
  /** Where a finished run's answer is queued for its sinks (`delivery` in the config); none without it. */
  private readonly deliveries: DeliveryQueue | undefined;
  private readonly traceNotes: TraceNotes;
  private readonly onLockLost: ((jobId: string) => void) | undefined;

  constructor(deps: CoordinatorDeps) {
    this.onLockLost = deps.onLockLost;
    const queues = { redis: deps.redis, prefix: deps.prefix };
    const { retention } = deps.config;
    this.jobs = new BullRunJobs({ ...queues, retention });
    this.timers = new BullRunTimers({ ...queues, retention });
    this.deliveries = deps.config.delivery ? new DeliveryQueue({ ...queues, delivery: deps.config.delivery }) : undefined;
    this.traceNotes = new TraceNotes(queues);
    this.run = {
      config: deps.config,
      model: deps.model,
      checkpoints: deps.checkpoints,
      events: deps.events,
      deadLetters: deps.deadLetters,
      jobs: this.jobs,
      timers: this.timers,
      cancels: new RedisCancelKeys({ ...queues, retention }),
      clock: Date,
      log: deps.log,
      ...(deps.approvals ? { approvals: deps.approvals } : {}),
      ...(deps.local ? { local: deps.local } : {}),
      // With a run budget, the coordinator's own spending counts in the run's ledger too.
      ...(deps.config.budgets.run ? { usage: new RunUsageLedger({ ...queues, ttlSeconds: retention.checkpoints }) } : {}),
    };
  }

  /**
   * The processor of the `incidents` queue. Bad input (and an unusable checkpoint) fails the job
   * for good, with its dead letter; a parked run waits for its children; a retryable model error
   * is thrown for BullMQ to retry.
   */
  async process(job: Job, token: string | undefined, signal?: AbortSignal): Promise<RunResult> {
    return inRunSpan(this.traceNotes, job, () => this.pass(job, token, signal));
  }

  /**
   * One pass of the run loop over the incident job. A run whose lock this process lost is given
   * up (BullMQ leaves a job ended with `WaitingError` alone): its next owner resumes it from its
   * checkpoint, collects its children and answers; this one answers nothing.
   */
  private async pass(job: Job, token: string | undefined, signal: AbortSignal | undefined): Promise<RunResult> {
    let outcome: Awaited<ReturnType<typeof runIncident>>;
    try {
      outcome = await runIncident(this.jobs.incidentJob(job, token, signal), this.run);
    } catch (err) {
      if (!(err instanceof LockLostError || signal?.aborted)) throw err;
      outcome = { kind: 'lost', reason: errorMessage(err) };
    }
    if (outcome.kind === 'lost') {
      this.onLockLost?.(String(job.id));
      throw new WaitingError();
    }
    if (outcome.kind === 'parked') throw new WaitingChildrenError();
    if (outcome.kind === 'rejected') throw new UnrecoverableError(outcome.reason);
    // Queued before the job completes: a crash in between runs this again from the checkpoint,
    // and the deliveries' job ids keep one per sink.
    await this.deliver(job.data, outcome.result);
    const { status, startedAt, finishedAt } = outcome.result;
    metrics.runFinished(status, (Date.parse(finishedAt) - Date.parse(startedAt)) / 1000);
    return outcome.result;
  }

  /**
   * Queues the run's deliveries. When that fails, the run still ends with its result: each
   * delivery becomes a `delivery` dead letter holding it (`bosun dlq retry` queues it again).
   */
  private async deliver(data: unknown, result: RunResult): Promise<void> {
    if (!this.deliveries) return;
    const incident = Incident.parse(data);
    try {
      await this.deliveries.enqueue(incident, result);
    } catch (err) {
      this.run.log.error({ err, runId: result.runId }, 'could not queue the deliveries of the run; writing them as dead letters');
      for (const { jobId, data: delivery } of this.deliveries.jobsFor(incident, result)) {
        await this.run.deadLetters.add(
          {
            kind: 'delivery',
            runId: result.runId,
            incidentId: incident.id,
            reason: `could not queue the delivery of run ${result.runId} to sink ${delivery.sink}: ${errorMessage(err)}`,
            marker: 'UNDELIVERED — the answer did not reach this sink.',
            input: delivery,
          },
          `delivery-${jobId}`,
        );
      }
    }
  }

  /** The processor of the coordinator's timers queue. */
  async onTimer(job: Job): Promise<void> {
    await handleTimer(TimerJob.parse(job.data), this.run);
  }

  async close(): Promise<void> {
    await Promise.all([this.jobs.close(), this.timers.close(), this.deliveries?.close()]);
  }
}
