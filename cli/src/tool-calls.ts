/**
 * `bosun ack`: resolving an in-doubt tool call. The record changes only through
 * `ToolCallRecords` (libs/transport), whose scripts check that it is still in doubt; it is read
 * with the contract's `ToolCallRecord`, and a task's checkpoint with `TaskCheckpoint`.
 */
import { Job, Queue, QueueEvents } from 'bullmq';
import {
  InvalidInputError,
  TOOLS_QUEUE,
  TOOL_CALL_JOB,
  TaskCheckpoint,
  ToolCallResult,
  canonicalJson,
  parseStored,
  redactSecrets,
  taskCheckpointId,
  toolCallAtKey,
  type ToolCallJob,
  type ToolCallRecord,
  type ToolCallResolution,
  errorMessage,
} from '@bosun/contract';
import { ToolCallRecords } from '@bosun/transport';
import { annotateInDoubt } from './dead-letters.js';
import { OperatorError, readCheckpoint, type OperatorDeps } from './operator.js';

/** What an operator does with an in-doubt call. */
export type AckAction = ToolCallResolution['action'];

/** What {@link ackToolCall} did. */
export interface AckOutcome {
  key: string;
  action: AckAction;
  resolution: ToolCallResolution;
  /** The result recorded (done, skip) or returned by the re-sent call (retry). */
  result: ToolCallResult;
  /** The tool job of a retry. */
  jobId?: string;
  /** The in-doubt dead letter annotated, or null when there was none. */
  deadLetterId: string | null;
  /** Why the call's own dead letter was not annotated: it does not parse (named field by field). */
  deadLetterProblem?: string;
}

/** The dead-letter part of an {@link AckOutcome}. */
async function annotate(deps: OperatorDeps, key: string, resolution: ToolCallResolution) {
  const { deadLetterId, problem } = await annotateInDoubt(deps, key, resolution);
  return { deadLetterId, ...(problem ? { deadLetterProblem: problem } : {}) };
}

/**
 * `bosun ack`: resolves an in-doubt tool call. `done`: it took effect; `skip`: treat it as not
 * executed; `retry`: send it once more through the gateway and wait (up to `timeoutMs`) for its
 * result. The in-doubt dead letter of the call gets the `resolution`.
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
    throw err instanceof InvalidInputError ? new OperatorError('corrupt', err.message, err) : err;
  });
  if (!record) throw new OperatorError('not_found', `no tool call ${key} under BOSUN_PREFIX=${deps.prefix}`);
  const at = new Date().toISOString();
  if (record.state === 'done' && record.seenDoneAt) return acknowledgeSeenDone(deps, { key, record, action, by: options.by, at });
  if (record.state !== 'in-doubt') throw notInDoubt(key, record.state);
  if (action === 'retry')
    return retryToolCall(deps, { key, record, resolution: { action, by: options.by, at }, timeoutMs: options.timeoutMs });
  const resolution = { action, by: options.by, at };
  const { changed, was, result } = await records.resolve(key, resolution, record.tool ?? '');
  if (!changed) throw notInDoubt(key, was);
  return { key, action, resolution, result, ...(await annotate(deps, key, resolution)) };
}

/**
 * `bosun ack` on a call declared in doubt whose outcome was recorded after all ("in doubt, later
 * seen done"): `--done` acknowledges it (the recorded result stays, the record and its dead
 * letter get the resolution); `--retry` and `--skip` are refused, since its outcome is known and
 * a retry would run it twice.
 */
async function acknowledgeSeenDone(
  deps: OperatorDeps,
  a: { key: string; record: ToolCallRecord; action: AckAction; by: string; at: string },
): Promise<AckOutcome> {
  const { key, record } = a;
  const seen = `was declared in doubt, and its outcome was recorded after all (${record.result?.status ?? '?'} at ${record.seenDoneAt ?? '?'})`;
  if (a.action !== 'done')
    throw new OperatorError('conflict', `tool call ${key} ${seen}: its outcome is known; acknowledge it with --done`);
  const resolution = { action: a.action, by: a.by, at: a.at };
  const change = await new ToolCallRecords(deps).acknowledgeSeenDone(key, resolution);
  if (!change.changed) {
    const by = record.resolution ? ` by ${record.resolution.by} at ${record.resolution.at}` : '';
    throw new OperatorError('conflict', `tool call ${key} ${seen}, and was acknowledged already${by}`);
  }
  const result = record.result;
  if (!result) throw new OperatorError('corrupt', `tool call ${key} ${seen}, but its record holds no result`);
  return { key, action: a.action, resolution, result, ...(await annotate(deps, key, resolution)) };
}

function notInDoubt(key: string, state: string | null): OperatorError {
  return new OperatorError('conflict', `tool call ${key} is not in doubt: its state is "${state ?? '(none)'}"`);
}

/** The tool job that sends an in-doubt call once more, from its record (and the real arguments, when the record's are redacted). */
async function retryJob(deps: OperatorDeps, key: string, record: ToolCallRecord): Promise<ToolCallJob> {
  // Everything the tool job needs must be in the record before the state changes.
  const args = record.argsRedacted === true ? await realArgs(deps, key, record) : record.args;
  const { tool, runId, incidentId, agent } = record;
  if (!tool || !runId || !incidentId || !agent || !args) {
    const missing = Object.entries({ tool, runId, incidentId, agent, args })
      .filter(([, v]) => !v)
      .map(([f]) => f);
    throw new OperatorError('corrupt', `tool call ${key} cannot be re-sent: its record lacks ${missing.join(', ')}`);
  }
  // A call that needed approval is re-sent under the same approval: the gateway checks it again.
  return { v: 1, key, runId, incidentId, agent, tool, args, ...(record.approvalId ? { approvalId: record.approvalId } : {}) };
}

/** `bosun ack --retry`: marks the call `retry`, adds its tool job `<key>-ack<n>` and waits for the result. */
async function retryToolCall(
  deps: OperatorDeps,
  r: { key: string; record: ToolCallRecord; resolution: ToolCallResolution & { action: 'retry' }; timeoutMs: number | undefined },
): Promise<AckOutcome> {
  const { key, resolution } = r;
  const call = await retryJob(deps, key, r.record);
  const records = new ToolCallRecords(deps);
  const queue = new Queue(TOOLS_QUEUE, { connection: deps.redis, prefix: deps.prefix });
  const eventsConnection = deps.redis.duplicate();
  // Its failures surface as the wait's (below); the listener keeps them from crashing the CLI.
  eventsConnection.on('error', () => undefined);
  const events = new QueueEvents(TOOLS_QUEUE, { connection: eventsConnection, prefix: deps.prefix });
  try {
    // Listen before adding, so the completion cannot be missed.
    await events.waitUntilReady();
    const marked = await records.markRetry(key, resolution);
    if (!marked.changed) throw notInDoubt(key, marked.was);
    const job = await addRetryJob(queue, records, call);
    const annotated = await annotate(deps, key, resolution);
    let value: unknown;
    try {
      value = await job.waitUntilFinished(events, r.timeoutMs ?? 120_000);
    } catch (err) {
      throw new OperatorError(
        'unavailable',
        `tool call ${key} was re-sent as job ${String(job.id)}, but ${errorMessage(err)}. ` +
          `Its record is in state "retry"; the gateway runs it once when it picks the job up (see bosun runs show ${call.runId}).`,
        err,
      );
    }
    const result = parseStored(ToolCallResult, value, `the result of tool job ${String(job.id)}`);
    return { key, action: 'retry', resolution, result, jobId: String(job.id), ...annotated };
  } finally {
    // Closing after the wait: a failure to close changes nothing of what was done.
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
  const taskId = /^(.+)-s\d+-c\d+$/.exec(key)?.[1];
  const ckptId = taskCheckpointId(taskId ?? '');
  const ckpt = taskId ? TaskCheckpoint.parse(await readCheckpoint(deps, ckptId), ckptId) : null;
  const found = ckpt ? toolCallAtKey(ckpt, key) : undefined;
  // The checkpoint's call must be the recorded one: same tool, same arguments once redacted.
  if (!found || found.tool !== record.tool || canonicalJson(redactSecrets(found.args)) !== canonicalJson(record.args)) {
    throw new OperatorError(
      'conflict',
      `tool call ${key} cannot be re-sent: its arguments hold secrets, which Bosun shows and stores redacted, and ` +
        `${ckpt ? `the task checkpoint ${ckptId} has no matching call` : 'no task checkpoint keeps them (a call through the gateway MCP face, or an expired run)'}. ` +
        'Resolve it with --done or --skip, and make the call again yourself if it is still needed.',
    );
  }
  return found.args;
}
