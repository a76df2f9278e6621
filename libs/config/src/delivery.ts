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

/** A Slack incoming webhook: a short message (status, the answer's first lines, what was not checked). */
const SlackSink = z
  .object({
    type: z.literal('slack'),
    /** The incoming webhook's URL: a secret (it holds its token); use `${ENV}`. */
    url: z.string().min(1),
    /** How many lines of the answer the message shows. */
    answerLines: z.number().int().positive().max(50).default(8),
    /** A link to the run's page, `{runId}` replaced (e.g. `https://console.example/runs/{runId}`). */
    runUrl: z.string().min(1).optional(),
    timeoutMs,
  })
  .strict();

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

/**
 * The sinks with their URLs and secrets substituted: only the delivering process (the intake)
 * resolves them. A URL that is not http(s), or an empty secret, is an `invalid_config` error
 * naming the field (never the value). Returns a copy.
 */
export function resolveDeliverySecrets(delivery: DeliveryConfig, env: NodeJS.ProcessEnv = process.env): DeliveryConfig {
  const sinks: Record<string, DeliverySink> = {};
  for (const [name, sink] of Object.entries(delivery.sinks)) {
    const field = `delivery.sinks.${name}`;
    const url = substitute(sink.url, env, `${field}.url`);
    let parsed: URL | undefined;
    try {
      parsed = new URL(url);
    } catch {
      parsed = undefined;
    }
    if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:'))
      throw new BosunError('invalid_config', `${field}.url: must be an http(s) URL (its value is not shown)`);
    if (sink.type === 'webhook') {
      const secret = substitute(sink.secret, env, `${field}.secret`);
      if (secret === '') throw new BosunError('invalid_config', `${field}.secret: empty after substitution`);
      sinks[name] = { ...sink, url, secret };
    } else sinks[name] = { ...sink, url };
  }
  return { ...delivery, sinks };
}

/** The secrets of resolved sinks (their URLs and signing keys), for the logger. */
export function deliverySecrets(delivery: DeliveryConfig | undefined): string[] {
  if (!delivery) return [];
  return Object.values(delivery.sinks)
    .flatMap((s) => (s.type === 'webhook' ? [s.url, s.secret] : [s.url]))
    .filter((v) => !/^\$\{[^}]+\}$/.test(v));
}
