/**
 * `bosun runs show`: a run's state from its checkpoints and tool-call records, each parsed with
 * its contract schema (`RunCheckpoint`, `RunResult`, `TaskCheckpoint`, `ToolCallRecord`). What does
 * not parse is named, field by field, in the view's `problems`.
 */
import { Cluster } from 'ioredis';
import {
  RunCheckpoint,
  RunResult,
  TaskCheckpoint,
  parseStored,
  runCheckpointId,
  runCheckpointKey,
  taskCheckpointId,
  type Delegation,
  type TaskCheckpointData,
} from '@bosun/contract';
import { ToolCallRecords, toolOutcome, type RedisClient, type ToolOutcome } from '@bosun/transport';
import { OperatorError, readCheckpoint, storedProblem, type OperatorDeps } from './operator.js';

/** One tool call of a task, from its record. */
export interface ToolCallView {
  key: string;
  state: string;
  tool?: string;
  args?: unknown;
  startedAt?: string;
  readOnly?: boolean;
  /** From the recorded result, when done. */
  status?: string;
  isError?: boolean;
  error?: string;
  /**
   * What the call came to, in the words of `bosun_tool_calls_total{outcome}` (`toolOutcome`):
   * `ok`, `tool_error` (it ran and reported its own error), `error`, `in_doubt`. Absent while it
   * has no result (running, or unreadable).
   */
  outcome?: ToolOutcome;
  resolution?: unknown;
  /** When it was declared in doubt (kept once its outcome is recorded after all). */
  inDoubtAt?: string;
  /** When its outcome was recorded after the declaration: "in doubt, later seen done". */
  seenDoneAt?: string;
}

/** One delegation of a run. */
export interface DelegationView {
  taskId: string;
  agent: string;
  round?: number;
  task?: string;
  deadlineAt?: string;
  /** The result's status, or `running` (a task checkpoint exists), `queued` (none yet), `unknown` (unreadable). */
  status: string;
  /** From the task checkpoint. */
  step?: number;
  toolRounds?: number;
  pending?: { kind: string; step?: number; keys?: string[]; at?: string };
  /** Why the task checkpoint could not be read, when it could not. */
  checkpointError?: string;
  toolCalls: ToolCallView[];
}

/** `bosun runs show`. */
export interface RunView {
  runId: string;
  incidentId?: string;
  mode?: string;
  phase?: string;
  round?: number;
  startedAt?: string;
  deadlineAt?: string;
  jobId?: string;
  /** The run result's status, when the run finished. */
  status?: string;
  delegations: DelegationView[];
  /**
   * Every call of the run declared in doubt: those still `in-doubt`, and those whose outcome was
   * recorded later (`laterSeen`: its status and when), as the run result and the dead letters name them.
   */
  inDoubt: {
    key: string;
    agent: string;
    tool?: string;
    args?: unknown;
    laterSeen?: { status: string; at: string; acknowledged: boolean };
  }[];
  /** Stored values that could not be read, each naming its bad fields (the CLI exits 1 when there are any). */
  problems: string[];
}

function escapeGlob(s: string): string {
  return s.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

async function scanKeys(redis: RedisClient, pattern: string): Promise<string[]> {
  const found: string[] = [];
  // On a Redis Cluster, SCAN is per node: walk every master.
  const nodes = redis instanceof Cluster ? redis.nodes('master') : [redis];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, batch] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      found.push(...batch);
    } while (cursor !== '0');
  }
  return [...new Set(found)];
}

/** Sorts `<taskId>-s<step>-c<i>` keys by step, then call index. */
function callOrder(taskId: string): (a: ToolCallView, b: ToolCallView) => number {
  const pos = (k: string) => {
    const m = /-s(\d+)-c(\d+)$/.exec(k.slice(taskId.length));
    return m ? [Number(m[1]), Number(m[2])] : [Number.MAX_SAFE_INTEGER, 0];
  };
  return (a, b) => {
    const [sa = 0, ca = 0] = pos(a.key);
    const [sb = 0, cb = 0] = pos(b.key);
    return sa - sb || ca - cb || a.key.localeCompare(b.key);
  };
}

/**
 * The tool calls of one task, found by SCAN over `<prefix>:toolcall:<taskId>-*` and read with
 * `ToolCallRecords`. A record that does not parse is shown in state `unreadable`, and named in `problems`.
 */
async function toolCallsOf(deps: OperatorDeps, taskId: string, problems: string[]): Promise<ToolCallView[]> {
  const records = new ToolCallRecords(deps);
  const base = records.key('');
  const found = await scanKeys(deps.redis, `${escapeGlob(records.key(taskId))}-*`);
  const own = found
    .map((k) => k.slice(base.length))
    .filter((k) => k.startsWith(`${taskId}-`) && /^-s\d+-c\d+$/.test(k.slice(taskId.length)));
  const views: ToolCallView[] = [];
  for (const key of own) {
    try {
      const record = await records.read(key);
      if (!record) continue;
      const { state, tool, args, startedAt, readOnly, result, resolution, inDoubtAt, seenDoneAt } = record;
      views.push({
        key,
        state,
        ...(tool || result?.tool ? { tool: tool || result?.tool } : {}),
        ...(args !== undefined ? { args } : {}),
        ...(startedAt ? { startedAt } : {}),
        ...(readOnly !== undefined ? { readOnly } : {}),
        ...(result ? { status: result.status, isError: result.isError } : {}),
        ...(result?.error !== undefined ? { error: result.error } : {}),
        ...(result ? { outcome: toolOutcome(result) } : state === 'in-doubt' ? { outcome: 'in_doubt' as const } : {}),
        ...(resolution !== undefined ? { resolution } : {}),
        ...(inDoubtAt !== undefined ? { inDoubtAt } : {}),
        ...(seenDoneAt !== undefined ? { seenDoneAt } : {}),
      });
    } catch (err) {
      problems.push(storedProblem(err));
      views.push({ key, state: 'unreadable' });
    }
  }
  return views.sort(callOrder(taskId));
}

/** The task checkpoint of a delegation (null when there is none), or why it cannot be read. */
async function taskCheckpoint(deps: OperatorDeps, taskId: string): Promise<{ task: TaskCheckpointData | null } | { problem: string }> {
  const id = taskCheckpointId(taskId);
  try {
    return { task: TaskCheckpoint.parse(await readCheckpoint(deps, id), id) };
  } catch (err) {
    return { problem: err instanceof OperatorError ? err.message : storedProblem(err) };
  }
}

/** The view of one delegation: its result or task checkpoint, and its tool calls. What cannot be read goes to `problems`. */
async function delegationView(deps: OperatorDeps, d: Delegation, problems: string[]): Promise<DelegationView> {
  const dv: DelegationView = { taskId: d.taskId, agent: d.agent, round: d.round, task: d.task, status: 'queued', toolCalls: [] };
  if (d.deadlineAt !== undefined) dv.deadlineAt = d.deadlineAt;
  const read = await taskCheckpoint(deps, d.taskId);
  const task = 'task' in read ? read.task : null;
  if ('problem' in read) {
    dv.checkpointError = read.problem;
    problems.push(read.problem);
  }
  if (task) {
    dv.step = task.step;
    dv.toolRounds = task.toolRounds;
    const p = task.pending;
    if (p) dv.pending = { kind: p.kind, step: p.step, ...(p.kind === 'tools' ? { keys: p.keys } : {}), at: p.at };
  }
  dv.status = d.result?.status ?? task?.result?.status ?? (dv.checkpointError ? 'unknown' : task !== null ? 'running' : 'queued');
  dv.toolCalls = await toolCallsOf(deps, d.taskId, problems);
  return dv;
}

/** `bosun runs show`: a run's state from its checkpoints and tool-call records. */
export async function showRun(deps: OperatorDeps, runId: string): Promise<RunView> {
  const raw = await readCheckpoint(deps, runCheckpointId(runId));
  if (raw === null) throw new OperatorError('not_found', `no run ${runId} under BOSUN_PREFIX=${deps.prefix}`);
  const run = parseStored(RunCheckpoint, raw, `checkpoint ${runCheckpointKey(deps.prefix, runId)}`);
  const view: RunView = { runId, delegations: [], inDoubt: [], problems: [] };
  for (const f of ['incidentId', 'mode', 'phase', 'startedAt', 'deadlineAt', 'jobId'] as const) view[f] = run[f];
  view.round = run.round;
  if (run.result !== undefined) {
    try {
      view.status = parseStored(RunResult, run.result, `the result in checkpoint ${runCheckpointKey(deps.prefix, runId)}`).status;
    } catch (err) {
      view.problems.push(storedProblem(err));
    }
  }
  for (const d of run.delegations) {
    const dv = await delegationView(deps, d, view.problems);
    for (const c of dv.toolCalls) {
      if (c.state === 'in-doubt' || c.seenDoneAt !== undefined)
        view.inDoubt.push({
          key: c.key,
          agent: dv.agent,
          ...(c.tool ? { tool: c.tool } : {}),
          ...(c.args !== undefined ? { args: c.args } : {}),
          ...(c.seenDoneAt !== undefined
            ? { laterSeen: { status: c.status ?? '?', at: c.seenDoneAt, acknowledged: c.resolution !== undefined } }
            : {}),
        });
    }
    view.delegations.push(dv);
  }
  return view;
}
