import {
  APPROVAL_CONTEXT_LIMITS,
  ApprovalViewer,
  BosunError,
  RunCheckpoint,
  TaskCheckpoint,
  approvalView,
  parseStored,
  parseStoredJson,
  runCheckpointId,
  runSpecialists,
  taskCheckpointId,
  tasksToRead,
  type Actor,
  type Approval,
  type ApprovalReadContext,
  type ApprovalView,
  type TaskRead,
} from '@bosun/contract';
import type { RedisClient } from '../base/connections.js';
import { RedisCheckpointStore } from './checkpoints.js';
import { keys } from '../keys.js';
import { runScript } from './scripts.js';

/**
 * Records one viewer beside an approval, with the approval's own TTL (nothing when the approval
 * is gone). KEYS: the approval's request key, its viewers hash. ARGV: the person's name
 * (lower-cased), the viewer as JSON. Returns 1 when recorded.
 */
const VIEWER_SCRIPT = {
  name: 'bosunApprovalViewer',
  lua: `
local ttl = redis.call('PTTL', KEYS[1])
if ttl <= 0 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ttl)
return 1
`,
};

/** Options of {@link ApprovalReader}. */
export interface ApprovalReaderOptions {
  redis: RedisClient;
  prefix: string;
}

/** Who reads an approval, as their path resolved them. */
export type ApprovalReaderActor = Pick<Actor, 'name' | 'verified' | 'path'>;

/**
 * Reads approvals as a person deciding needs them ({@link ApprovalView}): with the run's other
 * specialists and their last findings, derived from the run's checkpoint at read time (never
 * copied into the approval, so they are as fresh as the run), and with who has looked at it,
 * `<prefix>:approval:<id>:viewers`. A run checkpoint that has expired leaves `specialists` out;
 * one that does not parse is named in `specialistsProblem`; neither fails the read.
 */
export class ApprovalReader {
  private readonly redis: RedisClient;
  private readonly prefix: string;
  private readonly checkpoints: RedisCheckpointStore;

  constructor(options: ApprovalReaderOptions) {
    this.redis = options.redis;
    this.prefix = options.prefix;
    this.checkpoints = new RedisCheckpointStore(options);
  }

  /**
   * One approval as a person reads it. With `viewer` (an identified person reading this one
   * approval), records them first, so the answer lists them too.
   */
  async view(a: Approval, viewer?: ApprovalReaderActor): Promise<ApprovalView> {
    if (viewer) await this.recordViewer(a.id, viewer);
    const [context, viewers] = await Promise.all([this.runContext(a), this.viewers(a.id)]);
    return approvalView(a, { ...context, ...(viewers.length > 0 ? { viewers } : {}) });
  }

  /** Many approvals (a list): each with its context, a run's checkpoint read once; no view is recorded. */
  async views(list: readonly Approval[]): Promise<ApprovalView[]> {
    const runs = new Map<string, Promise<RunRead>>();
    return Promise.all(
      list.map(async (a) => {
        let run = runs.get(a.runId);
        if (!run) runs.set(a.runId, (run = this.readRun(a.runId)));
        const [context, viewers] = await Promise.all([run.then((r) => this.specialistsOf(r, a.taskId)), this.viewers(a.id)]);
        return approvalView(a, { ...context, ...(viewers.length > 0 ? { viewers } : {}) });
      }),
    );
  }

  /** Records that `viewer` read approval `id` now: one entry per person (by name, without case), the latest time. */
  async recordViewer(id: string, viewer: ApprovalReaderActor, at = new Date()): Promise<void> {
    const entry = parseStored(ApprovalViewer, { ...viewer, at: at.toISOString() }, `a viewer of approval ${id}`);
    await runScript(
      this.redis,
      VIEWER_SCRIPT,
      [keys.approval(this.prefix, id), keys.approvalViewers(this.prefix, id)],
      [viewer.name.toLowerCase(), JSON.stringify(entry)],
    );
  }

  /** Who has read approval `id`, the latest first, at most {@link APPROVAL_CONTEXT_LIMITS}`.viewers`. */
  async viewers(id: string): Promise<ApprovalViewer[]> {
    const all = await this.redis.hgetall(keys.approvalViewers(this.prefix, id));
    return Object.values(all)
      .map((raw) => parseStoredJson(ApprovalViewer, raw, `a viewer of approval ${id}`))
      .sort((x, y) => y.at.localeCompare(x.at))
      .slice(0, APPROVAL_CONTEXT_LIMITS.viewers);
  }

  private async runContext(a: Approval): Promise<ApprovalReadContext> {
    return this.specialistsOf(await this.readRun(a.runId), a.taskId);
  }

  /** The run's checkpoint: null when it is gone, or why it cannot be read. */
  private async readRun(runId: string): Promise<RunRead> {
    const id = runCheckpointId(runId);
    try {
      const raw = await this.checkpoints.load(id);
      return raw === null ? null : parseStored(RunCheckpoint, raw, `checkpoint ${id}`);
    } catch (err) {
      // A checkpoint that is not JSON or not a run checkpoint must not hide the approval itself.
      if (err instanceof BosunError) return { problem: err.message };
      throw err;
    }
  }

  private async specialistsOf(run: RunRead, taskId: string): Promise<ApprovalReadContext> {
    if (run === null) return {};
    if ('problem' in run) return { specialistsProblem: run.problem };
    const wanted = tasksToRead(run, taskId);
    const tasks = new Map<string, TaskRead>(await Promise.all(wanted.map(async (t) => [t, await this.readTask(t)] as const)));
    return { specialists: runSpecialists(run, taskId, tasks) };
  }

  private async readTask(taskId: string): Promise<TaskRead> {
    const id = taskCheckpointId(taskId);
    try {
      return TaskCheckpoint.parse(await this.checkpoints.load(id), id);
    } catch (err) {
      if (err instanceof BosunError) return { error: err.message };
      throw err;
    }
  }
}

type RunRead = RunCheckpoint | null | { problem: string };
