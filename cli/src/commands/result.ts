import { Job, Queue, QueueEvents } from 'bullmq';
import { INCIDENTS_QUEUE, RunResult, parseStored, runIdFor, errorMessage } from '@bosun/contract';
import { UsageError, secondsOption } from '../args.js';
import { defineRedisCommand, type RedisDeps } from '../command.js';
import { escapeControl, printJson } from '../terminal.js';

/** Prints a run result once it parses with the contract's `RunResult` (one that does not is a failure naming its fields, exit 1). */
function printResult(id: string, value: unknown): number {
  printJson(parseStored(RunResult, value, `the result of incident ${id}`));
  return 0;
}

/** Waits up to `timeoutS` for the incident job to finish, and prints its result. */
async function waitForResult(deps: RedisDeps, job: Job, timeoutS: number): Promise<number> {
  const eventsConnection = deps.redis.duplicate();
  const events = new QueueEvents(INCIDENTS_QUEUE, { connection: eventsConnection, prefix: deps.prefix });
  try {
    await events.waitUntilReady();
    let value: unknown;
    try {
      value = await job.waitUntilFinished(events, timeoutS * 1000);
    } catch (err) {
      process.stderr.write(`incident ${String(job.id)}: ${errorMessage(err)}\n`);
      return 1;
    }
    return printResult(String(job.id), value);
  } finally {
    await events.close();
    eventsConnection.disconnect();
  }
}

/** `bosun result <incidentId> [--wait] [--timeout <s>]`: an incident's run result (JSON). */
export const resultCommand = defineRedisCommand({
  name: 'result',
  usage: `  bosun result <incidentId> [--wait] [--timeout <s>]
                                    print an incident's run result (JSON)`,
  options: { wait: { type: 'boolean', default: false }, timeout: { type: 'string', default: '600' } },
  positionals: 1,
  check({ positionals, values }) {
    const id = positionals[0];
    if (!id) throw new UsageError('result needs an incident id');
    return { id, wait: values.wait, timeoutS: secondsOption('result', 'timeout', values.timeout) };
  },
  async handler({ id, wait, timeoutS }, deps) {
    const queue = new Queue(INCIDENTS_QUEUE, { connection: deps.redis, prefix: deps.prefix });
    try {
      const job = await Job.fromId(queue, id);
      if (!job) {
        process.stderr.write(`no incident ${id} under BOSUN_PREFIX=${deps.prefix}\n`);
        return 1;
      }
      const state = await job.getState();
      if (state === 'completed') return printResult(id, job.returnvalue);
      if (state === 'failed') {
        process.stderr.write(`${escapeControl(`incident ${id} failed: ${job.failedReason}`)}\n`);
        return 1;
      }
      if (!wait) {
        process.stderr.write(`incident ${id} is ${state} (run ${runIdFor(id, job.timestamp)}); use --wait to wait for it\n`);
        return 3;
      }
      return await waitForResult(deps, job, timeoutS);
    } finally {
      await queue.close();
    }
  },
});
