import { Queue } from 'bullmq';
import { INCIDENTS_QUEUE } from '@bosun/contract';
import { UsageError } from '../args.js';
import { defineRedisCommand } from '../command.js';
import { publishOrReplace, readIncident, reportPublished } from '../publish.js';

/** `bosun publish <file|->`: validates an incident and publishes it; prints the run id. */
export const publishCommand = defineRedisCommand({
  name: 'publish',
  usage: `  bosun publish <file|->            validate an incident (JSON) and publish it; prints the run id. An
                                    incident whose job was rejected as poison is replaced by the new one`,
  options: {},
  positionals: 1,
  check({ positionals }) {
    const file = positionals[0];
    if (!file) throw new UsageError('publish needs a file name, or - for standard input');
    // Read before connecting: a file that cannot be read, or is not JSON, is bad input (exit 2).
    return readIncident(file);
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
