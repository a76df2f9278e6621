import { describe, expect, it } from 'vitest';

import { ConfigError, parseClusterConfig } from './cluster.js';
import { formatDuration, parseDuration } from './retention.js';

/** A small valid raw config with a `retention:` section. */
function withRetention(retention: unknown, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    specialists: {
      kubernetes: { description: 'pods', tools: [], outputSchema: { type: 'object', properties: { summary: { type: 'string' } } } },
    },
    ...(retention === undefined ? {} : { retention }),
    ...extra,
  };
}
const parse = (retention: unknown, extra?: Record<string, unknown>) =>
  parseClusterConfig(withRetention(retention, extra), { file: 'bosun.yaml', env: {} }).retention;
const failure = (retention: unknown, extra?: Record<string, unknown>): string => {
  try {
    parse(retention, extra);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('expected a ConfigError');
};

describe('retention', () => {
  it("defaults to what Bosun kept before the section: 7 days, run results left to their publisher, the stream's 7 d / 1 GiB / 1,000,000", () => {
    expect(parse(undefined)).toEqual({
      checkpoints: 604_800,
      taskResults: 604_800,
      runResults: null,
      toolRecords: 604_800,
      events: { maxAge: 604_800, maxBytes: 1024 ** 3, maxMessages: 1_000_000 },
      audit: { maxEntries: 100_000 },
    });
  });

  it('reads durations, sizes and forever', () => {
    expect(
      parse({ checkpoints: '1d', taskResults: '36h', runResults: '7d', toolRecords: 86_400, events: { maxAge: '2d', maxBytes: '512MiB' } }),
    ).toMatchObject({
      checkpoints: 86_400,
      taskResults: 129_600,
      runResults: 604_800,
      toolRecords: 86_400,
      events: { maxAge: 172_800, maxBytes: 512 * 1024 ** 2, maxMessages: 1_000_000 },
    });
    expect(parse({ runResults: 'forever' }).runResults).toBeNull();
    expect([parseDuration('90m'), parseDuration('45 s'), parseDuration('7 days'), parseDuration(0), parseDuration(1.5)]).toEqual([
      5400,
      45,
      undefined,
      undefined,
      undefined,
    ]);
    expect([formatDuration(604_800), formatDuration(5400), formatDuration(61), formatDuration(null)]).toEqual([
      '7d',
      '90m',
      '61s',
      'forever',
    ]);
  });

  it('names the field and what is wrong', () => {
    expect(failure({ checkpoints: '7 days' })).toMatch(
      /^bosun\.yaml: retention\.checkpoints: must be a duration such as 7d, 12h or 90m, or a whole number of seconds \(got "7 days"\)/,
    );
    expect(failure({ toolRecords: '30m' })).toMatch(/retention\.toolRecords: must be at least 1h \(got 30m\)/);
    expect(failure({ events: { maxBytes: '1TB' } })).toMatch(/retention\.events\.maxBytes: must be a size of at least 1MiB/);
    expect(failure({ audit: { maxEntries: 10 } })).toMatch(/retention\.audit\.maxEntries/);
    expect(failure({ checkpoint: '1d' })).toMatch(/retention.*checkpoint/);
  });

  it('keeps the records of calls as long as the checkpoints a task resumes from, and every kind longer than a run', () => {
    expect(failure({ checkpoints: '2d', toolRecords: '1d' })).toBe(
      'bosun.yaml: retention.toolRecords (1d) is shorter than retention.checkpoints (2d): a task resumed from its checkpoint must still find the records of its calls, or a call could run twice',
    );
    expect(failure({ taskResults: '1h' }, { coordinator: { runDeadlineMs: 7_200_000 } })).toBe(
      "bosun.yaml: retention.taskResults (1h) is shorter than coordinator.runDeadlineMs (2h): a run's data must outlive the run",
    );
  });
});
