import { describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { DeliveryConfigSchema, parseClusterConfig, type ClusterConfig } from '@bosun/config';
import type { DeadLetter, RunResult } from '@bosun/contract';
import { MemoryCheckpointStore, MemoryEventSink, type DeadLetterInput } from '@bosun/transport';
import { Coordinator } from './coordinator.js';

// When the run's deliveries cannot be queued, the run still ends with its result, and each
// delivery is kept as a `delivery` dead letter.

const silent = { info() {}, warn() {}, error() {}, debug() {}, fatal() {}, trace() {}, child: () => silent } as any;

describe('Coordinator: deliveries that cannot be queued', () => {
  it('become delivery dead letters holding each delivery', async () => {
    // Nothing listens on port 1, and commands fail at once instead of waiting for a connection.
    const redis = new Redis({ port: 1, lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
    redis.on('error', () => undefined);
    const base = parseClusterConfig(
      { specialists: { k: { description: 'd', outputSchema: { type: 'object', properties: { summary: { type: 'string' } } } } } },
      { file: 'test' },
    );
    const config = {
      ...base,
      delivery: DeliveryConfigSchema.parse({ sinks: { a: { type: 'slack', url: 'http://x' } }, defaultSinks: ['a'] }),
    } as ClusterConfig;
    const letters: { entry: DeadLetterInput; id: string | undefined }[] = [];
    const coordinator = new Coordinator({
      redis,
      prefix: 't',
      config,
      model: {} as any,
      events: new MemoryEventSink(),
      checkpoints: new MemoryCheckpointStore(),
      deadLetters: { add: async (entry: DeadLetterInput, id?: string) => (letters.push({ entry, id }), entry as DeadLetter) },
      log: silent,
    });
    const result: RunResult = {
      v: 1,
      runId: 'r0123456789abcdef0123',
      incidentId: 'inc-1',
      status: 'completed',
      answer: 'ok',
      specialists: [],
      stalled: 0,
      startedAt: 'a',
      finishedAt: 'b',
    };
    const incident = { id: 'inc-1', source: 's', reason: 'r', summary: 'x' };
    await (coordinator as any).deliver(incident, result);
    expect(letters).toEqual([
      {
        id: 'delivery-r0123456789abcdef0123-a',
        entry: expect.objectContaining({
          kind: 'delivery',
          runId: result.runId,
          input: expect.objectContaining({ key: `${result.runId}.a`, result }),
        }),
      },
    ]);
    await coordinator.close().catch(() => undefined);
    redis.disconnect();
  });
});
