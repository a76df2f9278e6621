import { z } from 'zod';
import { BosunError, RunStatus, Severity } from '@bosun/contract';

/** One `${NAME}` or `${NAME:-default}` placeholder (as in the rest of the config). */
const PLACEHOLDER = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

const timeoutMs = z.number().int().positive().max(120_000).default(10_000);

/** A generic webhook: the run result v1 as the JSON body, signed (docs/intake-and-delivery.md#signatures). */
const WebhookSink = z
  .object({
    type: z.literal('webhook'),
    /** `http(s)://…`; may be a `${VAR}` placeholder. Only the delivering process resolves it. */
    url: z.string().min(1),
    /** The HMAC-SHA256 key of the `Bosun-Signature` header. A secret: use `${ENV}`. */
    secret: z.string().min(1),
    timeoutMs,
  })
  .strict();

/** A Slack user id (`U…` or `W…`), as Slack's payloads give it. */
const SlackUserId = z.string().regex(/^[UW][A-Z0-9]{2,30}$/, 'must be a Slack user id (U… or W…)');
/** The operator name a Slack user decides as. */
const OperatorName = z.string().trim().min(1).max(200);

/**
 * A Slack sink: an incoming webhook (`url`: a short message), or a Slack app (`botToken`,
 * `channel`, `signingSecret`: messages through the Web API, and approvals with Approve / Deny
 * buttons answered at the intake's `POST /slack/interactions`). Exactly one of the two modes.
 */
const SlackSink = z
  .object({
    type: z.literal('slack'),
    /** Incoming-webhook mode: the webhook's URL, a secret (it holds its token); use `${ENV}`. */
    url: z.string().min(1).optional(),
    /** App mode: the bot token (`xoxb-…`), a secret; use `${ENV}`. */
    botToken: z.string().min(1).optional(),
    /** App mode: the channel id (`C…`) the messages go to; the bot must be a member. */
    channel: z.string().min(1).max(80).optional(),
    /** App mode: the app's signing secret, which verifies Slack's interaction requests; use `${ENV}`. */
    signingSecret: z.string().min(1).optional(),
    /** App mode: the Web API's base URL; default Slack's own (`https://slack.com/api/`). Tests point it at a local server. */
    slackApiUrl: z.string().min(1).optional(),
    /** App mode: Slack user id → the operator name that user decides as. */
    users: z.record(SlackUserId, OperatorName).default({}),
    /**
     * App mode: e-mail → operator name, for users not in `users`: the user's e-mail is read with
     * `users.info` (the bot needs the `users:read.email` scope). Matched case-insensitively.
     */
    emails: z.record(z.string().trim().toLowerCase().pipe(z.email()), OperatorName).default({}),
    /** How many lines of the answer the message shows. */
    answerLines: z.number().int().positive().max(50).default(8),
    /** A link to the run's page, `{runId}` replaced (e.g. `https://console.example/runs/{runId}`). */
    runUrl: z.string().min(1).optional(),
    timeoutMs,
  })
  .strict()
  .superRefine((s, ctx) => {
    const app = ['botToken', 'channel', 'signingSecret'] as const;
    const given = app.filter((k) => s[k] !== undefined);
    if (s.url !== undefined && given.length > 0)
      ctx.addIssue({
        code: 'custom',
        path: [given[0]!],
        message: 'either url (an incoming webhook) or botToken, channel and signingSecret (an app), not both',
      });
    else if (s.url === undefined && given.length < app.length)
      ctx.addIssue({
        code: 'custom',
        path: [app.find((k) => s[k] === undefined)!],
        message: `required in app mode (${app.join(', ')}), or give url for an incoming webhook`,
      });
  });

/** Which runs go to which sinks: every listed field must match (a field left out matches anything). */
const DeliveryRoute = z
  .object({
    severity: z.array(Severity).min(1).optional(),
    source: z.array(z.string().min(1)).min(1).optional(),
    reason: z.array(z.string().min(1)).min(1).optional(),
    status: z.array(RunStatus).min(1).optional(),
    sinks: z.array(z.string()).min(1),
  })
  .strict();

/** Deliveries of run results to sinks (docs/intake-and-delivery.md#delivery). Off when absent. */
export const DeliveryConfigSchema = z
  .object({
    /** Tries per sink before the delivery becomes a `delivery` dead letter. */
    attempts: z.number().int().min(1).max(50).default(5),
    /** The first retry's delay; each next one doubles. */
    backoffMs: z.number().int().positive().max(3_600_000).default(1_000),
    /** Deliveries one process sends at once. */
    concurrency: z.number().int().positive().max(1_000).default(16),
    sinks: z.record(
      z.string().regex(/^[a-z][a-z0-9-]{0,31}$/, 'sink names must match [a-z][a-z0-9-]*'),
      z.discriminatedUnion('type', [WebhookSink, SlackSink]),
    ),
    /** Tried in order; the first that matches a run chooses its sinks. */
    routes: z.array(DeliveryRoute).default([]),
    /** The sinks of a run no route matches. */
    defaultSinks: z.array(z.string()).default([]),
    /** Sinks that are told of each pending approval (its id and the commands to decide it); none by default. */
    announceApprovals: z.array(z.string()).default([]),
    /** How often the delivering process looks for new pending approvals. */
    approvalScanMs: z.number().int().min(200).max(600_000).default(2_000),
  })
  .strict()
  .superRefine((d, ctx) => {
    const known = Object.keys(d.sinks);
    const check = (names: string[], path: (string | number)[]) => {
      for (const [i, n] of names.entries())
        if (!known.includes(n))
          ctx.addIssue({ code: 'custom', path: [...path, i], message: `unknown sink "${n}" (known: ${known.join(', ') || 'none'})` });
    };
    d.routes.forEach((r, i) => check(r.sinks, ['routes', i, 'sinks']));
    check(d.defaultSinks, ['defaultSinks']);
    check(d.announceApprovals, ['announceApprovals']);
  });

export type DeliveryConfig = z.output<typeof DeliveryConfigSchema>;
export type DeliverySink = DeliveryConfig['sinks'][string];

/** The sinks a run goes to: those of the first route that matches it, else the default sinks. */
export function sinksFor(delivery: DeliveryConfig, run: { severity: string; source: string; reason: string; status: string }): string[] {
  const matches = (list: readonly string[] | undefined, value: string) => list === undefined || list.includes(value);
  const route = delivery.routes.find(
    (r) =>
      matches(r.severity, run.severity) && matches(r.source, run.source) && matches(r.reason, run.reason) && matches(r.status, run.status),
  );
  return [...new Set(route ? route.sinks : delivery.defaultSinks)];
}

function substitute(value: string, env: NodeJS.ProcessEnv, field: string): string {
  return value.replace(PLACEHOLDER, (_, name: string, fallback: string | undefined) => {
    const v = env[name];
    if (v !== undefined) return v;
    if (fallback !== undefined) return fallback;
    throw new BosunError('invalid_config', `${field}: environment variable ${name} is not set`);
  });
}

/** `value` as an http(s) URL, or an `invalid_config` error naming `field` (never the value). */
function httpUrl(value: string, field: string): string {
  let parsed: URL | undefined;
  try {
    parsed = new URL(value);
  } catch {
    parsed = undefined;
  }
  if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:'))
    throw new BosunError('invalid_config', `${field}: must be an http(s) URL (its value is not shown)`);
  return value;
}

/** A secret substituted, refused when empty. */
function secretOf(value: string, env: NodeJS.ProcessEnv, field: string): string {
  const v = substitute(value, env, field);
  if (v === '') throw new BosunError('invalid_config', `${field}: empty after substitution`);
  return v;
}

/** A Slack sink with its URL or its app's token and signing secret substituted. */
function resolveSlack(sink: Extract<DeliverySink, { type: 'slack' }>, env: NodeJS.ProcessEnv, field: string): DeliverySink {
  if (sink.url !== undefined) return { ...sink, url: httpUrl(substitute(sink.url, env, `${field}.url`), `${field}.url`) };
  return {
    ...sink,
    botToken: secretOf(sink.botToken!, env, `${field}.botToken`),
    signingSecret: secretOf(sink.signingSecret!, env, `${field}.signingSecret`),
    channel: substitute(sink.channel!, env, `${field}.channel`),
    ...(sink.slackApiUrl !== undefined
      ? { slackApiUrl: httpUrl(substitute(sink.slackApiUrl, env, `${field}.slackApiUrl`), `${field}.slackApiUrl`) }
      : {}),
  };
}

/**
 * The sinks with their URLs and secrets substituted: only the delivering process (the intake)
 * resolves them. A URL that is not http(s), or an empty secret, is an `invalid_config` error
 * naming the field (never the value). Returns a copy.
 */
export function resolveDeliverySecrets(delivery: DeliveryConfig, env: NodeJS.ProcessEnv = process.env): DeliveryConfig {
  const sinks: Record<string, DeliverySink> = {};
  for (const [name, sink] of Object.entries(delivery.sinks)) {
    const field = `delivery.sinks.${name}`;
    if (sink.type === 'slack') {
      sinks[name] = resolveSlack(sink, env, field);
      continue;
    }
    const url = httpUrl(substitute(sink.url, env, `${field}.url`), `${field}.url`);
    sinks[name] = { ...sink, url, secret: secretOf(sink.secret, env, `${field}.secret`) };
  }
  return { ...delivery, sinks };
}

/** A Slack sink in app mode (bot token, channel, signing secret), as {@link slackAppSinks} gives it. */
export type SlackAppSink = Extract<DeliverySink, { type: 'slack' }> & { botToken: string; channel: string; signingSecret: string };

/** The Slack sinks in app mode, by name (their interactions are answered at `POST /slack/interactions`). */
export function slackAppSinks(delivery: DeliveryConfig | undefined): Record<string, SlackAppSink> {
  const out: Record<string, SlackAppSink> = {};
  for (const [name, sink] of Object.entries(delivery?.sinks ?? {}))
    if (sink.type === 'slack' && sink.botToken !== undefined && sink.channel !== undefined && sink.signingSecret !== undefined)
      out[name] = sink as SlackAppSink;
  return out;
}

/** The secrets of resolved sinks (their URLs and signing keys), for the logger. */
export function deliverySecrets(delivery: DeliveryConfig | undefined): string[] {
  if (!delivery) return [];
  return Object.values(delivery.sinks)
    .flatMap((s) => (s.type === 'webhook' ? [s.url, s.secret] : [s.url, s.botToken, s.signingSecret]))
    .filter((v): v is string => v !== undefined)
    .filter((v) => !/^\$\{[^}]+\}$/.test(v));
}
