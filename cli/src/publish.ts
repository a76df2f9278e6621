import { readFileSync } from 'node:fs';
import { Job, Queue } from 'bullmq';
import {
  DEAD_LETTER_QUEUE,
  INCIDENT_JOB,
  Incident,
  InvalidInputError,
  parseWith,
  runIdFor,
  type IncidentInput,
  errorMessage,
  sleep,
} from '@bosun/contract';
import { keys, type RedisClient } from '@bosun/transport';
import { UsageError } from './args.js';
import { CliError } from './errors.js';
import { annotateEntry, readEntry, type DeadLetterEntry } from './dead-letter-entry.js';
import { storedProblem } from './operator.js';
import { escapeControl, reportProblems } from './terminal.js';

/**
 * Reads an incident for `bosun publish` from a file, or standard input (`-`), as JSON. A file that
 * cannot be read is a {@link UsageError} naming it (exit 2); text that is not JSON an
 * {@link InvalidInputError}.
 */
export function readIncident(path: string): unknown {
  let text: string;
  try {
    text = path === '-' ? readFileSync(0, 'utf8') : readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT'
        ? 'no such file'
        : code === 'EISDIR'
          ? 'it is a directory'
          : code === 'EACCES'
            ? 'permission denied'
            : errorMessage(err);
    throw new UsageError(`publish: cannot read ${path === '-' ? 'standard input' : `"${path}"`}: ${why}`, { showUsage: false });
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new InvalidInputError('incident', [`not valid JSON: ${errorMessage(err)}`], ['(root)']);
  }
}

/** What {@link publishIncident} reports. */
export interface Published {
  incidentId: string;
  runId: string;
  /** The creation time of the job that stands (the run id is made from it). */
  jobTimestamp: number;
  /** True when a job with this incident id already existed: it runs once. */
  duplicate: boolean;
  /**
   * Set (with `duplicate`) when the job that was there was gone right after: a publisher was
   * replacing it. `runId` is then not a stored run's; publish again to learn it.
   */
  vanished?: boolean;
}

/**
 * Validates an incident (throwing an error that names each bad field) and adds it to the
 * `incidents` queue with its id as the job id.
 */
export async function publishIncident(queue: Queue, input: unknown): Promise<Published> {
  const incident: IncidentInput = parseWith(Incident, input, 'incident');
  const added = await queue.add(INCIDENT_JOB, incident, { jobId: incident.id, removeOnComplete: false, removeOnFail: false });
  // When the id already existed, BullMQ kept the old job: read back the stored one. A job gone by
  // now was another one (ours would still be there), removed since by a publisher replacing it.
  const stored = await Job.fromId(queue, incident.id);
  if (!stored)
    return {
      incidentId: incident.id,
      runId: runIdFor(incident.id, added.timestamp),
      jobTimestamp: added.timestamp,
      duplicate: true,
      vanished: true,
    };
  return {
    incidentId: incident.id,
    runId: runIdFor(incident.id, stored.timestamp),
    jobTimestamp: stored.timestamp,
    duplicate: stored.timestamp !== added.timestamp,
  };
}

/** What {@link publishOrReplace} did. */
export interface PublishOutcome extends Published {
  /** For a duplicate: the BullMQ state of the job that stays. */
  state?: string;
  /**
   * Set when the job of this id had been rejected as poison and this incident replaced it;
   * `linkProblem` when its dead letter does not parse, and so was not linked to the new run.
   */
  replaced?: { runId: string; reason: string; deadLetterId: string; linkProblem?: string };
  /** Set when the job of this id failed for another reason: nothing was published. */
  failed?: { reason: string };
}

/** How long a publisher that lost the race to replace a rejected job waits for the winner's job. */
const REPLACE_WAIT_MS = 10_000;
/** How long the replacement marker `<prefix>:republish:<jobId>` lives. */
const REPLACE_MARK_S = 60;

/**
 * Takes the replacement of the rejected job of timestamp `ts` (ARGV[1]): returns -1, taking
 * nothing, when the job of this id (KEYS[2]) is no longer that one (a racer replaced it since it
 * was read); 0 when the marker (KEYS[1]) already holds `ts` (a racer is replacing that very job);
 * else sets the marker to `ts` and returns 1. A marker of another value is an earlier
 * replacement's, and is taken over. Checking the job here, in the same step, is what keeps a
 * publisher that read the rejected job before a racer replaced it from removing the replacement.
 */
const TAKE_REPLACEMENT = `if redis.call('HGET', KEYS[2], 'timestamp') ~= ARGV[1] then return -1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return 1`;

/**
 * `bosun publish`: publishes an incident, once per id — except that an incident whose job was
 * rejected as poison (its input did not parse) is replaced by the new one, since fixing the input
 * and publishing it again is what an operator is told to do.
 *
 * A job counts as rejected when it is `failed` and the coordinator's poison dead letter for that
 * very job exists: `poison-<jobId>-<jobTimestamp>`, or its dedupe marker
 * `<prefix>:dlq:seen:poison-<jobId>-<jobTimestamp>` (kept 30 days, so an operator who dropped the
 * entry can still republish). Both are written by the coordinator for that job instance before it
 * fails it, so no error message is parsed.
 *
 * Of several publishers replacing the same rejected job, one wins: the one that sets the marker
 * `<prefix>:republish:<jobId>` to the rejected job's timestamp. It removes the job, adds its own,
 * sets the marker to `done:<timestamp of the job that stands>`, and reports the replacement. The
 * others report the job that stands as already published — also one whose add landed between the
 * winner's remove and add (it sees the marker): its job is the replacement, and runs once. A
 * publisher that read the rejected job just before a racer replaced it finds out: a state it read
 * counts only while the job still has the creation time it read, and taking the marker checks the
 * job in the same script (so it never removes the replacement). A job that failed for another
 * reason is left alone.
 */
export async function publishOrReplace(
  deps: { redis: RedisClient; prefix: string },
  queue: Queue,
  input: unknown,
): Promise<PublishOutcome> {
  const first = await publishIncident(queue, input);
  if (!first.duplicate) return await unlessInReplacement(deps, queue, first);
  const id = first.incidentId;
  const dlq = new Queue(DEAD_LETTER_QUEUE, { connection: deps.redis, prefix: deps.prefix });
  try {
    // A job removed under our feet (by a replacing publisher) is waited for, then published again.
    for (let attempt = 0; attempt < 5; attempt++) {
      const stored = (await Job.fromId(queue, id)) ?? (await waitForReplacement(queue, id, undefined));
      if (!stored) {
        const again = await publishIncident(queue, input);
        if (!again.duplicate) return await unlessInReplacement(deps, queue, again);
        continue;
      }
      const state = await stored.getState();
      // getState reads by id: the state may be of a job added since `stored` was read (a racer
      // replaced it). Only a state read while the job was still this one is reported.
      if (!(await stillTheJob(deps.redis, queue, stored))) continue;
      const runId = runIdFor(id, stored.timestamp);
      if (state !== 'failed') return { incidentId: id, runId, jobTimestamp: stored.timestamp, duplicate: true, state };
      const deadLetterId = `poison-${id}-${stored.timestamp}`;
      const entry = await Job.fromId(dlq, deadLetterId);
      const rejected = entry !== undefined || (await deps.redis.exists(keys.deadLetterSeen(deps.prefix, deadLetterId))) === 1;
      if (!rejected)
        return {
          incidentId: id,
          runId,
          jobTimestamp: stored.timestamp,
          duplicate: true,
          state,
          failed: { reason: stored.failedReason ?? '' },
        };
      // Held a minute: long enough for a racer that read the rejected job to find it taken, short
      // enough that a publisher that died half-way does not block the id.
      const marker = keys.republish(deps.prefix, id);
      const mine = await deps.redis.eval(TAKE_REPLACEMENT, 2, marker, queue.toKey(id), String(stored.timestamp), REPLACE_MARK_S);
      if (mine === -1) continue;
      if (mine !== 1) {
        const replacement = await waitForReplacement(queue, id, stored.timestamp);
        if (!replacement) continue;
        const state = await replacement.getState();
        return { incidentId: id, runId: runIdFor(id, replacement.timestamp), jobTimestamp: replacement.timestamp, duplicate: true, state };
      }
      await stored.remove();
      const added = await publishIncident(queue, input);
      // Another publisher may have added in between (bosun publish, or monitoring adding with
      // BullMQ directly): the job that stands is the replacement either way, and runs once.
      if (added.vanished) continue;
      await deps.redis.set(marker, `done:${added.jobTimestamp}`, 'EX', REPLACE_MARK_S);
      const linkProblem = entry ? await linkReplacement(entry, { incidentId: id, runId: added.runId }) : undefined;
      return {
        incidentId: id,
        runId: added.runId,
        jobTimestamp: added.jobTimestamp,
        duplicate: false,
        replaced: { runId, reason: stored.failedReason ?? '', deadLetterId, ...(linkProblem ? { linkProblem } : {}) },
      };
    }
    throw new CliError('publish_conflict', `incident ${id}: its job kept changing while it was being replaced; run bosun publish again`);
  } finally {
    await dlq.close();
  }
}

/** Whether the job of `job`'s id is still that job (same creation time), not one added since. */
async function stillTheJob(redis: RedisClient, queue: Queue, job: Job): Promise<boolean> {
  return (await redis.hget(queue.toKey(job.id!), 'timestamp')) === String(job.timestamp);
}

/**
 * A newly added job is the replacement another publisher is making when the marker says a
 * replacement is under way (the rejected job's timestamp) or names this job (`done:<its
 * timestamp>`): it is then reported as already published, as the replacing publisher reports it.
 */
async function unlessInReplacement(deps: { redis: RedisClient; prefix: string }, queue: Queue, p: Published): Promise<PublishOutcome> {
  const marker = await deps.redis.get(keys.republish(deps.prefix, p.incidentId));
  if (marker === null) return p;
  if (marker.startsWith('done:') && marker !== `done:${p.jobTimestamp}`) return p;
  const state = (await (await Job.fromId(queue, p.incidentId))?.getState()) ?? 'unknown';
  return { ...p, duplicate: true, state };
}

/**
 * Links the poison dead letter to the incident that replaced its job (`retriedAs`). An entry that
 * does not parse is left as it is: returns why (its bad fields), for the caller to report.
 */
async function linkReplacement(job: Job, replacement: { incidentId: string; runId: string }): Promise<string | undefined> {
  let entry: DeadLetterEntry;
  try {
    entry = readEntry(job);
  } catch (err) {
    return storedProblem(err);
  }
  await annotateEntry(job, entry, { retriedAs: { ...replacement, at: new Date().toISOString() } });
  return undefined;
}

/**
 * The job that replaces the rejected one (another timestamp; any job when that is not known), or
 * undefined when none came in time.
 */
async function waitForReplacement(queue: Queue, id: string, rejectedTimestamp: number | undefined): Promise<Job | undefined> {
  const until = Date.now() + REPLACE_WAIT_MS;
  while (Date.now() < until) {
    const job = await Job.fromId(queue, id);
    if (job && job.timestamp !== rejectedTimestamp) return job;
    await sleep(100);
  }
  return undefined;
}

/** Prints what `bosun publish` did (the run id on stdout, the rest on stderr) and returns the exit code. */
export function reportPublished(p: PublishOutcome): number {
  if (p.failed) {
    const text =
      `incident ${p.incidentId} was already published (run ${p.runId}), and its job failed: ${p.failed.reason}. Nothing was published: ` +
      're-run it with bosun dlq retry <entry> (see bosun dlq list), or publish it under a new id.';
    process.stderr.write(`${escapeControl(text)}\n`);
    return 1;
  }
  process.stdout.write(`${p.runId}\n`);
  if (p.replaced) {
    const { runId, reason, deadLetterId, linkProblem } = p.replaced;
    const text =
      `incident ${p.incidentId} replaces the rejected incident of that id (run ${runId}, poison: ${reason}); ` +
      `dead letter ${deadLetterId} is ${linkProblem ? 'not ' : ''}linked to run ${p.runId}`;
    process.stderr.write(`${escapeControl(text)}\n`);
    // A dead letter that does not parse is named, and the command fails (the incident is published).
    if (linkProblem) return reportProblems([linkProblem]);
  } else if (p.duplicate) {
    process.stderr.write(`incident ${p.incidentId} was already published; it runs once (run ${p.runId}${p.state ? `, ${p.state}` : ''})\n`);
  }
  return 0;
}
