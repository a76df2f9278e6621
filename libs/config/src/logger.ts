import { pino, stdSerializers, type Logger, type DestinationStream } from 'pino';
import { redactSecrets, scrubValues } from '@bosun/contract';

export type { Logger } from 'pino';

/** Paths pino redacts wherever they appear in a log object, whatever their key looks like. */
export const REDACT_PATHS = [
  'apiKey',
  '*.apiKey',
  'token',
  '*.token',
  'password',
  '*.password',
  'authorization',
  '*.authorization',
  'headers',
  '*.headers',
  'env',
  '*.env',
  'geminiApiKey',
  '*.geminiApiKey',
  'openaiApiKey',
  '*.openaiApiKey',
  'anthropicApiKey',
  '*.anthropicApiKey',
  'apiKey',
  '*.apiKey',
  // ioredis puts the failed command's arguments on its errors; AUTH's are the user and password.
  'err.command.args',
];

/** Options of {@link createLogger}. */
export interface LoggerOptions {
  /** The service name, on every line. */
  service: string;
  /** Default `info`. */
  level?: string;
  /** Where to write; default stdout. */
  destination?: DestinationStream;
  /** Secret values never to print; default {@link knownSecrets} of `process.env`. More can be added with {@link addLogSecrets}. */
  secrets?: readonly string[];
}

const SECRETS = Symbol('bosun.logSecrets');

/**
 * The service logger: JSON lines with the service name. Secrets never reach the output:
 * - known secret values ({@link knownSecrets}, and those given to {@link addLogSecrets}) are cut
 *   out of the message and of every string in the logged object, at any depth — errors included
 *   (their message, stack and causes);
 * - the values of secret-looking keys (`password`, `token`, `apiKey`, … — the same rule as tool
 *   arguments, `redactSecrets` in `@bosun/contract`) are replaced by `[redacted]` at any depth,
 *   and so are the paths in {@link REDACT_PATHS} (`headers`, `env`).
 * A logger named `LOG_LEVEL` that is not a level logs at `info` and says so.
 */
export function createLogger(options: LoggerOptions): Logger {
  const secrets = new Set((options.secrets ?? knownSecrets()).filter((s) => s.length >= 6));
  const wanted = options.level ?? 'info';
  const valid = isLogLevel(wanted);
  const clean = (value: unknown): unknown => redactSecrets(plainErrors(value), { values: [...secrets] });
  const logger = pino(
    {
      name: options.service,
      level: valid ? wanted : 'info',
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      // Errors are serialized (and scrubbed) by the log formatter below, wherever they are.
      serializers: { err: (v: unknown) => v },
      formatters: {
        log: (object) => clean(object) as Record<string, unknown>,
        bindings: (bindings) => clean(bindings) as Record<string, unknown>,
      },
      hooks: {
        logMethod(args, method) {
          // A secret can reach a message through an error text; scrub known values.
          const out: unknown[] = args.map((a) => (typeof a === 'string' ? scrubValues(a, [...secrets]) : a));
          // log.error(err): pino would take the message from the error unscrubbed; give it one.
          const first = out[0];
          if (first instanceof Error) {
            out[0] = { err: first };
            if (typeof out[1] !== 'string') out.splice(1, 0, scrubValues(first.message, [...secrets]));
          }
          method.apply(this, out as typeof args);
        },
      },
    },
    options.destination,
  );
  Object.defineProperty(logger, SECRETS, { value: secrets });
  if (!valid) warnBadLevel(logger, wanted);
  return logger;
}

function isLogLevel(level: string): boolean {
  return Object.hasOwn(pino.levels.values, level) || level === 'silent';
}

function warnBadLevel(logger: Logger, wanted: string): void {
  logger.warn(`LOG_LEVEL "${wanted}" is not a level (${Object.keys(pino.levels.values).join(', ')}, silent); using info`);
}

/**
 * Sets a logger's level once the environment is read (`LOG_LEVEL`, `BosunEnv.logLevel`):
 * a value that is not a level sets `info` and logs a warning, as {@link createLogger} does.
 */
export function setLogLevel(logger: Logger, level: string): void {
  const valid = isLogLevel(level);
  logger.level = valid ? level : 'info';
  if (!valid) warnBadLevel(logger, level);
}

/**
 * Adds secret values that a logger (and its children) must never print, once they are known:
 * the secrets a service resolves from its config file ({@link configSecrets}). Values shorter
 * than 6 characters are ignored. A logger not made by {@link createLogger} is left as it is.
 */
export function addLogSecrets(logger: Logger, values: readonly string[]): void {
  const set = (logger as unknown as Record<symbol, Set<string> | undefined>)[SECRETS];
  for (const v of values) if (v.length >= 6) set?.add(v);
}

/** Secret values from the environment that must never be printed. */
export function knownSecrets(env: NodeJS.ProcessEnv = process.env): string[] {
  return Object.entries(env)
    .filter(([k, v]) => v && v.length >= 6 && /KEY|TOKEN|SECRET|PASSWORD/i.test(k))
    .map(([, v]) => v as string);
}

/** Replaces every occurrence of each secret in `text` by `[redacted]`. */
export function scrub(text: string, secrets: readonly string[] = knownSecrets()): string {
  return scrubValues(text, secrets);
}

/** A copy of a log object with every error (at any depth) serialized as pino does: type, message, stack, causes. */
function plainErrors(value: unknown, depth = 0): unknown {
  if (value instanceof Error) {
    const { raw: _raw, ...serialized } = stdSerializers.err(value) as unknown as Record<string, unknown>;
    return serialized;
  }
  if (depth > 8 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value))
    return value.some((v) => v instanceof Error || (v && typeof v === 'object')) ? value.map((v) => plainErrors(v, depth + 1)) : value;
  const entries = Object.entries(value as Record<string, unknown>);
  if (!entries.some(([, v]) => v !== null && typeof v === 'object')) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of entries)
    Object.defineProperty(out, k, { value: plainErrors(v, depth + 1), enumerable: true, writable: true, configurable: true });
  return out;
}
