import { parseArgs, type ParseArgsConfig } from 'node:util';
import { errorMessage } from '@bosun/contract';
import { CliError } from './errors.js';

/** Bad usage of a command: exit 2, with the message (and the usage text when `showUsage`). */
export class UsageError extends CliError {
  /** Print the usage text after the message (not for, say, a file that cannot be read). */
  readonly showUsage: boolean;

  constructor(message: string, options: { showUsage?: boolean } = {}) {
    super('usage', message);
    this.name = 'UsageError';
    this.showUsage = options.showUsage ?? true;
  }
}

/** The options of a command, as `node:util` parseArgs takes them. */
export type Options = NonNullable<ParseArgsConfig['options']>;

/** A command's arguments as {@link parseCommand} returns them. */
export type Parsed<O extends Options> = ReturnType<typeof parseArgs<{ args: string[]; options: O; allowPositionals: true; strict: true }>>;

/**
 * Parses a command's arguments strictly (`node:util` parseArgs): an unknown option, an option
 * without its value, or more than `positionals` arguments is a {@link UsageError} naming it.
 */
export function parseCommand<O extends Options>(command: string, args: string[], options: O, positionals: number): Parsed<O> {
  let parsed: Parsed<O>;
  try {
    parsed = parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(`${command}: ${errorMessage(err)}`);
  }
  if (parsed.positionals.length > positionals)
    throw new UsageError(`${command}: unexpected argument "${parsed.positionals[positionals] ?? ''}"`);
  return parsed;
}

/** An option's value as a whole number from `range.min` to `range.max`, else a {@link UsageError} naming the option. */
export function integerOption(command: string, name: string, text: string, range: { min: number; max: number }): number {
  const { min, max } = range;
  const n = Number(text);
  if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
    throw new UsageError(`${command}: --${name} must be a whole number from ${min} to ${max} (got "${text}")`);
  }
  return n;
}

/** An option's value as a positive number of seconds (decimals allowed), else a {@link UsageError} naming the option. */
export function secondsOption(command: string, name: string, text: string, max = 7 * 24 * 3600): number {
  const n = Number(text);
  if (!/^\d+(\.\d+)?$/.test(text.trim()) || !(n > 0) || n > max) {
    throw new UsageError(`${command}: --${name} must be a positive number of seconds, at most ${max} (got "${text}")`);
  }
  return n;
}
