#!/usr/bin/env node
/**
 * The `bosun` command: finds the command in the table (`commands/`), parses its arguments, runs
 * it, and maps errors to exit codes — 0 ok, 1 failure, 2 bad input or usage, 3 not finished yet
 * (a command returns 3 itself).
 */
import { InvalidInputError, errorMessage } from '@bosun/contract';
import { ConfigError, readEnv } from '@bosun/config';
import { UsageError } from './args.js';
import { COMMANDS, USAGE } from './commands/index.js';
import { OperatorError } from './operator.js';
import { escapeControl, exitAfterFlush, watchOutputErrors } from './terminal.js';

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return name ? 0 : 2;
  }
  const command = COMMANDS.get(name);
  if (command?.standalone) return command.parse(rest)();
  // The environment is read first: a bad one is named before the arguments are checked.
  const env = readEnv();
  if (!command) throw new UsageError(`unknown command "${name}"`);
  return command.parse(rest, env)();
}

/** Says what went wrong on stderr and returns the exit code. */
function reportError(err: unknown): number {
  const say = (message: string) => process.stderr.write(`bosun: ${escapeControl(message)}\n`);
  if (err instanceof UsageError) {
    process.stderr.write(`bosun: ${escapeControl(err.message)}\n${err.showUsage ? `\n${USAGE}\n` : ''}`);
    return 2;
  }
  if (err instanceof OperatorError) {
    say(err.message);
    return err.exitCode;
  }
  if (err instanceof InvalidInputError || err instanceof ConfigError) {
    say(err.message);
    return 2;
  }
  say(errorMessage(err));
  return 1;
}

watchOutputErrors();

main(process.argv.slice(2)).then(
  (code) => exitAfterFlush(code),
  (err: unknown) => exitAfterFlush(reportError(err)),
);
