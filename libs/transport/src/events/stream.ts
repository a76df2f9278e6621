import { jetstreamManager, RetentionPolicy, StorageType, DiscardPolicy } from '@nats-io/jetstream';
import { nanos, type NatsConnection } from '@nats-io/transport-node';
import { allRunsSubject, runsStreamName } from '@bosun/contract';

/** Retention of the runs stream. */
export interface RunsStreamLimits {
  /** Default 7 days. */
  maxAgeMs?: number;
  /** Default 1 GiB. */
  maxBytes?: number;
  /** Default 1,000,000 messages. */
  maxMsgs?: number;
  /** Stream replicas (3 on a NATS cluster); default 1. */
  replicas?: number;
}

/**
 * Makes sure the JetStream stream `<prefix>-runs` captures `<prefix>.runs.>` with bounded
 * retention, so an observer that subscribes late can replay a whole run. Idempotent.
 *
 * With a limit given (`maxAgeMs`, `maxBytes` or `maxMsgs`: a service applying the config's
 * `retention.events`), an existing stream is updated to the limits. Without one (the CLI, which
 * reads no config), a missing stream is created with the defaults and an existing one is left as
 * the services configured it.
 */
export async function ensureRunsStream(nc: NatsConnection, prefix: string, limits: RunsStreamLimits = {}): Promise<string> {
  const jsm = await jetstreamManager(nc);
  const name = runsStreamName(prefix);
  const config = {
    name,
    subjects: [allRunsSubject(prefix)],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    max_age: nanos(limits.maxAgeMs ?? 7 * 24 * 3600 * 1000),
    max_bytes: limits.maxBytes ?? 1024 ** 3,
    max_msgs: limits.maxMsgs ?? 1_000_000,
    num_replicas: limits.replicas ?? 1,
  };
  const configures = limits.maxAgeMs !== undefined || limits.maxBytes !== undefined || limits.maxMsgs !== undefined;
  try {
    await jsm.streams.info(name);
    if (configures) await jsm.streams.update(name, config);
  } catch {
    try {
      await jsm.streams.add(config);
    } catch (err) {
      // Another service may have created it between our two calls.
      await jsm.streams.info(name).catch(() => {
        throw err;
      });
    }
  }
  return name;
}

/** Deletes the runs stream of a prefix (tests clean up with it). */
export async function deleteRunsStream(nc: NatsConnection, prefix: string): Promise<void> {
  const jsm = await jetstreamManager(nc);
  // A stream that does not exist (never created, or deleted already) is what the caller wants.
  await jsm.streams.delete(runsStreamName(prefix)).catch(() => undefined);
}
