import { describe, expect, it } from 'vitest';
import type { RedisClient } from '../base/connections.js';
import { keys } from '../keys.js';
import { readRunCancellation } from './runs.js';

const RUN = 'r0123456789abcdef0123';

/** A Redis that answers GET from a Map. */
function redisWith(entries: Record<string, string>): RedisClient {
  const data = new Map(Object.entries(entries));
  return { get: (key: string) => Promise.resolve(data.get(key) ?? null) } as unknown as RedisClient;
}

describe('readRunCancellation', () => {
  it('is null for a run nobody cancelled', async () => {
    expect(await readRunCancellation(redisWith({}), 'p', RUN)).toBeNull();
  });

  it('reads who cancelled the run, why and when', async () => {
    const record = { by: 'alice', reason: 'wrong incident', at: '2026-01-01T00:00:00.000Z' };
    const redis = redisWith({ [keys.cancelRun('p', RUN)]: JSON.stringify(record) });
    expect(await readRunCancellation(redis, 'p', RUN)).toEqual(record);
  });

  it.each([
    ['not JSON', '{"by": "al'],
    ['JSON of another shape', '{"who":"alice"}'],
    ['a JSON string', '"cancelled"'],
  ])('still reports a record that is %s as a cancellation (the key alone cancels the run), by "unknown"', async (_what, raw) => {
    const redis = redisWith({ [keys.cancelRun('p', RUN)]: raw });
    expect(await readRunCancellation(redis, 'p', RUN)).toEqual({
      by: 'unknown',
      reason: '(the cancel record could not be read)',
      at: new Date(0).toISOString(),
    });
  });
});
