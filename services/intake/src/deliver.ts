import { createHmac } from 'node:crypto';
import type { DeliverySink } from '@bosun/config';
import { BosunError, type ApprovalAnnouncement, type DeliveryJob, errorMessage } from '@bosun/contract';
import { approvalCommands, approvalText, slackText } from './slack.js';
import { SlackApiError, type SlackApi } from './slack-api.js';
import { approvalBlocks, approvalFallbackText } from './slack-blocks.js';

/** The header of a webhook delivery's signature: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`. */
export const SIGNATURE_HEADER = 'bosun-signature';
/** The header carrying the delivery's idempotency key (`<runId>.<sink>`). */
export const IDEMPOTENCY_HEADER = 'idempotency-key';

/** `t=<t>,v1=<hex>`: the signature of `body` sent at `t` (Unix seconds), as a receiver recomputes it. */
export function signatureHeader(secret: string, body: string, t: number): string {
  return `t=${t},v1=${createHmac('sha256', secret).update(`${t}.${body}`, 'utf8').digest('hex')}`;
}

/**
 * A delivery that did not get a 2xx. `permanent`: retrying cannot help — a 4xx other than 408
 * and 429, or a 3xx (redirects are never followed, so asking again is answered the same).
 */
export class DeliveryError extends BosunError {
  constructor(
    message: string,
    readonly permanent: boolean,
    cause?: unknown,
  ) {
    super('delivery_failed', message, { cause });
    this.name = 'DeliveryError';
  }
}

/** What the deliveries queue carries: a run's answer, or a pending approval's announcement. */
export type Deliverable = DeliveryJob | ApprovalAnnouncement;

/** The commands that decide an approval (defined beside the Slack texts that show them). */
export { approvalCommands };

/** The JSON body of a webhook delivery: the run result v1, or `{ v, type: "approval.requested", approval, commands }`. */
function webhookBody(job: Deliverable): string {
  if ('result' in job) return JSON.stringify(job.result);
  return JSON.stringify({ v: 1, type: 'approval.requested', approval: job.approval, commands: approvalCommands(job.approval.id) });
}

/** The request of a delivery to its sink: the body and the headers. */
export function deliveryRequest(
  job: Deliverable,
  sink: DeliverySink,
  attempt: number,
  now: number,
): { body: string; headers: Record<string, string> } {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': 'bosun-delivery/1',
    [IDEMPOTENCY_HEADER]: job.key,
    'bosun-event': 'result' in job ? 'run.result' : 'approval.requested',
    'bosun-delivery-attempt': String(attempt),
  };
  if (sink.type === 'slack') {
    if (!('result' in job)) return { body: JSON.stringify({ text: approvalText(job, approvalCommands(job.approval.id)) }), headers };
    const options = { answerLines: sink.answerLines, ...(sink.runUrl !== undefined ? { runUrl: sink.runUrl } : {}) };
    return { body: JSON.stringify({ text: slackText(job, options) }), headers };
  }
  const body = webhookBody(job);
  headers[SIGNATURE_HEADER] = signatureHeader(sink.secret, body, Math.floor(now / 1000));
  return { body, headers };
}

/**
 * Sends one delivery; resolves on a 2xx. Anything else is a {@link DeliveryError} that names the
 * sink and the status or network error — never the URL, which may hold a token. A redirect is not
 * followed: the signed answer would go to a place the config does not name (and a 303 would turn
 * the POST into a GET). A 3xx is a permanent failure, dead-lettered at once with a reason that
 * says to point the sink's `url` at the final address.
 */
export async function send(job: Deliverable, sink: DeliverySink, attempt: number, slack?: SlackApi): Promise<number> {
  if (sink.type === 'slack' && sink.url === undefined) {
    if (!slack) throw new DeliveryError(`sink ${job.sink}: a Slack app sink needs its Web API client`, true);
    return postToSlack(job, sink, slack);
  }
  const url = sink.url!;
  const { body, headers } = deliveryRequest(job, sink, attempt, Date.now());
  let res: Response;
  try {
    res = await fetch(url, { method: 'POST', body, headers, signal: AbortSignal.timeout(sink.timeoutMs), redirect: 'manual' });
  } catch (err) {
    const why =
      (err as Error).name === 'TimeoutError'
        ? `no answer within ${sink.timeoutMs} ms`
        : ((err as Error & { cause?: Error }).cause?.message ?? errorMessage(err));
    throw new DeliveryError(`sink ${job.sink}: ${why}`, false, err);
  }
  // The body is not needed: read it off so that the connection can be reused.
  await res.arrayBuffer().catch(() => undefined);
  if (res.ok) return res.status;
  // The Location is not named: the sink's own address may hold a token, and so may the one it redirects to.
  if (res.status >= 300 && res.status < 400)
    throw new DeliveryError(
      `sink ${job.sink}: HTTP ${res.status} (a redirect, not followed: set the sink's url to the final address)`,
      true,
    );
  const permanent = res.status >= 400 && res.status < 500 && res.status !== 408 && res.status !== 429;
  throw new DeliveryError(`sink ${job.sink}: HTTP ${res.status}`, permanent);
}

/**
 * A delivery to a Slack app sink: `chat.postMessage` to its channel — an approval as its Block
 * Kit message with buttons, a run's answer as the incoming webhook's text. Resolves to 200; a
 * Slack error is a {@link DeliveryError}, permanent when asking again cannot help
 * (`channel_not_found`, `invalid_auth`, `not_in_channel`, …).
 */
async function postToSlack(job: Deliverable, sink: Extract<DeliverySink, { type: 'slack' }>, slack: SlackApi): Promise<number> {
  const channel = sink.channel!;
  const message =
    'result' in job
      ? { channel, text: slackText(job, { answerLines: sink.answerLines, ...(sink.runUrl !== undefined ? { runUrl: sink.runUrl } : {}) }) }
      : {
          channel,
          text: approvalFallbackText(job.approval, job.incident),
          blocks: approvalBlocks(job.approval, job.incident, job.specialists),
        };
  try {
    await slack.postMessage(message);
  } catch (err) {
    if (err instanceof SlackApiError) throw new DeliveryError(`sink ${job.sink}: ${err.message}`, err.permanent, err);
    throw err;
  }
  return 200;
}
