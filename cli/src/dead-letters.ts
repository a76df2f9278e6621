/**
 * The dead-letter inbox: `bosun dlq list`, `show`, `drop` and `retry`, and the annotation of an
 * in-doubt call's entry by `bosun ack`. Entries are parsed with the contract's `DeadLetter`; one
 * that does not parse is reported naming its bad fields.
 */
import { Job, type Queue } from 'bullmq';
import {
  COORDINATOR_TIMERS_QUEUE,
  DEAD_LETTER_QUEUE,
  INCIDENTS_QUEUE,
  InDoubtDeadLetterInput,
  Incident,
  RunCheckpoint,
  parseStored,
  runCheckpointId,
  timerJobId,
  type TimerJob,
  type ToolCallResolution,
  sleep,
} from '@bosun/contract';
import { StoredDeadLetter, annotateEntry, readEntry, type DeadLetterEntry, type RetriedAs } from './dead-letter-entry.js';
import { publishIncident } from './publish.js';
import { retryDelivery } from './delivery-retry.js';
import { OperatorError, oneLine, readCheckpoint, storedProblem, withQueue, type OperatorDeps } from './operator.js';

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
  entry: DeadLetterEntry;
}

function summarize(entry: DeadLetterEntry): DeadLetterSummary {
  const marker = entry.resolution !== undefined ? 'resolved' : entry.retriedAs !== undefined ? 'retried' : undefined;
  return {
    id: entry.id,
    at: entry.at,
    kind: entry.kind,
    ...(entry.runId ? { runId: entry.runId } : {}),
    ...(entry.incidentId ? { incidentId: entry.incidentId } : {}),
    ...(entry.agent ? { agent: entry.agent } : {}),
    reason: oneLine(entry.reason),
    ...(marker ? { marker } : {}),
    entry,
  };
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

/** The time an entry sorts by: its `at`, or its job's timestamp when `at` is not a date. */
function sortTime(s: DeadLetterSummary, job: Job): number {
  const t = Date.parse(s.at);
  return Number.isNaN(t) ? job.timestamp : t;
}

/**
 * `bosun dlq list`: the dead-letter entries, newest first, optionally of one kind; and the
 * entries that do not parse, each named with its bad fields (they are not listed).
 */
export async function listDeadLetters(
  deps: OperatorDeps,
  options: { kind?: string } = {},
): Promise<{ entries: DeadLetterSummary[]; problems: string[] }> {
  return withQueue(deps, DEAD_LETTER_QUEUE, async (queue) => {
    const problems: string[] = [];
    const rows: { s: DeadLetterSummary; t: number; ts: number }[] = [];
    for (const job of await allDeadLetterJobs(queue)) {
      let s: DeadLetterSummary;
      try {
        s = summarize(readEntry(job));
      } catch (err) {
        problems.push(`${storedProblem(err)}; it is not listed (see bosun dlq show ${String(job.id)})`);
        continue;
      }
      if (!options.kind || s.kind === options.kind) rows.push({ s, t: sortTime(s, job), ts: job.timestamp });
    }
    rows.sort((a, b) => b.t - a.t || b.ts - a.ts || b.s.id.localeCompare(a.s.id));
    return { entries: rows.map((r) => r.s), problems };
  });
}

/** What `bosun dlq show` found: the entry, or what is stored and why it does not parse. */
export type ShownDeadLetter = { entry: DeadLetterEntry } | { id: string; stored: unknown; problem: string };

/** `bosun dlq show`: one entry, or null when there is none. */
export async function showDeadLetter(deps: OperatorDeps, jobId: string): Promise<ShownDeadLetter | null> {
  return withQueue(deps, DEAD_LETTER_QUEUE, async (queue) => {
    const job = await Job.fromId(queue, jobId);
    if (!job) return null;
    try {
      return { entry: readEntry(job) };
    } catch (err) {
      return { id: String(job.id), stored: job.data as unknown, problem: storedProblem(err) };
    }
  });
}

/** `bosun dlq drop`: removes one entry, whatever it holds. Throws (exit 1) when there is no such entry. */
export async function dropDeadLetter(deps: OperatorDeps, jobId: string): Promise<void> {
  await withQueue(deps, DEAD_LETTER_QUEUE, async (queue) => {
    const job = await Job.fromId(queue, jobId);
    if (!job) throw notFound(deps, jobId);
    await job.remove();
  });
}

function notFound(deps: OperatorDeps, jobId: string): OperatorError {
  return new OperatorError('not_found', `no dead-letter entry ${jobId} under BOSUN_PREFIX=${deps.prefix}`);
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
  /** Why the run's own retry was not tried, when its checkpoint could not be used. */
  note?: string;
  /** Set for a `delivery` entry: the delivery job queued again (the run is not re-run). */
  deliveryJobId?: string;
}

const INCIDENT_ID_MAX = 128;

/** `<incidentId>-retry<n>`, shortened at the front part so that it stays within 128 characters. */
export function retryIncidentId(incidentId: string, n: number): string {
  const suffix = `-retry${n}`;
  return `${incidentId.slice(0, INCIDENT_ID_MAX - suffix.length)}${suffix}`;
}

/** Refuses an entry that is not re-run from here (exit 2), saying what to do instead; returns the incident to re-run. */
function retryableIncident(entry: DeadLetterEntry): string {
  const { id, kind } = entry;
  if (kind === 'poison') {
    throw new OperatorError(
      'bad_request',
      `dead letter ${id} is poison: its input is invalid as it stands and retrying it would fail the same way. ` +
        `Fix the input (see \`bosun dlq show ${id}\`) and publish it with \`bosun publish\`.`,
    );
  }
  if (kind === 'in-doubt') {
    const key = InDoubtDeadLetterInput.safeParse(entry.input).data?.key ?? '<key>';
    throw new OperatorError(
      'bad_request',
      `dead letter ${id} is an in-doubt tool call: it is not retried from here. Check whether the call took effect, then resolve it with ` +
        `\`bosun ack ${key} --done\`, \`--skip\`, or \`bosun ack ${key} --retry\` to send it once more.`,
    );
  }
  // What is left is a stall, a timeout, a failure or a budget stop (the contract's `DeadLetterKind`): re-run (a new task, with a budget of its own).
  if (!entry.incidentId) throw new OperatorError('bad_request', `dead letter ${id} names no incident: there is nothing to re-run`);
  return entry.incidentId;
}

/**
 * `bosun dlq retry`: re-runs the work behind a `stall`, `timeout` or `failure` entry — the one
 * delegation inside its run while the run is open, else the incident as a new incident
 * `<incidentId>-retry<n>` labelled `bosunRetryOf=<entry id>` — and links the entry to it
 * (`retriedAs`). The entry stays in the queue. Poison and in-doubt entries are refused.
 */
export async function retryDeadLetter(deps: OperatorDeps, jobId: string): Promise<RetryOutcome> {
  return withQueue(deps, DEAD_LETTER_QUEUE, async (dlq) => {
    const job = await Job.fromId(dlq, jobId);
    if (!job) throw notFound(deps, jobId);
    const entry = readEntry(job);
    // An answer that did not reach its sink: delivered again, the run is not re-run.
    if (entry.kind === 'delivery') return retryDelivery(deps, job, entry);
    const originalId = retryableIncident(entry);
    // One specialist's part of a run that is still open: the coordinator delegates it again.
    const inRun = await retryInOpenRun(deps, job, entry);
    if ('outcome' in inRun) return inRun.outcome;
    const outcome = await withQueue(deps, INCIDENTS_QUEUE, (incidents) => rerunIncident({ deps, incidents, job, entry }, originalId));
    return inRun.note ? { ...outcome, note: inRun.note } : outcome;
  });
}

/** Publishes the incident of `entry` again as `<incidentId>-retry<n>`, and links the entry to it. */
async function rerunIncident(
  r: { deps: OperatorDeps; incidents: Queue; job: Job; entry: DeadLetterEntry },
  originalId: string,
): Promise<RetryOutcome> {
  const { deps, incidents, job, entry } = r;
  const original = await Job.fromId(incidents, originalId);
  // A run failure also carries the incident in `input`: use it when the job is gone.
  const source: unknown = original?.data ?? entry.input;
  if (source === undefined) {
    throw new OperatorError(
      'conflict',
      `incident ${originalId} of dead letter ${entry.id} is no longer in the incidents queue under BOSUN_PREFIX=${deps.prefix}: nothing to re-run`,
    );
  }
  const incident = parseStored(Incident, source, `incident ${originalId} of dead letter ${entry.id}`);
  for (let n = 1; n < 10_000; n++) {
    const id = retryIncidentId(originalId, n);
    if (await Job.fromId(incidents, id)) continue;
    const published = await publishIncident(incidents, { ...incident, id, labels: { ...incident.labels, bosunRetryOf: entry.id } });
    // Another operator took this id between the check and the add: try the next one.
    if (published.duplicate) continue;
    const at = new Date().toISOString();
    await annotateEntry(job, entry, { retriedAs: { incidentId: id, runId: published.runId, at } });
    return {
      deadLetterId: entry.id,
      originalIncidentId: originalId,
      incidentId: id,
      runId: published.runId,
      at,
      ...(entry.retriedAs ? { previous: entry.retriedAs } : {}),
    };
  }
  throw new OperatorError('conflict', `incident ${originalId} has been retried too often: no free retry id`);
}

/** A run's checkpoint, or null when there is none; `problem` says why one could not be used. */
async function readRun(deps: OperatorDeps, runId: string): Promise<{ run: RunCheckpoint | null; problem?: string }> {
  try {
    const raw = await readCheckpoint(deps, runCheckpointId(runId));
    return { run: raw === null ? null : parseStored(RunCheckpoint, raw, `the checkpoint of run ${runId}`) };
  } catch (err) {
    if (err instanceof OperatorError) return { run: null, problem: err.message };
    return { run: null, problem: storedProblem(err) };
  }
}

/**
 * Retries the failed delegation named by a dead letter inside its run, when the run is still
 * open (parked, waiting for other specialists): asks the coordinator (through its timers queue)
 * and waits up to 15 s for the new delegation to appear in the run's checkpoint. Without an
 * open run (or with a checkpoint that cannot be used, said in `note`) the caller re-runs the
 * incident instead.
 */
async function retryInOpenRun(
  deps: OperatorDeps,
  job: Job,
  entry: DeadLetterEntry,
): Promise<{ outcome: RetryOutcome } | { note?: string }> {
  const { runId, agent, incidentId, taskId } = entry;
  if (!runId || !agent || !incidentId) return {};
  const { run, problem } = await readRun(deps, runId);
  if (problem) return { note: `the incident is re-run, not the task inside its run, as the run's checkpoint cannot be used: ${problem}` };
  if (!run || run.result !== undefined || run.phase !== 'waiting') return {};
  // The entry names its task; the run's checkpoint may not hold its result yet (the coordinator
  // collects results when every child has finished).
  const failed = run.delegations.find(
    (d) =>
      d.taskId === taskId && d.agent === agent && d.result?.status !== 'completed' && !run.delegations.some((r) => r.retryOf === d.taskId),
  );
  if (!failed) return {};
  const timer: TimerJob = { kind: 'retry-task', runId, taskId: failed.taskId };
  await withQueue(deps, COORDINATOR_TIMERS_QUEUE, (timers) =>
    timers.add(timer.kind, timer, { jobId: timerJobId(timer), removeOnComplete: true, removeOnFail: { age: 7 * 24 * 3600 } }),
  );
  const until = Date.now() + 15_000;
  while (Date.now() < until) {
    const { run: now } = await readRun(deps, runId);
    const retry = now?.delegations.find((d) => d.retryOf === failed.taskId);
    if (retry) {
      const at = new Date().toISOString();
      await annotateEntry(job, entry, { retriedAs: { incidentId, runId, taskId: retry.taskId, at } });
      return { outcome: { deadLetterId: entry.id, originalIncidentId: incidentId, incidentId, runId, taskId: retry.taskId, at } };
    }
    if (now?.result !== undefined) return {};
    await sleep(200);
  }
  throw new OperatorError(
    'unavailable',
    `run ${runId} is open, but no coordinator took the retry of ${failed.taskId} within 15 s: is a coordinator running under BOSUN_PREFIX=${deps.prefix}?`,
  );
}

/** What {@link annotateInDoubt} did: the entry annotated (null when there is none), or why its own entry was not. */
export interface InDoubtAnnotation {
  deadLetterId: string | null;
  /** The call's own entry (`in-doubt-<key>`) does not parse: it names the bad fields. */
  problem?: string;
}

/** The entry of `job` when it is the in-doubt dead letter of call `key`; undefined otherwise, or when it does not parse. */
function inDoubtEntryOf(job: Job, key: string): DeadLetterEntry | undefined {
  const parsed = StoredDeadLetter.safeParse(job.data);
  if (!parsed.success || parsed.data.kind !== 'in-doubt') return undefined;
  return InDoubtDeadLetterInput.safeParse(parsed.data.input).data?.key === key ? { id: String(job.id), ...parsed.data } : undefined;
}

/**
 * Adds `resolution` to the in-doubt dead letter of a tool call: the gateway's `in-doubt-<key>`,
 * else any in-doubt entry of that key. When `in-doubt-<key>` does not parse, `problem` says so.
 */
export async function annotateInDoubt(deps: OperatorDeps, key: string, resolution: ToolCallResolution): Promise<InDoubtAnnotation> {
  return withQueue(deps, DEAD_LETTER_QUEUE, async (queue) => {
    let problem: string | undefined;
    let found: { job: Job; entry: DeadLetterEntry } | undefined;
    const own = await Job.fromId(queue, `in-doubt-${key}`);
    if (own) {
      try {
        readEntry(own);
      } catch (err) {
        problem = `${storedProblem(err)}: the resolution is not added to it`;
      }
      const entry = inDoubtEntryOf(own, key);
      if (entry) found = { job: own, entry };
    }
    // Look further only when the gateway's entry is not there (entries that do not parse are skipped: bosun dlq list names them).
    for (const job of found ? [] : await allDeadLetterJobs(queue)) {
      const entry = inDoubtEntryOf(job, key);
      if (entry) {
        found = { job, entry };
        break;
      }
    }
    if (!found) return { deadLetterId: null, ...(problem ? { problem } : {}) };
    await annotateEntry(found.job, found.entry, { resolution });
    return { deadLetterId: found.entry.id, ...(problem ? { problem } : {}) };
  });
}
