/**
 * Reads a task's run: its incident job (state, result) and a pending approval of the run. Every
 * replica reads the same Redis, so any replica answers for any task.
 */
import { Job, Queue } from 'bullmq';
import { INCIDENTS_QUEUE, INCIDENT_JOB, RunResult, runIdFor, type A2aTaskRecord, type Incident } from '@bosun/contract';
import type { ApprovalStore, RedisClient } from '@bosun/transport';
import type { PendingApproval, RunView } from './view.js';

export class RunReader {
  readonly incidents: Queue;

  constructor(
    redis: RedisClient,
    prefix: string,
    private readonly approvals: ApprovalStore,
  ) {
    this.incidents = new Queue(INCIDENTS_QUEUE, { connection: redis, prefix });
  }

  /** Publishes the incident job (a job already under that id is kept: no second run) and returns its run id. */
  async publish(incident: Incident): Promise<{ runId: string; createdAt: string }> {
    const job = await this.incidents.add(INCIDENT_JOB, incident, { jobId: incident.id, removeOnComplete: false, removeOnFail: false });
    return { runId: runIdFor(incident.id, job.timestamp), createdAt: new Date(job.timestamp).toISOString() };
  }

  /** The run of a task as it is now. */
  async view(record: A2aTaskRecord): Promise<RunView> {
    // The state first, then the job: a job read before it completed has no return value yet.
    const jobState = await this.incidents.getJobState(record.incidentId);
    const job = await Job.fromId(this.incidents, record.incidentId);
    if (!job || jobState === 'unknown') return { jobState: 'missing' };
    if (jobState === 'completed') {
      const parsed = RunResult.safeParse(job.returnvalue);
      return parsed.success
        ? { jobState, result: parsed.data }
        : { jobState: 'failed', failedReason: 'the run returned a result that does not parse' };
    }
    if (jobState === 'failed') return { jobState, failedReason: job.failedReason };
    if (jobState === 'active' || jobState === 'waiting-children') {
      const approval = await this.pendingApproval(record.runId);
      return approval ? { jobState, approval } : { jobState };
    }
    return { jobState };
  }

  /** The oldest pending approval of a run, if any. */
  async pendingApproval(runId: string): Promise<PendingApproval | undefined> {
    const a = (await this.approvals.pending()).find((p) => p.runId === runId && p.status === 'pending');
    if (!a) return undefined;
    return {
      id: a.id,
      agent: a.agent,
      reason: a.reason,
      timeoutAt: a.timeoutAt,
      calls: a.calls.map((c) => ({ index: c.index, tool: c.tool, args: c.args, needsApproval: c.needsApproval })),
    };
  }

  async close(): Promise<void> {
    await this.incidents.close();
  }
}
