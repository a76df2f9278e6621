import { createHash } from 'node:crypto';

/**
 * The run id of an incident job: `r` followed by 20 hex digits of
 * sha256(`<incidentId>\n<job creation time in ms>`).
 *
 * It is derived, not random, so that every process that picks the job up (after a crash,
 * say) names the same run, and a client that published the job can compute it too.
 * It contains no `.`, so it is a single NATS subject token.
 */
export function runIdFor(incidentId: string, jobCreatedAtMs: number): string {
  const digest = createHash('sha256').update(`${incidentId}\n${jobCreatedAtMs}`).digest('hex');
  return `r${digest.slice(0, 20)}`;
}

/** What {@link runIdFor} returns: `r` and 20 hex digits. */
export const RUN_ID_PATTERN = /^r[0-9a-f]{20}$/;

/** The id of one delegation within a run: `<runId>-d<index>-<agent>`; also the task job's id. */
export function taskIdFor(runId: string, delegationIndex: number, agent: string): string {
  return `${runId}-d${delegationIndex}-${agent}`;
}

/**
 * The idempotency key of one tool call, from its place in the run:
 * `<taskId>-s<step>-c<callIndex>`. It is the tool job's id.
 */
export function toolCallKey(taskId: string, step: number, callIndex: number): string {
  return `${taskId}-s${step}-c${callIndex}`;
}

/**
 * A tool call's identity: the tool and its arguments as canonical JSON (object keys sorted), so
 * `{a, b}` and `{b, a}` are the same call. Used to match an approved call and to tell which
 * planned calls were made.
 */
export function callFingerprint(tool: string, args: unknown): string {
  return `${tool}|${canonicalJson(args)}`;
}

/**
 * A salted digest of one proposed call (sha256, hex): what a stored approval keeps of the real
 * arguments, beside arguments shown with their secrets redacted. The gateway computes it again
 * from the arguments a call carries, so an approved call still runs only with exactly the
 * arguments that were approved. The salt (approval id and key) makes a digest of one approval
 * useless for any other.
 */
export function callDigest(approvalId: string, key: string, tool: string, args: unknown): string {
  return createHash('sha256')
    .update(`${approvalId}\n${key}\n${callFingerprint(tool, args)}`)
    .digest('hex');
}

/** JSON with object keys sorted at every level. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const o = value as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
