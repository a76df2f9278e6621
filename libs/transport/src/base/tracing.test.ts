import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { propagation, trace, type TextMapPropagator } from '@opentelemetry/api';
import { carriedContext, inSpan, recording, traceCarrier } from './tracing.js';

// Without an SDK (as in every process that does not set OTEL_*), tracing is a no-op that carries
// nothing; a carried traceparent is read only when it is a valid W3C one. (With the SDK and a
// receiver: test/e2e/traces.test.ts.)

const TP = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

describe('tracing without an SDK', () => {
  it('records nothing, carries nothing, and runs the work as it is (its value and its error)', async () => {
    expect(recording()).toBe(false);
    expect(traceCarrier()).toEqual({});
    await expect(inSpan('x', {}, (span) => Promise.resolve(span.isRecording()))).resolves.toBe(false);
    await expect(inSpan('x', {}, () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
  });
});

/** A propagator that takes any traceparent as it is: what is refused below, carriedContext refused. */
const lenient: TextMapPropagator = {
  inject: () => undefined,
  extract: (ctx, carrier) => {
    const [, traceId = '', spanId = ''] = String((carrier as Record<string, string>).traceparent).split('-');
    return trace.setSpanContext(ctx, { traceId, spanId, traceFlags: 1, isRemote: true });
  },
  fields: () => ['traceparent'],
};

describe('carriedContext', () => {
  beforeAll(() => propagation.setGlobalPropagator(lenient));
  afterAll(() => propagation.disable());

  it('reads a valid W3C traceparent from job data', () => {
    const ctx = carriedContext({ v: 1, traceparent: TP });
    expect(trace.getSpanContext(ctx!)).toMatchObject({ traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7' });
  });

  it('ignores what is not one: missing, not a string, all-zero ids, another version, extra characters', () => {
    for (const data of [
      null,
      'x',
      {},
      { traceparent: 42 },
      { traceparent: '00-00000000000000000000000000000000-00f067aa0ba902b7-01' },
      { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01' },
      { traceparent: '01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
      { traceparent: `${TP} ` },
    ])
      expect(carriedContext(data)).toBeUndefined();
  });
});
