import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UnrecoverableError, type Job } from 'bullmq';
import { DeliveryConfigSchema, type Logger, type WorkersConfig } from '@bosun/config';
import type { DeliveryJob } from '@bosun/contract';
import type { DeadLetters, RedisClient } from '@bosun/transport';
import { DeliveryProcessor } from './delivery-worker.js';

// A sink that answers 3xx (issue 19, item 10): the redirect is not followed, and the delivery
// ends at once as a `delivery` dead letter saying why, instead of being retried like a 5xx.

let sink: Server;
let target: Server;
const targetHits: string[] = [];
let sinkHits = 0;

const listen = (s: Server) => new Promise<number>((resolve) => s.listen(0, '127.0.0.1', () => resolve((s.address() as AddressInfo).port)));

beforeAll(async () => {
  target = createServer((req, res) => {
    targetHits.push(`${req.method} ${req.url}`);
    res.end('ok');
  });
  const targetPort = await listen(target);
  sink = createServer((req, res) => {
    sinkHits++;
    req.resume();
    const status = Number(req.url?.slice(1));
    res.writeHead(status, { location: `http://127.0.0.1:${targetPort}/moved?token=secret-of-the-target` }).end();
  });
  await listen(sink);
});

afterAll(async () => {
  await Promise.all([sink, target].map((s) => new Promise((r) => s.close(r))));
});

const deliveryJob: DeliveryJob = {
  v: 1,
  key: 'r0123456789abcdef0123.hook',
  sink: 'hook',
  incident: { id: 'inc-1', source: 'am', reason: 'X', severity: 'warning', title: '' },
  result: {
    v: 1,
    runId: 'r0123456789abcdef0123',
    incidentId: 'inc-1',
    status: 'completed',
    answer: 'fine',
    specialists: [],
    stalled: 0,
    startedAt: '2026-01-01T00:00:00Z',
    finishedAt: '2026-01-01T00:01:00Z',
  },
};

const silent = { info() {}, warn() {}, error() {}, debug() {} } as unknown as Logger;

function processor(status: number) {
  const letters: Parameters<DeadLetters['add']>[] = [];
  const { port } = sink.address() as AddressInfo;
  const delivery = DeliveryConfigSchema.parse({
    attempts: 5,
    sinks: { hook: { type: 'webhook', url: `http://127.0.0.1:${port}/${status}`, secret: 's' } },
  });
  // Only `exists` (already delivered?) and `set` (delivered) are used; neither is reached by a failure but `exists`.
  const redis = { exists: async () => 0, set: async () => 'OK' } as unknown as RedisClient;
  const p = new DeliveryProcessor({
    redis,
    prefix: 't',
    delivery,
    // The processor does not read them (only the worker it runs in does).
    workers: {} as WorkersConfig,
    deadLetters: { add: async (...args: Parameters<DeadLetters['add']>) => (letters.push(args), {} as never) },
    log: silent,
  });
  const job = { id: 'j1', name: 'delivery', data: deliveryJob, attemptsMade: 0, opts: { attempts: 5 } } as unknown as Job;
  return { run: () => p.process(job), letters };
}

describe('a sink answering 3xx', () => {
  for (const status of [301, 302, 307, 308]) {
    it(`${status}: not followed, a dead letter on the first attempt naming the status`, async () => {
      const { run, letters } = processor(status);
      const before = sinkHits;
      await expect(run()).rejects.toBeInstanceOf(UnrecoverableError);
      expect(sinkHits - before).toBe(1);
      expect(targetHits).toEqual([]);
      expect(letters).toHaveLength(1);
      const [entry, id] = letters[0]!;
      expect(id).toBe('delivery-j1');
      expect(entry.reason).toBe(
        `delivery of the answer of run r0123456789abcdef0123 to sink hook failed after 1 attempt(s): sink hook: HTTP ${status} (a redirect, not followed: set the sink's url to the final address)`,
      );
      expect(entry.reason).not.toContain('secret-of-the-target');
    });
  }

  it('a 503 is still retried (the attempt throws for BullMQ, no dead letter yet)', async () => {
    const { run, letters } = processor(503);
    await expect(run()).rejects.not.toBeInstanceOf(UnrecoverableError);
    expect(letters).toEqual([]);
  });
});
