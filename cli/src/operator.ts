/**
 * Operator commands: the dead-letter inbox (`bosun dlq`), the state of one run (`bosun runs
 * show`), resolving in-doubt tool calls (`bosun ack`), the degraded-result counters
 * (`bosun stats`), approvals of tool calls (`bosun approvals`, `approve`, `deny`) and the audit
 * stream (`bosun audit`). Every function takes `{ redis, prefix }` and returns data; `main.ts` prints.
 */
import { Job, Queue, QueueEvents } from 'bullmq';
import { Cluster } from 'ioredis';
import type { RedisClient } from '@bosun/transport';
import {
  COORDINATOR_TIMERS_QUEUE,
  DEAD_LETTER_QUEUE,
  INCIDENTS_QUEUE,
  InvalidInputError,
  RunCheckpoint,
  TOOLS_QUEUE,
  TOOL_CALL_JOB,
  describeIssues,
  runCheckpointId,
  runCheckpointKey,
  timerJobId,
  type TimerJob,
  type ToolCallJob,
  type ToolCallRecord,
  type ToolCallResolution,
  type ToolCallResult,
} from '@bosun/contract';
import { ApprovalError, ApprovalStore, ToolCallRecords, keys, type Approval, type Decision } from '@bosun/transport';
import { publishIncident } from './publish.js';

/** What every operator command needs. */
export interface OperatorDeps {
  redis: RedisClient;
  prefix: string;
}

/** A refusal or a failure the CLI reports as is, with its exit code (1 failure/not found, 2 bad usage). */
export class OperatorError extends Error {
  readonly exitCode: 1 | 2;

  constructor(message: string, exitCode: 1 | 2 = 1) {
    super(message);
    this.name = 'OperatorError';
    this.exitCode = exitCode;
  }
}

type Data = Record<string, unknown>;

function isObject(v: unknown): v is Data {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

/** Runs `fn` with a queue opened on the shared connection, and closes it. */
async function withQueue<T>(deps: OperatorDeps, name: string, fn: (q: Queue) => Promise<T>): Promise<T> {
  const queue = new Queue(name, { connection: deps.redis, prefix: deps.prefix });
  try {
    return await fn(queue);
  } finally {
    await queue.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Dead letters

/** Who resolved an in-doubt call, and how (stored in its record and its dead letter). */
export type Resolution = ToolCallResolution;

/** What a retried dead letter was re-run as. */
export interface RetriedAs {
  incidentId: string;
  runId: string;
  /** Set when one delegation was retried inside its (still open) run. */
  taskId?: string;
  at: string;
}

/** One line of `bosun dlq list`. */
export interface DeadLetterSummary {
  id: string;
  at: string;
  kind: string;
  runId?: string;
  incidentId?: string;
  agent?: string;
  /** One line, truncated. */
  reason: string;
  /** `resolved` when the entry has a `resolution`, `retried` when it has `retriedAs`. */
  marker?: 'resolved' | 'retried';
  /** The full entry: the job data plus its id. */
  entry: Data & { id: string };
}

const REASON_MAX = 100;

/** The reason on one line, cut at {@link REASON_MAX} characters. */
export function oneLine(text: string, max = REASON_MAX): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max)}…` : flat;
}

function entryOf(job: Job): Data & { id: string } {
  const data = isObject(job.data) ? (job.data as Data) : { data: job.data as unknown };
  return { id: String(job.id), ...data };
}

function summarize(job: Job): DeadLetterSummary {
  const entry = entryOf(job);
  const marker = entry.resolution !== undefined ? 'resolved' : entry.retriedAs !== undefined ? 'retried' : undefined;
  const s: DeadLetterSummary = {
    id: entry.id,
    at: str(entry.at) ?? new Date(job.timestamp).toISOString(),
    kind: str(entry.kind) ?? job.name,
    reason: oneLine(String(entry.reason ?? '')),
    entry,
  };
  const runId = str(entry.runId);
  const incidentId = str(entry.incidentId);
  const agent = str(entry.agent);
  if (runId) s.runId = runId;
  if (incidentId) s.incidentId = incidentId;
  if (agent) s.agent = agent;
  if (marker) s.marker = marker;
  return s;
}

/** Every job of the dead-letter queue (they stay in `wait`; other states are read too, in case). */
async function allDeadLetterJobs(queue: Queue): Promise<Job[]> {
  const jobs = await queue.getJobs(['waiting', 'delayed', 'prioritized', 'active', 'failed', 'completed'], 0, -1, false);
  // getJobs may repeat a job that moved between states while it read them.
  const seen = new Set<string>();
  return jobs.filter((j): j is Job => {
    if (!j || j.id === undefined || seen.has(j.id)) return false;
    seen.add(j.id);
    return true;
  });
}

/** `bosun dlq list`: the dead-letter entries, newest first, optionally of one kind. */
export async function listDeadLetters(deps: OperatorDeps, options: { kind?: string } = {}): Promise<DeadLetterSummary[]> {
  return withQueue(deps, DEAD_LETTER_QUEUE, async (queue) => {
    const entries = (await allDeadLetterJobs(queue)).map((j) => ({ s: summarize(j), ts: j.timestamp }));
    const filtered = options.kind ? entries.filter((e) => e.s.kind === options.kind) : entries;
    filtered.sort((a, b) => {
      const ta = Date.parse(a.s.at);
      const tb = Date.parse(b.s.at);
      const ka = Number.isNaN(ta) ? a.ts : ta;
      const kb = Number.isNaN(tb) ? b.ts : tb;
      return kb - ka || b.ts - a.ts || b.s.id.localeCompare(a.s.id);
    });
    return filtered.map((e) => e.s);
  });
}

/** `bosun dlq show`: the full entry (job data plus id), or null when there is none. */
export async function showDeadLetter(deps: OperatorDeps, jobId: string): Promise<(Data & { id: string }) | null> {
  return withQueue(deps, DEAD_LETTER_QUEUE, async (queue) => {
    const job = await Job.fromId(queue, jobId);
    return job ? entryOf(job) : null;
  });
}

/** `bosun dlq drop`: removes one entry. Throws (exit 1) when there is no such entry. */
export async function dropDeadLetter(deps: OperatorDeps, jobId: string): Promise<void> {
  await withQueue(deps, DEAD_LETTER_QUEUE, async (queue) => {
    const job = await Job.fromId(queue, jobId);
    if (!job) throw new OperatorError(`no dead-letter entry ${jobId} under BOSUN_PREFIX=${deps.prefix}`, 1);
    await job.remove();
  });
}

/** What {@link retryDeadLetter} did. */
export interface RetryOutcome {
  deadLetterId: string;
  /** The incident that was re-run. */
  originalIncidentId: string;
  incidentId: string;
  runId: string;
  /** Set when one delegation was retried inside its open run rather than the incident re-run. */
  taskId?: string;
  at: string;
  /** Earlier retries of the same entry, when there were any (the last one). */
  previous?: RetriedAs;
}

const INCIDENT_ID_MAX = 128;

/** `<incidentId>-retry<n>`, shortened at the front part so that it stays within 128 characters. */
export function retryIncidentId(incidentId: string, n: number): string {
  const suffix = `-retry${n}`;
  return `${incidentId.slice(0, INCIDENT_ID_MAX - suffix.length)}${suffix}`;
}

/**
 * `bosun dlq retry`: re-runs the incident behind a `stall`, `timeout` or `failure` entry as a
 * new incident `<incidentId>-retry<n>` labelled `bosunRetryOf=<entry id>`, and links the entry
 * to it (`retriedAs`). The entry stays in the queue. Poison and in-doubt entries are refused.
 */
export async function retryDeadLetter(deps: OperatorDeps, jobId: string): Promise<RetryOutcome> {
  const dlq = new Queue(DEAD_LETTER_QUEUE, { connection: deps.redis, prefix: deps.prefix });
  const incidents = new Queue(INCIDENTS_QUEUE, { connection: deps.redis, prefix: deps.prefix });
  try {
    const job = await Job.fromId(dlq, jobId);
    if (!job) throw new OperatorError(`no dead-letter entry ${jobId} under BOSUN_PREFIX=${deps.prefix}`, 1);
    const data = entryOf(job);
    const kind = str(data.kind) ?? job.name;
    if (kind === 'poison') {
      throw new OperatorError(
        `dead letter ${jobId} is poison: its input is invalid as it stands and retrying it would fail the same way. ` +
          'Fix the input (see `bosun dlq show ' +
          jobId +
          '`) and publish it with `bosun publish`.',
        2,
      );
    }
    if (kind === 'in-doubt') {
      const input = isObject(data.input) ? data.input : {};
      const key = str(input.key) ?? '<key>';
      throw new OperatorError(
        `dead letter ${jobId} is an in-doubt tool call: it is not retried from here. Check whether the call took effect, then resolve it with ` +
          `\`bosun ack ${key} --done\`, \`--skip\`, or \`bosun ack ${key} --retry\` to send it once more.`,
        2,
      );
    }
    if (kind !== 'stall' && kind !== 'timeout' && kind !== 'failure') {
      throw new OperatorError(`dead letter ${jobId} is of kind "${kind}", which cannot be retried`, 2);
    }
    const originalId = str(data.incidentId);
    if (!originalId) throw new OperatorError(`dead letter ${jobId} names no incident: there is nothing to re-run`, 2);

    // One specialist's part of a run that is still open: the coordinator delegates it again.
    const inRun = await retryInOpenRun(deps, data, jobId, job);
    if (inRun) return inRun;

    const original = await Job.fromId(incidents, originalId);
    // A run failure also carries the incident in `input`: use it when the job is gone.
    const source: unknown = original?.data ?? data.input;
    if (!isObject(source)) {
      throw new OperatorError(
        `incident ${originalId} of dead letter ${jobId} is no longer in the incidents queue under BOSUN_PREFIX=${deps.prefix}: nothing to re-run`,
        1,
      );
    }
    const labels = isObject(source.labels) ? source.labels : {};
    for (let n = 1; n < 10_000; n++) {
      const id = retryIncidentId(originalId, n);
      if (await Job.fromId(incidents, id)) continue;
      const published = await publishIncident(incidents, { ...source, id, labels: { ...labels, bosunRetryOf: jobId } });
      // Another operator took this id between the check and the add: try the next one.
      if (published.duplicate) continue;
      const at = new Date().toISOString();
      const retriedAs: RetriedAs = { incidentId: id, runId: published.runId, at };
      const previous = isObject(data.retriedAs) ? (data.retriedAs as unknown as RetriedAs) : undefined;
      const { id: _id, ...stored } = data;
      await job.updateData({ ...stored, retriedAs });
      return {
        deadLetterId: jobId,
        originalIncidentId: originalId,
        incidentId: id,
        runId: published.runId,
        at,
        ...(previous ? { previous } : {}),
      };
    }
    throw new OperatorError(`incident ${originalId} has been retried too often: no free retry id`, 1);
  } finally {
    await Promise.all([dlq.close(), incidents.close()]);
  }
}

/**
 * Retries the failed delegation named by a dead letter inside its run, when the run is still
 * open (parked, waiting for other specialists): asks the coordinator (through its timers queue)
 * and waits up to 15 s for the new delegation to appear in the run's checkpoint. Returns null
 * when the run is closed, so the caller re-runs the incident instead.
 */
async function retryInOpenRun(deps: OperatorDeps, data: Data, jobId: string, job: Job): Promise<RetryOutcome | null> {
  const runId = str(data.runId);
  const agent = str(data.agent);
  const incidentId = str(data.incidentId);
  if (!runId || !agent || !incidentId) return null;
  const readRun = async (): Promise<RunCheckpoint | null> => {
    const raw = await deps.redis.get(runCheckpointKey(deps.prefix, runId));
    if (raw === null) return null;
    try {
      const parsed = RunCheckpoint.safeParse(JSON.parse(raw));
      return parsed.success ? parsed.data : null;
    } catch {
      // Not JSON: no open run to retry in (the incident is re-run instead).
      return null;
    }
  };
  const run = await readRun();
  if (!run || run.result !== undefined || run.phase !== 'waiting') return null;
  // The entry names its task; the run's checkpoint may not hold its result yet (the coordinator
  // collects results when every child has finished).
  const taskId = str(data.taskId);
  const failed = run.delegations.find(
    (d) =>
      d.taskId === taskId && d.agent === agent && d.result?.status !== 'completed' && !run.delegations.some((r) => r.retryOf === d.taskId),
  );
  if (!failed) return null;
  const timer: TimerJob = { kind: 'retry-task', runId, taskId: failed.taskId };
  await withQueue(deps, COORDINATOR_TIMERS_QUEUE, (timers) =>
    timers.add(timer.kind, timer, { jobId: timerJobId(timer), removeOnComplete: true, removeOnFail: { age: 7 * 24 * 3600 } }),
  );
  const until = Date.now() + 15_000;
  while (Date.now() < until) {
    const now = await readRun();
    const retry = now?.delegations.find((d) => d.retryOf === failed.taskId);
    if (retry) {
      const at = new Date().toISOString();
      const retriedAs: RetriedAs = { incidentId, runId, taskId: retry.taskId, at };
      const { id: _id, ...stored } = data;
      await job.updateData({ ...stored, retriedAs });
      return { deadLetterId: jobId, originalIncidentId: incidentId, incidentId, runId, taskId: retry.taskId, at };
    }
    if (now?.result !== undefined) return null;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new OperatorError(
    `run ${runId} is open, but no coordinator took the retry of ${failed.taskId} within 15 s: is a coordinator running under BOSUN_PREFIX=${deps.prefix}?`,
    1,
  );
}

/** Adds `resolution` to the in-doubt dead letter of a tool call. Returns its id, or null when there is none. */
async function annotateInDoubt(deps: OperatorDeps, key: string, resolution: Resolution): Promise<string | null> {
  return withQueue(deps, DEAD_LETTER_QUEUE, async (queue) => {
    const matches = (job: Job | undefined | null): job is Job =>
      !!job &&
      (str((job.data as Data | undefined)?.kind) ?? job.name) === 'in-doubt' &&
      isObject((job.data as Data).input) &&
      ((job.data as Data).input as Data).key === key;
    // The gateway writes it as `in-doubt-<key>`; look further only when that one is not there.
    let job: Job | undefined = await Job.fromId(queue, `in-doubt-${key}`);
    if (!matches(job)) job = (await allDeadLetterJobs(queue)).find(matches);
    if (!job) return null;
    await job.updateData({ ...(job.data as Data), resolution });
    return String(job.id);
  });
}

// ---------------------------------------------------------------------------------------------
// Runs

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
  resolution?: unknown;
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
  /** Every call of the run in state `in-doubt`. */
  inDoubt: { key: string; agent: string; tool?: string; args?: unknown }[];
  /** Checkpoints that could not be read (the CLI exits 1 when there are any). */
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

function parseJson(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

function toolCallView(key: string, record: Record<string, string>): ToolCallView {
  const v: ToolCallView = { key, state: record.state ?? '(none)' };
  if (record.tool) v.tool = record.tool;
  if (record.args !== undefined) v.args = parseJson(record.args);
  if (record.startedAt) v.startedAt = record.startedAt;
  if (record.readOnly !== undefined) v.readOnly = record.readOnly === 'true';
  const result = parseJson(record.result);
  if (isObject(result)) {
    if (typeof result.status === 'string') v.status = result.status;
    if (typeof result.isError === 'boolean') v.isError = result.isError;
    if (typeof result.error === 'string') v.error = result.error;
    if (!v.tool && typeof result.tool === 'string') v.tool = result.tool;
  }
  if (record.resolution !== undefined) v.resolution = parseJson(record.resolution);
  return v;
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

/** The tool calls of one task, found by SCAN over `<prefix>:toolcall:<taskId>-*`. */
async function toolCallsOf(deps: OperatorDeps, taskId: string): Promise<ToolCallView[]> {
  const base = keys.toolCall(deps.prefix, '');
  const found = await scanKeys(deps.redis, `${escapeGlob(keys.toolCall(deps.prefix, taskId))}-*`);
  const own = found
    .map((k) => k.slice(base.length))
    .filter((k) => k.startsWith(`${taskId}-`) && /^-s\d+-c\d+$/.test(k.slice(taskId.length)));
  const views: ToolCallView[] = [];
  for (const key of own) {
    const record = await deps.redis.hgetall(keys.toolCall(deps.prefix, key));
    if (Object.keys(record).length > 0) views.push(toolCallView(key, record));
  }
  return views.sort(callOrder(taskId));
}

/** Reads a checkpoint: null when absent; throws {@link OperatorError} naming the key when it is not JSON. */
async function readCheckpoint(deps: OperatorDeps, id: string): Promise<unknown> {
  const key = keys.checkpoint(deps.prefix, id);
  const text = await deps.redis.get(key);
  if (text === null) return null;
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new OperatorError(`checkpoint ${key} is not valid JSON (${(err as Error).message}); it cannot be shown`, 1);
  }
}

/** `bosun runs show`: a run's state from its checkpoints and tool-call records. */
export async function showRun(deps: OperatorDeps, runId: string): Promise<RunView> {
  const runKey = runCheckpointKey(deps.prefix, runId);
  const raw = await readCheckpoint(deps, runCheckpointId(runId));
  if (raw === null) throw new OperatorError(`no run ${runId} under BOSUN_PREFIX=${deps.prefix}`, 1);
  const parsed = RunCheckpoint.safeParse(raw);
  if (!parsed.success) {
    throw new OperatorError(`checkpoint ${runKey} is not a run checkpoint: ${describeIssues(parsed.error).issues.join('; ')}`, 1);
  }
  const run = parsed.data;
  const view: RunView = { runId, delegations: [], inDoubt: [], problems: [] };
  for (const f of ['incidentId', 'mode', 'phase', 'startedAt', 'deadlineAt', 'jobId'] as const) view[f] = run[f];
  view.round = run.round;
  if (isObject(run.result) && typeof run.result.status === 'string') view.status = run.result.status;

  for (const d of run.delegations) {
    const taskId = d.taskId;
    const dv: DelegationView = { taskId, agent: d.agent, status: 'queued', toolCalls: [] };
    dv.round = d.round;
    dv.task = d.task;
    if (d.deadlineAt !== undefined) dv.deadlineAt = d.deadlineAt;

    let task: unknown = null;
    try {
      task = await readCheckpoint(deps, `task:${taskId}`);
    } catch (err) {
      dv.checkpointError = (err as Error).message;
      view.problems.push((err as Error).message);
    }
    const result = d.result;
    if (isObject(task)) {
      if (typeof task.step === 'number') dv.step = task.step;
      if (typeof task.toolRounds === 'number') dv.toolRounds = task.toolRounds;
      if (isObject(task.pending)) {
        const p = task.pending;
        dv.pending = { kind: str(p.kind) ?? '?' };
        if (typeof p.step === 'number') dv.pending.step = p.step;
        if (Array.isArray(p.keys)) dv.pending.keys = p.keys.filter((k): k is string => typeof k === 'string');
        if (typeof p.at === 'string') dv.pending.at = p.at;
      }
    }
    const taskResult = isObject(task) && isObject(task.result) ? task.result : undefined;
    dv.status = str(result?.status) ?? str(taskResult?.status) ?? (dv.checkpointError ? 'unknown' : task !== null ? 'running' : 'queued');
    dv.toolCalls = await toolCallsOf(deps, taskId);
    for (const c of dv.toolCalls) {
      if (c.state === 'in-doubt')
        view.inDoubt.push({
          key: c.key,
          agent: dv.agent,
          ...(c.tool ? { tool: c.tool } : {}),
          ...(c.args !== undefined ? { args: c.args } : {}),
        });
    }
    view.delegations.push(dv);
  }
  return view;
}

/** The text of `bosun runs show`. */
export function formatRun(view: RunView): string {
  const lines: string[] = [];
  lines.push(`run ${view.runId}${view.incidentId ? ` (incident ${view.incidentId})` : ''}`);
  lines.push(
    `  phase:     ${view.phase ?? '?'}${view.mode ? ` (${view.mode} mode${view.round !== undefined ? `, round ${view.round}` : ''})` : ''}`,
  );
  if (view.status) lines.push(`  status:    ${view.status}`);
  lines.push(`  started:   ${view.startedAt ?? '?'}`);
  lines.push(`  deadline:  ${view.deadlineAt ?? '?'}`);
  lines.push('');
  if (view.delegations.length === 0) lines.push('no delegations yet');
  for (const d of view.delegations) {
    const progress = [d.step !== undefined ? `step ${d.step}` : '', d.toolRounds !== undefined ? `${d.toolRounds} tool rounds` : '']
      .filter(Boolean)
      .join(', ');
    lines.push(`${d.agent.padEnd(14)} ${d.status.padEnd(10)} ${d.taskId}${progress ? `  (${progress})` : ''}`);
    if (d.checkpointError) lines.push(`    ! ${d.checkpointError}`);
    if (d.pending) {
      const at = d.pending.step !== undefined ? ` at step ${d.pending.step}` : '';
      // Saved before the round went out, and not again until the next effect: the records below
      // say how far its calls got.
      if (d.pending.kind === 'tools')
        lines.push(`    last saved before tool calls${at}: ${(d.pending.keys ?? []).join(', ') || '(no keys)'}`);
      else if (d.pending.kind === 'model') lines.push(`    pending: model call${at}`);
      else lines.push(`    pending: ${d.pending.kind}${at}`);
    }
    for (const c of d.toolCalls) {
      const outcome = c.status ? ` ${c.status}${c.isError ? ' (tool error)' : ''}` : '';
      lines.push(`    ${c.state.padEnd(9)} ${c.key}  ${c.tool ?? '?'}${outcome}${c.error ? `: ${oneLine(c.error, 80)}` : ''}`);
    }
  }
  lines.push('');
  if (view.inDoubt.length === 0) lines.push('in doubt: none');
  else {
    lines.push(`in doubt (${view.inDoubt.length}): resolve each with bosun ack <key> --done|--retry|--skip`);
    for (const c of view.inDoubt) lines.push(`  ${c.key}  ${c.tool ?? '?'} ${JSON.stringify(c.args ?? {})}`);
  }
  return lines.join('\n');
}

// ---------------------------------------------------------------------------------------------
// ack

export type AckAction = ToolCallResolution['action'];

/** What {@link ackToolCall} did. */
export interface AckOutcome {
  key: string;
  action: AckAction;
  resolution: Resolution;
  /** The result recorded (done, skip) or returned by the re-sent call (retry). */
  result: ToolCallResult;
  /** The tool job of a retry. */
  jobId?: string;
  /** The in-doubt dead letter annotated, or null when there was none. */
  deadLetterId: string | null;
}

/**
 * `bosun ack`: resolves an in-doubt tool call. `done`: it took effect; `skip`: treat it as not
 * executed; `retry`: send it once more through the gateway and wait (up to `timeoutMs`) for its
 * result. The in-doubt dead letter of the call gets the `resolution`. The record changes only
 * through `ToolCallRecords` (libs/transport), whose scripts check that it is still in doubt.
 */
export async function ackToolCall(
  deps: OperatorDeps,
  key: string,
  action: AckAction,
  options: { by: string; timeoutMs?: number },
): Promise<AckOutcome> {
  const records = new ToolCallRecords(deps);
  // A record that does not parse is a failure to report (exit 1), not bad usage.
  const record = await records.read(key).catch((err: unknown) => {
    throw err instanceof InvalidInputError ? new OperatorError(err.message, 1) : err;
  });
  if (!record) throw new OperatorError(`no tool call ${key} under BOSUN_PREFIX=${deps.prefix}`, 1);
  if (record.state !== 'in-doubt') throw notInDoubt(key, record.state);
  const at = new Date().toISOString();
  if (action === 'retry')
    return retryToolCall(deps, { key, record, resolution: { action, by: options.by, at }, timeoutMs: options.timeoutMs });
  const resolution = { action, by: options.by, at };
  const { changed, was, result } = await records.resolve(key, resolution, record.tool ?? '');
  if (!changed) throw notInDoubt(key, was);
  const deadLetterId = await annotateInDoubt(deps, key, resolution);
  return { key, action, resolution, result, deadLetterId };
}

function notInDoubt(key: string, state: string | null): OperatorError {
  return new OperatorError(`tool call ${key} is not in doubt: its state is "${state ?? '(none)'}"`, 1);
}

/** The tool job that sends an in-doubt call once more, from its record (and the real arguments, when the record's are redacted). */
async function retryJob(deps: OperatorDeps, key: string, record: ToolCallRecord): Promise<ToolCallJob> {
  // Everything the tool job needs must be in the record before the state changes.
  const args = record.argsRedacted === true ? await realArgs(deps, key, record) : record.args;
  const missing = (['tool', 'runId', 'incidentId', 'agent'] as const).filter((f) => !record[f]);
  if (missing.length > 0 || !args) {
    throw new OperatorError(
      `tool call ${key} cannot be re-sent: its record lacks ${[...missing, ...(args ? [] : ['args'])].join(', ')}`,
      1,
    );
  }
  // A call that needed approval is re-sent under the same approval: the gateway checks it again.
  return {
    v: 1,
    key,
    runId: record.runId!,
    incidentId: record.incidentId!,
    agent: record.agent!,
    tool: record.tool!,
    args,
    ...(record.approvalId ? { approvalId: record.approvalId } : {}),
  };
}

/** `bosun ack --retry`: marks the call `retry`, adds its tool job `<key>-ack<n>` and waits for the result. */
async function retryToolCall(
  deps: OperatorDeps,
  r: { key: string; record: ToolCallRecord; resolution: Resolution & { action: 'retry' }; timeoutMs: number | undefined },
): Promise<AckOutcome> {
  const { key, resolution } = r;
  const call = await retryJob(deps, key, r.record);
  const records = new ToolCallRecords(deps);
  const queue = new Queue(TOOLS_QUEUE, { connection: deps.redis, prefix: deps.prefix });
  const eventsConnection = deps.redis.duplicate();
  eventsConnection.on('error', () => undefined);
  const events = new QueueEvents(TOOLS_QUEUE, { connection: eventsConnection, prefix: deps.prefix });
  try {
    // Listen before adding, so the completion cannot be missed.
    await events.waitUntilReady();
    const marked = await records.markRetry(key, resolution);
    if (!marked.changed) throw notInDoubt(key, marked.was);
    const job = await addRetryJob(queue, records, call);
    const deadLetterId = await annotateInDoubt(deps, key, resolution);
    let value: unknown;
    try {
      value = await job.waitUntilFinished(events, r.timeoutMs ?? 120_000);
    } catch (err) {
      throw new OperatorError(
        `tool call ${key} was re-sent as job ${String(job.id)}, but ${(err as Error).message}. ` +
          `Its record is in state "retry"; the gateway runs it once when it picks the job up (see bosun runs show ${call.runId}).`,
        1,
      );
    }
    return { key, action: 'retry', resolution, result: value as ToolCallResult, jobId: String(job.id), deadLetterId };
  } finally {
    await events.close().catch(() => undefined);
    eventsConnection.disconnect();
    await queue.close();
  }
}

/**
 * Adds the retry's tool job. Only this ack moved the record out of `in-doubt` (the script is
 * atomic), so no other ack adds a job for this key now: the first unused `-ack<n>` id is ours.
 * When the job cannot be added, nothing was sent: the call is put back in doubt, to be resolved again.
 */
async function addRetryJob(queue: Queue, records: ToolCallRecords, call: ToolCallJob): Promise<Job> {
  try {
    let n = 1;
    while (await Job.fromId(queue, `${call.key}-ack${n}`)) n++;
    return await queue.add(TOOL_CALL_JOB, call, {
      jobId: `${call.key}-ack${n}`,
      removeOnComplete: { age: 7 * 24 * 3600 },
      removeOnFail: { age: 7 * 24 * 3600 },
    });
  } catch (err) {
    await records.undoRetry(call.key);
    throw err;
  }
}

/**
 * The real arguments of a call whose record shows them with secrets redacted: from its task's
 * checkpoint, where the model's turn is kept as proposed. A call with no task checkpoint (made
 * through the gateway's MCP face) cannot be re-sent from here.
 */
async function realArgs(deps: OperatorDeps, key: string, record: ToolCallRecord): Promise<Record<string, unknown>> {
  const { TaskCheckpoint, toolCallAtKey } = await import('@bosun/agent');
  const { canonicalJson, redactSecrets } = await import('@bosun/contract');
  const taskId = /^(.+)-s\d+-c\d+$/.exec(key)?.[1];
  const ckptId = `task:${taskId ?? ''}`;
  const ckpt = taskId ? TaskCheckpoint.parse(await readCheckpoint(deps, ckptId), ckptId) : null;
  const found = ckpt ? toolCallAtKey(ckpt, key) : undefined;
  // The checkpoint's call must be the recorded one: same tool, same arguments once redacted.
  if (!found || found.tool !== record.tool || canonicalJson(redactSecrets(found.args)) !== canonicalJson(record.args)) {
    throw new OperatorError(
      `tool call ${key} cannot be re-sent: its arguments hold secrets, which Bosun shows and stores redacted, and ` +
        `${ckpt ? `the task checkpoint ${ckptId} has no matching call` : 'no task checkpoint keeps them (a call through the gateway MCP face, or an expired run)'}. ` +
        'Resolve it with --done or --skip, and make the call again yourself if it is still needed.',
      1,
    );
  }
  return found.args;
}

// ---------------------------------------------------------------------------------------------
// stats

/** `bosun stats`. */
export interface Stats {
  /** Degraded results per agent and kind, most first. */
  degraded: { agent: string; kind: string; count: number }[];
  /** Events dropped (NATS unreachable with a full buffer, or sequencing failed). */
  dropped: number;
}

export async function readStats(deps: OperatorDeps): Promise<Stats> {
  const [raw, dropped] = await Promise.all([
    deps.redis.hgetall(keys.degraded(deps.prefix)),
    deps.redis.hget(keys.events(deps.prefix), 'dropped'),
  ]);
  const degraded = Object.entries(raw).map(([field, count]) => {
    const i = field.lastIndexOf(':');
    return { agent: i < 0 ? field : field.slice(0, i), kind: i < 0 ? '?' : field.slice(i + 1), count: Number(count) };
  });
  degraded.sort((a, b) => b.count - a.count || a.agent.localeCompare(b.agent) || a.kind.localeCompare(b.kind));
  return { degraded, dropped: Number(dropped ?? 0) };
}

export function formatStats(stats: Stats): string {
  const lines = ['degraded results'];
  if (stats.degraded.length === 0) lines.push('  none');
  else {
    const w = Math.max(5, ...stats.degraded.map((d) => d.agent.length));
    lines.push(`  ${'agent'.padEnd(w)}  ${'kind'.padEnd(9)} count`);
    for (const d of stats.degraded) lines.push(`  ${d.agent.padEnd(w)}  ${d.kind.padEnd(9)} ${d.count}`);
  }
  lines.push('', `events dropped: ${stats.dropped}`);
  return lines.join('\n');
}

/** The text of `bosun dlq list`. */
export function formatDeadLetters(entries: DeadLetterSummary[]): string {
  if (entries.length === 0) return 'dead-letter queue is empty';
  const w = Math.max(2, ...entries.map((e) => e.id.length));
  const lines = [
    `${'id'.padEnd(w)}  ${'at'.padEnd(24)} ${'kind'.padEnd(9)} ${'run'.padEnd(21)} ${'agent'.padEnd(12)} ${'mark'.padEnd(8)} reason`,
  ];
  for (const e of entries) {
    lines.push(
      `${e.id.padEnd(w)}  ${e.at.padEnd(24)} ${e.kind.padEnd(9)} ${(e.runId ?? '-').padEnd(21)} ${(e.agent ?? '-').padEnd(12)} ${(e.marker ?? '-').padEnd(8)} ${e.reason}`,
    );
  }
  return lines.join('\n');
}

// ---------------------------------------------------------------------------------------------
// approvals

/** Runs `fn` with an approval store on the shared connection, and closes it. */
async function withApprovals<T>(deps: OperatorDeps, fn: (store: ApprovalStore) => Promise<T>): Promise<T> {
  const store = new ApprovalStore({ redis: deps.redis, prefix: deps.prefix });
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

/** `bosun approvals list`: the pending approvals, oldest first. */
export async function listApprovals(deps: OperatorDeps): Promise<Approval[]> {
  return withApprovals(deps, (store) => store.pending());
}

/** `bosun approvals show`: one approval, or null when there is none. */
export async function showApproval(deps: OperatorDeps, id: string): Promise<Approval | null> {
  return withApprovals(deps, (store) => store.get(id));
}

/**
 * `bosun approve` / `bosun deny`: decides a pending approval, once, and wakes the parked task.
 * Refusals become {@link OperatorError}s: no such approval or already decided (exit 1), a
 * decision the approval does not allow, such as `--only` naming calls that need no approval (exit 2).
 * Publishing `approval.resolved` is the caller's part (see {@link approvalResolvedEvent}).
 */
export async function decideApproval(deps: OperatorDeps, id: string, decision: Decision): Promise<Approval> {
  return withApprovals(deps, async (store) => {
    try {
      return await store.decide(id, decision);
    } catch (err) {
      if (!(err instanceof ApprovalError)) throw err;
      if (err.code === 'not_found') throw new OperatorError(`no approval ${id} under BOSUN_PREFIX=${deps.prefix}`, 1);
      throw new OperatorError(err.message, err.code === 'bad_request' ? 2 : 1);
    }
  });
}

/** `1h02m`, `3m05s`, `12s`. */
export function formatAge(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(s % 60).padStart(2, '0')}s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h${String(m % 60).padStart(2, '0')}m`;
  return `${Math.floor(h / 24)}d${String(h % 24).padStart(2, '0')}h`;
}

const ARGS_MAX = 200;

/** The text of `bosun approvals list`. */
export function formatApprovals(approvals: Approval[], now = Date.now()): string {
  if (approvals.length === 0) return 'no pending approvals';
  const lines: string[] = [];
  for (const a of approvals) {
    const age = formatAge(now - Date.parse(a.createdAt));
    lines.push(`${a.id}  age ${age}  run ${a.runId}  agent ${a.agent}  times out ${a.timeoutAt}`);
    lines.push(`    reason: ${oneLine(a.reason || '(none given)', 300)}`);
    for (const c of a.calls) {
      lines.push(`    [${c.index}] ${c.tool} ${oneLine(JSON.stringify(c.args), ARGS_MAX)}${c.needsApproval ? '   <- needs approval' : ''}`);
    }
    lines.push('');
  }
  const ask = approvals.reduce((n, a) => n + a.calls.filter((c) => c.needsApproval).length, 0);
  lines.push(`${approvals.length} pending (${ask} calls need approval): bosun approve <id> [--only i,j] | bosun deny <id> --reason "…"`);
  return lines.join('\n');
}

// ---------------------------------------------------------------------------------------------
// audit

/** One entry of the audit stream. */
export interface AuditEntry {
  /** The stream entry id. */
  id: string;
  at: string;
  key: string;
  runId: string;
  incidentId: string;
  agent: string;
  tool: string;
  /** The arguments as recorded (secrets redacted by the gateway). */
  args: unknown;
  approvalId: string | null;
  approver: string | null;
  status: string;
}

function auditEntry(id: string, flat: string[]): AuditEntry {
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) f[flat[i]!] = flat[i + 1]!;
  return {
    id,
    at: f.at ?? '',
    key: f.key ?? '',
    runId: f.runId ?? '',
    incidentId: f.incidentId ?? '',
    agent: f.agent ?? '',
    tool: f.tool ?? '',
    args: parseJson(f.args),
    approvalId: f.approvalId ? f.approvalId : null,
    approver: f.approver ? f.approver : null,
    status: f.status ?? '',
  };
}

const AUDIT_PAGE = 500;

/** `bosun audit`: the newest `limit` entries of the audit stream, optionally of one run. */
export async function readAudit(deps: OperatorDeps, options: { runId?: string; limit?: number } = {}): Promise<AuditEntry[]> {
  const limit = options.limit ?? 50;
  const key = keys.audit(deps.prefix);
  const out: AuditEntry[] = [];
  let end = '+';
  // Newest first, page by page, until enough entries match (a filter may skip many).
  while (out.length < limit) {
    const count = options.runId ? AUDIT_PAGE : limit - out.length;
    const page = (await deps.redis.xrevrange(key, end, '-', 'COUNT', count)) as [string, string[]][];
    for (const [id, flat] of page) {
      const e = auditEntry(id, flat);
      if (options.runId && e.runId !== options.runId) continue;
      out.push(e);
      if (out.length >= limit) break;
    }
    if (page.length < count) break;
    end = `(${page[page.length - 1]![0]}`;
  }
  return out;
}

/** The text of `bosun audit`. */
export function formatAudit(entries: AuditEntry[]): string {
  if (entries.length === 0) return 'no audit entries';
  const w = (f: (e: AuditEntry) => string, min: number) => Math.max(min, ...entries.map((e) => f(e).length));
  const wRun = w((e) => e.runId, 3);
  const wAgent = w((e) => e.agent, 5);
  const wTool = w((e) => e.tool, 4);
  const wApproval = w((e) => (e.approvalId ? `${e.approvalId} (${e.approver ?? '?'})` : '-'), 8);
  const lines = [
    `${'at'.padEnd(24)} ${'status'.padEnd(10)} ${'run'.padEnd(wRun)} ${'agent'.padEnd(wAgent)} ${'tool'.padEnd(wTool)} ${'approval'.padEnd(wApproval)} args`,
  ];
  for (const e of entries) {
    const approval = e.approvalId ? `${e.approvalId} (${e.approver ?? '?'})` : '-';
    const args = typeof e.args === 'string' ? e.args : JSON.stringify(e.args ?? {});
    lines.push(
      `${e.at.padEnd(24)} ${e.status.padEnd(10)} ${e.runId.padEnd(wRun)} ${e.agent.padEnd(wAgent)} ${e.tool.padEnd(wTool)} ${approval.padEnd(wApproval)} ${oneLine(args, 120)}`,
    );
  }
  return lines.join('\n');
}
