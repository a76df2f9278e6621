import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BadStoredValueError } from '@bosun/contract';
import { openContext, type TestContext } from '../../../../test/helpers/context.js';

import { keys } from '../keys.js';
import { RunUsageLedger } from './usage-ledger.js';

// The run's usage ledger against a real Redis: parts write totals, a repeated write counts once.

let ctx: TestContext;
let ledger: RunUsageLedger;
const usage = (toolCalls: number, costUsd = 0) => ({ inputTokens: 100, outputTokens: 10, modelCalls: 2, toolCalls, costUsd });

beforeAll(async () => {
  ctx = await openContext('usage-ledger');
  ledger = new RunUsageLedger({ redis: ctx.redis, prefix: ctx.prefix });
});
afterAll(async () => {
  await ctx?.close();
});

describe('RunUsageLedger', () => {
  it('sums the parts, each counted once however often it writes, and expires with the run', async () => {
    expect(await ledger.total('r-empty')).toEqual({ inputTokens: 0, outputTokens: 0, modelCalls: 0, toolCalls: 0, costUsd: 0 });
    await ledger.record('r1', 'task-a', usage(1, 0.001));
    await ledger.record('r1', 'task-a', usage(2, 0.002));
    await ledger.record('r1', 'task-b', usage(3, 0.0005));
    expect(await ledger.total('r1')).toEqual({ inputTokens: 200, outputTokens: 20, modelCalls: 4, toolCalls: 5, costUsd: 0.0025 });
    expect(await ctx.redis.ttl(keys.usage(ctx.prefix, 'r1'))).toBeGreaterThan(6 * 24 * 3600);
  });

  it('names a stored total that does not parse', async () => {
    await ctx.redis.hset(keys.usage(ctx.prefix, 'r2'), 'task-x', '{"toolCalls":"many"}');
    await expect(ledger.total('r2')).rejects.toBeInstanceOf(BadStoredValueError);
    await expect(ledger.total('r2')).rejects.toThrow(/usage of task-x in run r2/);
  });
});
