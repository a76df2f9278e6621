/**
 * The shape of the command table: each command group (`commands/*.ts`) exports its commands —
 * usage text, options, a check of the parsed arguments and a handler — and `main` only finds
 * the command, parses, runs it and maps errors to exit codes.
 */
import type { BosunEnv } from '@bosun/config';
import { createRedis, waitForRedis, type RedisClient } from '@bosun/transport';
import { UsageError, parseCommand, type Options, type Parsed } from './args.js';

/** A command with its arguments parsed and checked, ready to run. Resolves with the exit code. */
export type Run = () => Promise<number>;

/** A command that runs with the environment, read once by `main` before the arguments are checked. */
export interface EnvCommand {
  /** The word that selects it: `bosun <name> …`. */
  readonly name: string;
  /** Its lines of `bosun --help`, indented as they appear there. */
  readonly usage: string;
  readonly standalone?: false;
  /** Parses and checks `args` (bad usage: a {@link UsageError} naming it) into what runs the command. */
  parse(args: string[], env: BosunEnv): Run;
}

/** A command that reads what it needs itself when it runs (`bosun demo`). */
export interface StandaloneCommand {
  readonly name: string;
  readonly usage: string;
  readonly standalone: true;
  parse(args: string[]): Run;
}

/** One entry of the command table. */
export type Command = EnvCommand | StandaloneCommand;

/** What a command is made of; see {@link defineCommand}. */
export interface CommandSpec<O extends Options, I> {
  name: string;
  usage: string;
  /** How argument errors name the command (`bosun: <label>: Unknown option …`); default `name`. */
  label?: string;
  /** Its options (`node:util` parseArgs, strict). */
  options: O;
  /** How many positional arguments it takes at most. */
  positionals: number;
  /** Checks the parsed arguments — bad usage is a {@link UsageError} — and returns what the handler needs. */
  check(parsed: Parsed<O>, env: BosunEnv): I;
  /** Does the work and returns the exit code. */
  handler(input: I, env: BosunEnv): Promise<number>;
}

/** A command from its spec: strict parsing, then the check, then the handler. */
export function defineCommand<O extends Options, I>(spec: CommandSpec<O, I>): EnvCommand {
  return {
    name: spec.name,
    usage: spec.usage,
    parse(args, env) {
      const input = spec.check(parseCommand(spec.label ?? spec.name, args, spec.options, spec.positionals), env);
      return () => spec.handler(input, env);
    },
  };
}

/** What a command that works on Redis gets: one connection, the key prefix, and the environment. */
export interface RedisDeps {
  redis: RedisClient;
  prefix: string;
  env: BosunEnv;
}

/** A command whose handler works on Redis: connected (waiting up to 5 s) after its arguments are checked. */
export function defineRedisCommand<O extends Options, I>(
  spec: Omit<CommandSpec<O, I>, 'handler'> & { handler(input: I, deps: RedisDeps): Promise<number> },
): EnvCommand {
  return defineCommand({
    ...spec,
    handler: (input, env) => withRedis(env, (redis) => spec.handler(input, { redis, prefix: env.prefix, env })),
  });
}

/** Runs `fn` with a Redis connection for the CLI (ready within 5 s), and disconnects. */
export async function withRedis<T>(env: BosunEnv, fn: (redis: RedisClient) => Promise<T>): Promise<T> {
  const redis = createRedis(env.redis, { name: 'bosun-cli' });
  // Connection errors surface through the commands (waitForRedis, then each command's own calls).
  redis.on('error', () => undefined);
  try {
    await waitForRedis(redis, env.redis, 5_000);
    return await fn(redis);
  } finally {
    redis.disconnect();
  }
}

/**
 * A command with sub-commands, `bosun <name> <sub> …`: without a sub-command (or with an option
 * first) it is `defaultSub`. An unknown one is a {@link UsageError} naming the known ones.
 */
export function commandGroup(name: string, subcommands: EnvCommand[], defaultSub: string): EnvCommand {
  const byName = new Map(subcommands.map((c) => [c.name, c]));
  return {
    name,
    usage: subcommands.map((c) => c.usage).join('\n'),
    parse(args, env) {
      const [first, ...more] = args;
      const sub = first === undefined || first.startsWith('-') ? defaultSub : first;
      const command = byName.get(sub);
      if (!command) throw new UsageError(`unknown ${name} command "${sub}" (${[...byName.keys()].join(', ')})`);
      return command.parse(sub === first ? more : args, env);
    },
  };
}
