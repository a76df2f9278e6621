import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger } from 'pino';

/** Paths pino redacts wherever they appear in a log object. */
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
}

/**
 * The service logger: JSON lines with the service name, secrets redacted by path
 * ({@link REDACT_PATHS}), and any known secret value scrubbed from messages.
 */
export function createLogger(options: LoggerOptions): Logger {
  const secrets = knownSecrets();
  const wanted = options.level ?? 'info';
  const valid = wanted in pino.levels.values || wanted === 'silent';
  const logger = pino(
    {
      name: options.service,
      level: valid ? wanted : 'info',
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      hooks: {
        logMethod(args, method) {
          // A secret can reach a message through an error text; scrub known values.
          if (secrets.length > 0) {
            args = args.map((a) => (typeof a === 'string' ? scrub(a, secrets) : a)) as typeof args;
          }
          method.apply(this, args);
        },
      },
    },
    options.destination,
  );
  if (!valid) {
    logger.warn(`LOG_LEVEL "${wanted}" is not a level (${Object.keys(pino.levels.values).join(', ')}, silent); using info`);
  }
  return logger;
}

/** Secret values from the environment that must never be printed. */
export function knownSecrets(env: NodeJS.ProcessEnv = process.env): string[] {
  return Object.entries(env)
    .filter(([k, v]) => v && v.length >= 6 && /KEY|TOKEN|SECRET|PASSWORD/i.test(k))
    .map(([, v]) => v as string);
}

/** Replaces every occurrence of each secret in `text` by `[redacted]`. */
export function scrub(text: string, secrets: readonly string[] = knownSecrets()): string {
  let out = text;
  for (const s of secrets) out = out.split(s).join('[redacted]');
  return out;
}
