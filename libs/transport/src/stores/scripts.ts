import type { RedisClient } from '../base/connections.js';

type ScriptCommand = (...keysAndArgv: string[]) => Promise<unknown>;

/**
 * Runs a Lua script registered once per connection (then sent as EVALSHA, not as text), with its
 * `keys` first. Every script of the stores goes through here, so each is defined in one place.
 */
export function runScript(redis: RedisClient, script: { name: string; lua: string }, keyList: string[], argv: string[]): Promise<unknown> {
  const commands = redis as unknown as Record<string, ScriptCommand | undefined>;
  if (!commands[script.name]) redis.defineCommand(script.name, { numberOfKeys: keyList.length, lua: script.lua });
  return commands[script.name]!.apply(redis, [...keyList, ...argv]);
}
