import { describe, expect, it } from 'vitest';
import { startTracing, tracingWanted } from './index.js';

// When a service starts the SDK: only when the standard variables ask (the spans themselves,
// exported to a receiver, are tested end to end in test/e2e/traces.test.ts).

describe('tracingWanted', () => {
  it('is off without OTEL variables, and with OTEL_TRACES_EXPORTER=none whatever the endpoint', () => {
    expect(tracingWanted({})).toBe(false);
    expect(tracingWanted({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(false);
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: '' })).toBe(false);
  });

  it('is on with an OTLP endpoint (or the traces-only one), or OTEL_TRACES_EXPORTER=otlp', () => {
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(true);
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).toBe(true);
    expect(tracingWanted({ OTEL_TRACES_EXPORTER: 'otlp' })).toBe(true);
  });
});

describe('startTracing', () => {
  it('starts nothing when not wanted', () => {
    expect(startTracing('coordinator', {})).toBeUndefined();
  });

  it('refuses an exporter Bosun does not ship, naming the variable', () => {
    expect(() => startTracing('coordinator', { OTEL_TRACES_EXPORTER: 'zipkin' })).toThrow(
      'OTEL_TRACES_EXPORTER: "zipkin" is not supported (Bosun exports traces with "otlp", or "none")',
    );
  });
});
