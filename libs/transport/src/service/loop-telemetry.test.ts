import { describe, expect, it } from 'vitest';
import { loopTelemetry } from './loop-telemetry.js';
import { metrics } from '../base/metrics.js';

// The agent loops' telemetry port, as the services fill it: counts go to the process's metrics,
// and a span (none recorded without an SDK) hands back what its work returns or throws.

/** One series of a metric as prom-client reads it; a histogram's carry their name (`…_count`, `…_sum`, `…_bucket`). */
interface Series {
  value: number;
  labels: Partial<Record<string, string | number>>;
  metricName?: string;
}

/** The value of a metric's series with `labels` (a histogram's `_count` when `series` says so), 0 when absent. */
async function value(name: string, labels: Record<string, string>, series = name): Promise<number> {
  const metric = (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === name);
  const found = metric?.values.find(
    (v: Series) => (v.metricName ?? name) === series && Object.entries(labels).every(([k, l]) => v.labels[k] === l),
  );
  return Number(found?.value ?? 0);
}

describe('loopTelemetry', () => {
  it('counts model calls and approval waits in the process metrics', async () => {
    const labels = { agent: 'telemetry-test', provider: 'fake', outcome: 'ok' };
    const before = await value('bosun_model_calls_total', labels);
    loopTelemetry.modelCall({ agent: 'telemetry-test', provider: 'fake', outcome: 'ok', seconds: 0.2, inputTokens: 10 });
    expect(await value('bosun_model_calls_total', labels)).toBe(before + 1);
    const count = ['bosun_approval_wait_seconds', { status: 'telemetry-test' }, 'bosun_approval_wait_seconds_count'] as const;
    const waits = await value(...count);
    loopTelemetry.approvalDecided('telemetry-test', 3);
    expect(await value(...count)).toBe(waits + 1);
  });

  it("runs a span's work and hands back its result or its error unchanged", async () => {
    await expect(loopTelemetry.clientSpan('chat x', { 'gen_ai.request.model': 'x' }, async () => 42)).resolves.toBe(42);
    const boom = new Error('boom');
    await expect(
      loopTelemetry.clientSpan('chat x', {}, async () => {
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect(() => loopTelemetry.spanEvent('approval.parked', { 'bosun.approval.id': 'ap-1' })).not.toThrow();
  });
});
