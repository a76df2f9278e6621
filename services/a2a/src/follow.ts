/**
 * A run's events from the JetStream stream, from its first event: a stream opened late, or
 * reopened after a disconnect, replays what it missed. Between events it yields `tick`s, so
 * the caller can look at the run itself (an event lost while NATS was away never hangs a stream).
 */
import { DeliverPolicy, jetstream, type Consumer } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { RunEvent, runSubject, runsStreamName, sleep } from '@bosun/contract';
import { SeqOrder } from '@bosun/transport';

/** One step of {@link followRun}: an event, or a quiet interval. */
export type FollowStep = { kind: 'event'; event: RunEvent } | { kind: 'tick' };

const TICK_MS = 2_000;

async function openConsumer(nc: NatsConnection, prefix: string, runId: string): Promise<Consumer | undefined> {
  try {
    return await jetstream(nc).consumers.get(runsStreamName(prefix), {
      filter_subjects: runSubject(prefix, runId),
      deliver_policy: DeliverPolicy.All,
    });
  } catch {
    // The stream may not exist yet (no event published under this prefix): look again at the next tick.
    return undefined;
  }
}

function parseEvent(m: { json(): unknown }): RunEvent | undefined {
  try {
    const parsed = RunEvent.safeParse(m.json());
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** Follows a run's events, each once and in `seq` order, until `signal` aborts; NATS may be away (null): only ticks then. */
export async function* followRun(
  nats: () => NatsConnection | null,
  prefix: string,
  runId: string,
  signal: AbortSignal,
): AsyncGenerator<FollowStep> {
  let consumer: Consumer | undefined;
  const order = new SeqOrder();
  while (!signal.aborted) {
    const nc = nats();
    if (!consumer && nc) consumer = await openConsumer(nc, prefix, runId);
    if (!consumer) {
      await sleep(TICK_MS / 4);
      yield { kind: 'tick' };
      continue;
    }
    // A fetch that fails (NATS away or reconnecting) counts as a quiet interval: the caller looks
    // at the run itself on the tick, and the next fetch goes on from where the consumer stands.
    const m = await consumer.next({ expires: TICK_MS }).catch(() => null);
    if (signal.aborted) return;
    const ready = m ? order.push(parseEvent(m) ?? ({ seq: 0 } as RunEvent)) : order.skipGap().ready;
    for (const event of ready) yield { kind: 'event', event };
    if (!m) yield { kind: 'tick' };
  }
}
