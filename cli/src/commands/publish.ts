import { Queue } from 'bullmq';
import { INCIDENTS_QUEUE } from '@bosun/contract';
import { UsageError } from '../args.js';
import { defineRedisCommand } from '../command.js';
import { cliIdentity } from '../identity.js';
import { publishOrReplace, readIncident, reportPublished } from '../publish.js';

/** `bosun publish <file|->`: validates an incident and publishes it; prints the run id. */
export const publishCommand = defineRedisCommand({
  name: 'publish',
  usage: `  bosun publish <file|->            validate an incident (JSON) and publish it; prints the run id. An
                                    incident whose job was rejected as poison is replaced by the new one.
                                    With BOSUN_TOKEN, the run's requester is that person`,
  options: {},
  positionals: 1,
  check({ positionals }, env) {
    const file = positionals[0];
    if (!file) throw new UsageError('publish needs a file name, or - for standard input');
    // Read before connecting: a file that cannot be read, or is not JSON, is bad input (exit 2).
    const input = readIncident(file);
    if (typeof input !== 'object' || input === null || Array.isArray(input)) return input;
    // Who started the run is the person of BOSUN_TOKEN, verified, or nobody: never what the file says.
    const { requestedBy: _typed, ...incident } = input as Record<string, unknown>;
    if (env.operatorToken === undefined) return incident;
    const who = cliIdentity(env, { role: 'read', what: 'publishing an incident', by: env.user ?? 'operator' });
    return { ...incident, requestedBy: who.actor.name };
  },
  async handler(input, { redis, prefix }) {
    const queue = new Queue(INCIDENTS_QUEUE, { connection: redis, prefix });
    try {
      return reportPublished(await publishOrReplace({ redis, prefix }, queue, input));
    } finally {
      await queue.close();
    }
  },
});
