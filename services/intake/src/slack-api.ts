/**
 * The Slack Web API as Bosun uses it: post a message, update it, tell one user something
 * (ephemeral), and read a user's e-mail. On `@slack/web-api`'s `WebClient`, with its own retries
 * off (a delivery is retried by its BullMQ job, an interaction is answered once) and its logging
 * sent to our logger.
 */
import type { Logger, SlackAppSink } from '@bosun/config';
import { BosunError } from '@bosun/contract';
import {
  LogLevel,
  WebAPIHTTPError,
  WebAPIPlatformError,
  WebAPIRateLimitedError,
  WebAPIRequestError,
  WebClient,
  type Logger as SlackLogger,
} from '@slack/web-api';

/** Slack's `error` codes that asking again may cure; any other `ok: false` is permanent (`channel_not_found`, `invalid_auth`, …). */
const TRANSIENT_PLATFORM_ERRORS = new Set(['ratelimited', 'internal_error', 'fatal_error', 'service_unavailable', 'request_timeout']);

/**
 * A Web API call that failed. `slackError` is Slack's own code (`channel_not_found`) for an
 * `ok: false` answer, `http_<status>` for an HTTP error, `ratelimited`, or `request_failed`
 * (network, timeout). `permanent`: asking again cannot help.
 */
export class SlackApiError extends BosunError {
  constructor(
    readonly method: string,
    readonly slackError: string,
    readonly permanent: boolean,
    cause?: unknown,
  ) {
    super('slack_api', `Slack ${method}: ${slackError}`, { cause, data: { method, slackError } });
    this.name = 'SlackApiError';
  }
}

/** Our logger, as `@slack/web-api` wants one (its messages at debug, its warnings and errors as such). */
function slackLogger(log: Logger): SlackLogger {
  const text = (msg: unknown[]) => msg.map((m) => (typeof m === 'string' ? m : JSON.stringify(m))).join(' ');
  return {
    debug: (...msg: unknown[]) => log.debug({ lib: 'slack-web-api' }, text(msg)),
    info: (...msg: unknown[]) => log.debug({ lib: 'slack-web-api' }, text(msg)),
    warn: (...msg: unknown[]) => log.warn({ lib: 'slack-web-api' }, text(msg)),
    error: (...msg: unknown[]) => log.error({ lib: 'slack-web-api' }, text(msg)),
    setLevel: () => undefined,
    getLevel: () => LogLevel.DEBUG,
    setName: () => undefined,
  };
}

/** `err` from a `WebClient` call as a {@link SlackApiError}. */
function asSlackError(method: string, err: unknown): SlackApiError {
  if (err instanceof WebAPIPlatformError)
    return new SlackApiError(method, err.data.error, !TRANSIENT_PLATFORM_ERRORS.has(err.data.error), err);
  if (err instanceof WebAPIRateLimitedError) return new SlackApiError(method, 'ratelimited', false, err);
  if (err instanceof WebAPIHTTPError) {
    const s = err.statusCode;
    return new SlackApiError(method, `http_${s}`, s >= 400 && s < 500 && s !== 408 && s !== 429, err);
  }
  if (err instanceof WebAPIRequestError) return new SlackApiError(method, `request_failed (${err.original.message})`, false, err);
  return new SlackApiError(method, `request_failed (${(err as Error).message})`, false, err);
}

/** A Block Kit block, as Slack takes it (we build them; Slack checks them). */
export type SlackBlock = Record<string, unknown>;

/** Options of {@link SlackApi}. */
export interface SlackApiOptions {
  /** The bot token (`xoxb-…`). */
  token: string;
  /** The Web API's base URL; default Slack's (`https://slack.com/api/`). */
  slackApiUrl?: string;
  /** Per request; default 10 s. */
  timeoutMs?: number;
  log: Logger;
}

/** The Web API calls Bosun makes, each failing with a {@link SlackApiError}. */
export class SlackApi {
  private readonly client: WebClient;

  constructor(options: SlackApiOptions) {
    this.client = new WebClient(options.token, {
      ...(options.slackApiUrl !== undefined ? { slackApiUrl: withSlash(options.slackApiUrl) } : {}),
      timeout: options.timeoutMs ?? 10_000,
      retryConfig: { retries: 0 },
      rejectRateLimitedCalls: true,
      // Only method names are called: an absolute URL must never leave the configured base.
      allowAbsoluteUrls: false,
      logger: slackLogger(options.log),
    });
  }

  /** `chat.postMessage`; resolves to where the message is (`channel`, `ts`). */
  async postMessage(message: { channel: string; text: string; blocks?: SlackBlock[] }): Promise<{ channel: string; ts: string }> {
    const res = await this.call('chat.postMessage', () => this.client.chat.postMessage(message as never));
    if (typeof res.channel !== 'string' || typeof res.ts !== 'string')
      throw new SlackApiError('chat.postMessage', 'answered ok without channel and ts', false);
    return { channel: res.channel, ts: res.ts };
  }

  /** `chat.update` of the message at `channel` / `ts`. */
  async update(message: { channel: string; ts: string; text: string; blocks?: SlackBlock[] }): Promise<void> {
    await this.call('chat.update', () => this.client.chat.update(message as never));
  }

  /** `chat.postEphemeral`: a message only `user` sees, in `channel`. */
  async postEphemeral(message: { channel: string; user: string; text: string }): Promise<void> {
    await this.call('chat.postEphemeral', () => this.client.chat.postEphemeral(message));
  }

  /** The user's e-mail (`users.info`, which needs the `users:read.email` scope); undefined when Slack shows none. */
  async userEmail(user: string): Promise<string | undefined> {
    const res = await this.call('users.info', () => this.client.users.info({ user }));
    const email = res.user?.profile?.email;
    return typeof email === 'string' && email !== '' ? email : undefined;
  }

  private async call<T>(method: string, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (err) {
      throw asSlackError(method, err);
    }
  }
}

/** `@slack/web-api` appends method names to the base as it is: it must end in `/`. */
function withSlash(url: string): string {
  return url.endsWith('/') ? url : `${url}/`;
}

/** The Web API client of a Slack app sink; `maxTimeoutMs` caps the sink's `timeoutMs`. */
export function slackApiFor(sink: SlackAppSink, log: Logger, maxTimeoutMs = Infinity): SlackApi {
  return new SlackApi({
    token: sink.botToken,
    timeoutMs: Math.min(sink.timeoutMs, maxTimeoutMs),
    log,
    ...(sink.slackApiUrl !== undefined ? { slackApiUrl: sink.slackApiUrl } : {}),
  });
}
