import type { NatsConnection } from '@nats-io/transport-node';
import { RUN_ID_PATTERN, type RunEvent } from '@bosun/contract';
import { connectNats } from '@bosun/transport';
import { UsageError } from '../args.js';
import { defineCommand } from '../command.js';
import { SeqOrder, followEvents, formatEvent } from '../events.js';

/** How long `bosun watch <run>` waits for an event that another arrived ahead of. */
const WATCH_GAP_MS = 3_000;

/** Prints events; true once the run has ended. */
function printEvents(ready: RunEvent[]): boolean {
  for (const e of ready) {
    process.stdout.write(`${formatEvent(e)}\n`);
    if (e.type === 'run.completed' || e.type === 'run.failed') return true;
  }
  return false;
}

/**
 * One run's events, in `seq` order, until it ends. An event that arrives ahead of an earlier one
 * waits for it, at most {@link WATCH_GAP_MS}; then the missing ones are named and skipped.
 */
async function watchRun(events: AsyncGenerator<RunEvent>, runId: string, prefix: string): Promise<void> {
  const order = new SeqOrder();
  const it = events[Symbol.asyncIterator]();
  let next = it.next();
  // A run that has not started yet (or is not under this prefix) has no events: say so once.
  const quiet = setTimeout(
    () => process.stderr.write(`bosun watch: no events of run ${runId} under BOSUN_PREFIX=${prefix} yet; waiting (Ctrl-C to stop)\n`),
    5_000,
  );
  quiet.unref();
  for (;;) {
    const r = order.gapped
      ? await Promise.race([next, new Promise<'gap'>((res) => setTimeout(() => res('gap'), WATCH_GAP_MS).unref())])
      : await next;
    if (r === 'gap') {
      const { ready, missing } = order.skipGap();
      process.stderr.write(`bosun watch: events ${missing.join(', ')} of run ${runId} did not arrive within ${WATCH_GAP_MS} ms; skipped\n`);
      if (printEvents(ready)) break;
      continue;
    }
    if (r.done) break;
    clearTimeout(quiet);
    next = it.next();
    if (printEvents(order.push(r.value))) break;
  }
}

/** `bosun watch [runId] [--new]`: follows run events, replaying from the stream. */
export const watchCommand = defineCommand({
  name: 'watch',
  usage: '  bosun watch [runId] [--new]       follow run events (one run, in seq order; or all), replaying from the stream',
  options: { new: { type: 'boolean', default: false } },
  positionals: 1,
  check({ positionals, values }) {
    const runId = positionals[0];
    if (runId !== undefined && !RUN_ID_PATTERN.test(runId)) {
      throw new UsageError(`watch: "${runId}" is not a run id (r and 20 hex digits, as bosun publish prints it)`);
    }
    return { runId, from: values.new ? ('new' as const) : ('start' as const) };
  },
  async handler({ runId, from }, env) {
    const nc: NatsConnection = await connectNats(env.nats, { name: 'bosun-cli' });
    const ac = new AbortController();
    process.once('SIGINT', () => ac.abort());
    try {
      const events = followEvents(nc, { prefix: env.prefix, ...(runId ? { runId } : {}), from, signal: ac.signal });
      if (!runId) {
        for await (const e of events) process.stdout.write(`${formatEvent(e)}\n`);
        return 0;
      }
      await watchRun(events, runId, env.prefix);
      // A read may still be pending: stopping the consumer ends it, then the generator returns.
      ac.abort();
      await events.return(undefined);
    } finally {
      await nc.close();
    }
    return 0;
  },
});
