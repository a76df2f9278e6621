import { UnrecoverableError, WaitingChildrenError, type Job } from 'bullmq';
import { TimerJob, type RunResult } from '@bosun/contract';
import type { ClusterConfig, Logger } from '@bosun/config';
import type { Model } from '@bosun/models';
import { handleTimer, runIncident, type RunDeps } from '@bosun/agent';
import {
  RunUsageLedger,
  type ApprovalStore,
  type DeadLetters,
  type EventSink,
  type RedisClient,
  type RevisedCheckpointStore,
} from '@bosun/transport';
import { BullRunJobs, BullRunTimers, RedisCancelKeys } from './ports.js';

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

  constructor(deps: CoordinatorDeps) {
    const queues = { redis: deps.redis, prefix: deps.prefix };
    this.jobs = new BullRunJobs(queues);
    this.timers = new BullRunTimers(queues);
    this.run = {
      config: deps.config,
      model: deps.model,
      checkpoints: deps.checkpoints,
      events: deps.events,
      deadLetters: deps.deadLetters,
      jobs: this.jobs,
      timers: this.timers,
      cancels: new RedisCancelKeys(queues),
      clock: Date,
      log: deps.log,
      ...(deps.approvals ? { approvals: deps.approvals } : {}),
      // With a run budget, the coordinator's own spending counts in the run's ledger too.
      ...(deps.config.budgets.run ? { usage: new RunUsageLedger(queues) } : {}),
    };
  }

  /**
   * The processor of the `incidents` queue. Bad input (and an unusable checkpoint) fails the job
   * for good, with its dead letter; a parked run waits for its children; a retryable model error
   * is thrown for BullMQ to retry.
   */
  async process(job: Job, token: string | undefined): Promise<RunResult> {
    const outcome = await runIncident(this.jobs.incidentJob(job, token), this.run);
    if (outcome.kind === 'parked') throw new WaitingChildrenError();
    if (outcome.kind === 'rejected') throw new UnrecoverableError(outcome.reason);
    return outcome.result;
  }

  /** The processor of the coordinator's timers queue. */
  async onTimer(job: Job): Promise<void> {
    await handleTimer(TimerJob.parse(job.data), this.run);
  }

  async close(): Promise<void> {
    await Promise.all([this.jobs.close(), this.timers.close()]);
  }
}
