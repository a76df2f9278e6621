/**
 * Reads a task's run: its incident job (state, result, times), a pending approval of the run, and
 * when the run reached the state it is in. Every replica reads the same Redis, so any replica
 * answers for any task, and two reads of an unchanged run give the same answer (timestamps
 * included: they come from the run, never from the clock of the read).
 */
import { Job, Queue } from 'bullmq';
import {
  INCIDENTS_QUEUE,
  INCIDENT_JOB,
  RunResult,
  a2aKeys,
  runCheckpointKey,
  runIdFor,
  type A2aTaskRecord,
  type Incident,
} from '@bosun/contract';
import { ApprovalReader, type ApprovalStore, type RedisClient } from '@bosun/transport';
import { A2A_STEPS, type PendingApproval, type RunView } from './view.js';

/**
 * How long a task whose incident job is not there yet counts as submitted: a send that lost the
 * race for its message id returns the winner's task, whose job may still be on its way.
 */
const PUBLISH_GRACE_MS = 30_000;

const iso = (ms: number | undefined, fallback: string): string => (ms ? new Date(ms).toISOString() : fallback);

export class RunReader {
  readonly incidents: Queue;
  /** The run's other specialists of an approval, read from the run's checkpoint. */
  private readonly reader: ApprovalReader;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly approvals: ApprovalStore,
  ) {
    this.incidents = new Queue(INCIDENTS_QUEUE, { connection: redis, prefix });
    this.reader = new ApprovalReader({ redis, prefix });
  }

  /** The run id of an incident job already there (an earlier task's), if any. */
  async existingRun(incidentId: string): Promise<string | undefined> {
    const job = await Job.fromId(this.incidents, incidentId);
    return job ? runIdFor(incidentId, job.timestamp) : undefined;
  }

  /**
   * Publishes the incident job created at `createdAtMs`, so that its run id is the one the task
   * was claimed under (a job already under that id is kept: no second run). Returns the run id of
   * the job as stored, which differs only when an earlier job was there.
   */
  async publish(incident: Incident, createdAtMs: number): Promise<string> {
    await this.incidents.add(INCIDENT_JOB, incident, {
      jobId: incident.id,
      timestamp: createdAtMs,
      removeOnComplete: false,
      removeOnFail: false,
    });
    // BullMQ answers a duplicate id with a local Job object: read the stored one.
    const stored = await Job.fromId(this.incidents, incident.id);
    return runIdFor(incident.id, stored?.timestamp ?? createdAtMs);
  }

  /** The run of a task as it is now. */
  async view(record: A2aTaskRecord): Promise<RunView> {
    // The state first, then the job: a job read before it completed has no return value yet.
    const jobState = await this.incidents.getJobState(record.incidentId);
    const job = await Job.fromId(this.incidents, record.incidentId);
    if (!job || jobState === 'unknown') {
      const young = Date.now() - Date.parse(record.createdAt) < PUBLISH_GRACE_MS;
      return { jobState: young ? 'waiting' : 'missing', since: record.createdAt };
    }
    const processed = Boolean(job.processedOn);
    if (jobState === 'completed') {
      const parsed = RunResult.safeParse(job.returnvalue);
      const ended = iso(job.finishedOn, record.createdAt);
      return parsed.success
        ? { jobState, result: parsed.data, since: parsed.data.finishedAt || ended, processed }
        : { jobState: 'failed', failedReason: 'the run returned a result that does not parse', since: ended, processed };
    }
    if (jobState === 'failed') return { jobState, failedReason: job.failedReason, since: iso(job.finishedOn, record.createdAt), processed };
    if (jobState === 'active' || jobState === 'waiting-children') {
      const approval = await this.pendingApproval(record.runId);
      if (approval) {
        await this.redis.set(a2aKeys.runApproval(this.prefix, record.runId), approval.id, 'EX', 86_400);
        return { jobState, approval, since: approval.createdAt, processed: true };
      }
    }
    if (!processed && jobState !== 'active' && jobState !== 'waiting-children') return { jobState, since: record.createdAt };
    return { jobState, since: await this.workingSince(record, job), processed: true };
  }

  /**
   * When the run last became `working`: its start (the coordinator's checkpoint), or the decision
   * on the last approval a task of it showed, whichever is later.
   */
  private async workingSince(record: A2aTaskRecord, job: Job): Promise<string> {
    const [raw, approvalId] = await Promise.all([
      this.redis.get(runCheckpointKey(this.prefix, record.runId)),
      this.redis.get(a2aKeys.runApproval(this.prefix, record.runId)),
    ]);
    let started = iso(job.processedOn, record.createdAt);
    try {
      const at = raw === null ? undefined : (JSON.parse(raw) as { startedAt?: unknown }).startedAt;
      if (typeof at === 'string' && !Number.isNaN(Date.parse(at))) started = at;
    } catch {
      // A checkpoint that is not JSON is the coordinator's problem; the job's own time stands in.
    }
    const decided = approvalId ? (await this.approvals.get(approvalId))?.decidedAt : undefined;
    return decided && Date.parse(decided) > Date.parse(started) ? decided : started;
  }

  /** The oldest pending approval of a run, if any. */
  async pendingApproval(runId: string): Promise<PendingApproval | undefined> {
    const found = (await this.approvals.pending()).find((p) => p.runId === runId && p.status === 'pending');
    if (!found) return undefined;
    // A2A callers are not identified people of the operators list: reading records no viewer.
    const a = await this.reader.view(found);
    const steps = (a.steps ?? []).slice(-A2A_STEPS.steps);
    return {
      id: a.id,
      agent: a.agent,
      reason: a.reason,
      createdAt: a.createdAt,
      timeoutAt: a.timeoutAt,
      calls: a.calls.map((c) => ({ index: c.index, tool: c.tool, args: c.args, needsApproval: c.needsApproval })),
      ...(a.rule ? { required: a.rule.required, approvedBy: (a.votes ?? []).map((v) => v.actor.name) } : {}),
      ...(a.incident ? { incident: a.incident } : {}),
      progress: a.progress.text,
      ...(a.specialists && a.specialists.length > 0 ? { specialists: a.specialists } : {}),
      ...(steps.length > 0 ? { steps } : {}),
    };
  }

  async close(): Promise<void> {
    await this.incidents.close();
  }
}
