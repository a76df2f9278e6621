/**
 * Slack's request signatures (version `v0`): `X-Slack-Signature: v0=<hex of
 * HMAC-SHA256(signingSecret, "v0:<X-Slack-Request-Timestamp>:<raw body>")>`. A request is taken
 * only when the signature matches (compared in constant time) and its timestamp is at most
 * {@link SLACK_TOLERANCE_SECONDS} from now, so a captured request cannot be replayed later.
 */
import { createHmac } from 'node:crypto';
import { sameSecret } from '@bosun/contract';

/** The header carrying the signature. */
export const SLACK_SIGNATURE_HEADER = 'x-slack-signature';
/** The header carrying the request's Unix time in seconds. */
export const SLACK_TIMESTAMP_HEADER = 'x-slack-request-timestamp';
/** How far from now a request's timestamp may be: 5 minutes, as Slack advises. */
export const SLACK_TOLERANCE_SECONDS = 300;

/** `v0=<hex>`: the signature of `body` sent at `timestamp`, as Slack computes it. */
export function slackSignature(secret: string, timestamp: string | number, body: string): string {
  return `v0=${createHmac('sha256', secret).update(`v0:${timestamp}:${body}`, 'utf8').digest('hex')}`;
}

/** Which secret signed a request, or why it was refused (the `reason` never holds a secret or the expected signature). */
export type SlackVerification = { ok: true; index: number } | { ok: false; reason: string };

/** One header's value (the first when repeated). */
function header(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/**
 * Checks a request's Slack signature against each of `secrets` (one per Slack app sink): the
 * index of the secret that signed it, or why none did. `nowMs` is the clock (default
 * `Date.now()`).
 */
export function verifySlackRequest(
  secrets: readonly string[],
  headers: Record<string, string | string[] | undefined>,
  rawBody: string,
  nowMs = Date.now(),
): SlackVerification {
  const signature = header(headers, SLACK_SIGNATURE_HEADER);
  const timestamp = header(headers, SLACK_TIMESTAMP_HEADER);
  if (signature === undefined || timestamp === undefined)
    return { ok: false, reason: `missing ${signature === undefined ? 'X-Slack-Signature' : 'X-Slack-Request-Timestamp'}` };
  if (!/^\d{1,12}$/.test(timestamp)) return { ok: false, reason: 'X-Slack-Request-Timestamp: not Unix seconds' };
  const age = Math.abs(nowMs / 1000 - Number(timestamp));
  if (age > SLACK_TOLERANCE_SECONDS)
    return { ok: false, reason: `X-Slack-Request-Timestamp: ${Math.round(age)} s from now (at most ${SLACK_TOLERANCE_SECONDS})` };
  if (!/^v0=[0-9a-f]{64}$/.test(signature)) return { ok: false, reason: 'X-Slack-Signature: not v0=<64 hex digits>' };
  // Every secret is tried, so the time taken does not tell which one (if any) matched.
  let index = -1;
  for (const [i, secret] of secrets.entries()) {
    if (sameSecret(slackSignature(secret, timestamp, rawBody), signature) && index === -1) index = i;
  }
  return index === -1 ? { ok: false, reason: 'X-Slack-Signature does not match' } : { ok: true, index };
}
