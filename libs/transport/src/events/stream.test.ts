import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstreamManager } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import { runsStreamName } from '@bosun/contract';
import { openContext, type TestContext } from '../../../../test/helpers/context.js';

import { ensureRunsStream } from './stream.js';

// The runs stream against a real NATS with JetStream: a service applying `retention.events`
// sets its limits; a caller without limits (the CLI) creates a missing stream with the defaults
// and never resets what the services configured.

let ctx: TestContext;
beforeAll(async () => {
  ctx = await openContext('stream');
});
afterAll(async () => {
  await ctx?.close();
});

describe('ensureRunsStream', () => {
  it('applies the configured limits, and a caller without limits leaves them as they are', async () => {
    const jsm = await jetstreamManager(ctx.nats);
    const limits = async () => {
      const { config } = await jsm.streams.info(runsStreamName(ctx.prefix));
      return [config.max_age, config.max_bytes, config.max_msgs];
    };
    // Created by the CLI first: the defaults.
    await ensureRunsStream(ctx.nats, ctx.prefix, { replicas: 1 });
    expect(await limits()).toEqual([nanos(7 * 86_400_000), 1024 ** 3, 1_000_000]);
    // A service with `retention.events`.
    await ensureRunsStream(ctx.nats, ctx.prefix, { replicas: 1, maxAgeMs: 2 * 86_400_000, maxBytes: 64 * 1024 ** 2, maxMsgs: 50_000 });
    expect(await limits()).toEqual([nanos(2 * 86_400_000), 64 * 1024 ** 2, 50_000]);
    // The CLI again (`bosun approve`, the console): nothing changes.
    await ensureRunsStream(ctx.nats, ctx.prefix, { replicas: 1 });
    expect(await limits()).toEqual([nanos(2 * 86_400_000), 64 * 1024 ** 2, 50_000]);
  });
});
