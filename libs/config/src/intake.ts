import { z } from 'zod';
import { BosunError, Severity } from '@bosun/contract';

/** One `${NAME}` or `${NAME:-default}` placeholder (as in the rest of the config). */
const PLACEHOLDER = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

/**
 * The JSON paths a generic mapping may use: `$`, then `.name`, `[<index>]` or `['name']` steps,
 * e.g. `$.incident.id`, `$.alerts[0].labels['app.kubernetes.io/name']`.
 */
export const JSON_PATH_PATTERN = /^\$(?:\.[A-Za-z_][A-Za-z0-9_-]*|\[\d+\]|\['[^'\\]+'\])*$/;

const JsonPath = z.string().regex(JSON_PATH_PATTERN, "must be a JSON path such as $.a.b[0]['c.d']");

/** How a source proves who it is: a bearer token, or an HMAC-SHA256 signature of the body. */
const IntakeAuth = z.union([
  z.object({ bearer: z.string().min(1) }).strict(),
  z
    .object({
      hmac: z
        .object({
          /** The shared secret. A secret: use `${ENV}`; never logged. */
          secret: z.string().min(1),
          /** The header carrying `sha256=<hex>` (GitHub style). */
          header: z.string().min(1).default('x-hub-signature-256'),
          /**
           * When set, the header carrying the Unix time (seconds) the sender signed at: the
           * signature is then over `<timestamp>.<body>`, and a timestamp further than
           * `toleranceSeconds` from now is refused.
           */
          timestampHeader: z.string().min(1).optional(),
          toleranceSeconds: z.number().int().positive().default(300),
        })
        .strict(),
    })
    .strict(),
]);

/** Severity words of a source → Bosun severities (merged over the defaults). */
const SeverityMap = z.record(z.string(), Severity).default({});

const SOURCE_DEFAULTS = { maxBodyBytes: 1024 * 1024 };
/** The largest body a source accepts (bytes): larger ones get 413, their start kept as poison. */
const MaxBodyBytes = z
  .number()
  .int()
  .positive()
  .max(16 * 1024 * 1024)
  .default(SOURCE_DEFAULTS.maxBodyBytes);

/**
 * Grouping: alerts whose `by` labels are equal join one incident while it is younger than
 * `windowMs`, instead of each starting a run. Off when absent.
 */
const Grouping = z
  .object({
    by: z.array(z.string().min(1)).min(1).default(['alertname']),
    windowMs: z.number().int().positive().max(86_400_000),
  })
  .strict();

/** At most `max` new incidents per `perMs` from this source; the excess waits (delayed, in order), never dropped. */
const RateLimit = z
  .object({
    max: z.number().int().positive().max(100_000),
    perMs: z.number().int().positive().max(86_400_000),
  })
  .strict();

/** The flow controls every source may have. */
const flow = { group: Grouping.optional(), rateLimit: RateLimit.optional() };

/**
 * A runbook: instructions for incidents it matches (by reason — an alert's name — and labels),
 * as markdown `text` or a `file` (relative to the config file). Given to the coordinator and the
 * specialists with the incident.
 */
const Runbook = z
  .object({
    name: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'must be 1 to 64 characters of A-Z, a-z, 0-9, ".", "_" or "-"'),
    match: z
      .object({
        /** Incident reasons (an Alertmanager alert's `alertname`). */
        reason: z.array(z.string().min(1)).min(1).optional(),
        /** Labels the incident must have, with these values. */
        labels: z.record(z.string(), z.string()).optional(),
      })
      .strict(),
    text: z
      .string()
      .min(1)
      .max(32 * 1024)
      .optional(),
    file: z.string().min(1).optional(),
  })
  .strict()
  .refine((r) => (r.text === undefined) !== (r.file === undefined), { message: 'give exactly one of text and file' });

/** A Prometheus Alertmanager webhook receiver (payload version 4). */
const AlertmanagerSource = z
  .object({
    format: z.literal('alertmanager'),
    auth: IntakeAuth,
    /** `alert`: each firing alert is an incident; `group`: each notification (one alert group) is one. */
    per: z.enum(['alert', 'group']).default('alert'),
    /** `record`: a resolved alert is recorded; `cancel`: its run is also cancelled if still running. */
    onResolved: z.enum(['record', 'cancel']).default('record'),
    severities: SeverityMap,
    maxBodyBytes: MaxBodyBytes,
    ...flow,
  })
  .strict();

/** A generic JSON webhook (a pager's outgoing webhook): JSON paths to incident fields. */
const GenericSource = z
  .object({
    format: z.literal('generic'),
    auth: IntakeAuth,
    mapping: z
      .object({
        /** The sender's id of the incident: with the source's name, the incident id (repeats run once). */
        id: JsonPath,
        /** The incident's reason (what routes it); `defaultReason` when the path finds nothing. */
        reason: JsonPath.optional(),
        summary: JsonPath.optional(),
        description: JsonPath.optional(),
        severity: JsonPath.optional(),
        /** An object of string values. */
        labels: JsonPath.optional(),
        runbookUrl: JsonPath.optional(),
        /** When it finds `resolvedValue`, the webhook is a resolution, not a new incident. */
        status: JsonPath.optional(),
      })
      .strict(),
    resolvedValue: z.string().default('resolved'),
    defaultReason: z.string().min(1).default('webhook'),
    severities: SeverityMap,
    onResolved: z.enum(['record', 'cancel']).default('record'),
    maxBodyBytes: MaxBodyBytes,
    ...flow,
  })
  .strict();

/**
 * The alert intake (`services/intake`): an HTTP server that turns Alertmanager and generic
 * webhooks into incidents on the `incidents` queue. Off when absent.
 */
export const IntakeConfigSchema = z
  .object({
    /** A number, or a `${VAR}` placeholder resolved by the intake (e.g. `${BOSUN_INTAKE_PORT:-8090}`). */
    port: z.union([
      z.number().int().min(0).max(65535),
      z.string().regex(new RegExp(`^${PLACEHOLDER.source}$`), 'must be a port number or a ${VAR} placeholder'),
    ]),
    host: z.string().default('0.0.0.0'),
    /** How long a request waits for Redis to take its incidents before it is answered 503. */
    redisTimeoutMs: z.number().int().positive().max(60_000).default(5_000),
    /** Tried in order: the first that matches an incident is its runbook. */
    runbooks: z.array(Runbook).default([]),
    /** Sources by name; each is served at `POST /alerts/<name>`. */
    sources: z
      .record(
        z.string().regex(/^[a-z][a-z0-9-]{0,31}$/, 'source names must match [a-z][a-z0-9-]*'),
        z.discriminatedUnion('format', [AlertmanagerSource, GenericSource]),
      )
      .superRefine((sources, ctx) => {
        const clash = idSpaceClash(Object.entries(sources).flatMap(([name, s]) => (s.format === 'generic' ? [name] : [])));
        if (clash) ctx.addIssue({ code: 'custom', message: clash });
      }),
  })
  .strict();

/**
 * Prefixes of incident ids other producers in Bosun give: `am-` and `amg-` (the intake's
 * Alertmanager sources), `a2a-` (the A2A face), `demo-` (`bosun demo`).
 */
export const RESERVED_ID_PREFIXES = ['am', 'amg', 'a2a', 'demo'] as const;

/**
 * Why two generic sources (or one and another producer) could give the same incident id, or
 * undefined. A generic source's ids are `<name>-<sender's id>`: with sources `pager` and
 * `pager-eu`, the id `pager-eu-1` would be both `pager`'s `eu-1` and `pager-eu`'s `1`. So no
 * name, followed by `-`, may begin another's, nor one of {@link RESERVED_ID_PREFIXES}.
 */
function idSpaceClash(generic: readonly string[]): string | undefined {
  const overlaps = (a: string, b: string) => a === b || a.startsWith(`${b}-`) || b.startsWith(`${a}-`);
  for (const g of generic) {
    const reserved = RESERVED_ID_PREFIXES.find((p) => overlaps(g, p));
    if (reserved)
      return `generic source ${g}: its incident ids (${g}-…) could be those Bosun gives with the prefix ${reserved}- (${RESERVED_ID_PREFIXES.join('-, ')}- are reserved): rename the source`;
    const other = generic.find((o) => o !== g && overlaps(g, o));
    if (other)
      return `generic sources ${g} and ${other} could give the same incident id (${g}-… and ${other}-…): rename one so that neither name followed by "-" begins the other`;
  }
  return undefined;
}

export type IntakeConfig = z.output<typeof IntakeConfigSchema>;
export type IntakeSource = IntakeConfig['sources'][string];
/** The intake's section as the intake uses it: its port a number, its secrets substituted. */
export type ResolvedIntakeConfig = Omit<IntakeConfig, 'port'> & { port: number };
export type IntakeAuth = z.output<typeof IntakeAuth>;
export type AlertmanagerSourceConfig = z.output<typeof AlertmanagerSource>;
export type GenericSourceConfig = z.output<typeof GenericSource>;
export type RunbookConfig = z.output<typeof Runbook>;

/**
 * `value` with its `${VAR}` placeholders substituted; an unset variable without a default is an
 * `invalid_config` error naming the field. Shared by the sections whose secrets one service resolves (intake, console).
 */
export function substituteSecret(value: string, env: NodeJS.ProcessEnv, field: string): string {
  return value.replace(PLACEHOLDER, (_, name: string, fallback: string | undefined) => {
    const v = env[name];
    if (v !== undefined) return v;
    if (fallback !== undefined) return fallback;
    throw new BosunError('invalid_config', `${field}: environment variable ${name} is not set`);
  });
}

/**
 * The intake's section with its port and its sources' secrets substituted (`${VAR}` in `auth.bearer` and
 * `auth.hmac.secret`): only the intake resolves them, so the other services never hold them.
 * Returns a copy; the parsed config stays frozen.
 *
 * @throws BosunError `invalid_config` naming the field whose variable is unset, or whose secret is empty.
 */
export function resolveIntakeSecrets(intake: IntakeConfig, env: NodeJS.ProcessEnv = process.env): ResolvedIntakeConfig {
  const sources: Record<string, IntakeSource> = {};
  for (const [name, source] of Object.entries(intake.sources)) {
    const field = `intake.sources.${name}.auth`;
    const auth: IntakeAuth =
      'bearer' in source.auth
        ? { bearer: substituteSecret(source.auth.bearer, env, `${field}.bearer`) }
        : { hmac: { ...source.auth.hmac, secret: substituteSecret(source.auth.hmac.secret, env, `${field}.hmac.secret`) } };
    const secret = 'bearer' in auth ? auth.bearer : auth.hmac.secret;
    if (secret === '') throw new BosunError('invalid_config', `${field}: the secret is empty after substitution`);
    sources[name] = { ...source, auth };
  }
  return { ...intake, port: resolvePort(intake.port, env), sources };
}

/** The port as a number, its placeholder substituted. */
function resolvePort(port: number | string, env: NodeJS.ProcessEnv): number {
  if (typeof port === 'number') return port;
  const text = substituteSecret(port, env, 'intake.port');
  const n = Number(text);
  if (!/^\d{1,5}$/.test(text) || n > 65535)
    throw new BosunError('invalid_config', `intake.port: ${port} must give a port number from 0 to 65535`);
  return n;
}

/** The secrets of resolved intake sources, for the logger. */
export function intakeSecrets(intake: IntakeConfig | undefined): string[] {
  if (!intake) return [];
  return Object.values(intake.sources)
    .map((s) => ('bearer' in s.auth ? s.auth.bearer : s.auth.hmac.secret))
    .filter((v) => !/^\$\{[^}]+\}$/.test(v));
}
