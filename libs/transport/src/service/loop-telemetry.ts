/**
 * The agent loops' telemetry, as their `Telemetry` port (libs/agent/src/ports.ts) asks for it:
 * client spans through {@link inSpan}, span events, and the model and approval metrics. The
 * services hand it to the loops; libs/agent never imports this package.
 */
import type { Attributes, Span } from '@opentelemetry/api';
import { metrics } from '../base/metrics.js';
import { SpanKind, inSpan, spanEvent } from '../base/tracing.js';

/** Spans and metrics of the agent loops. */
export const loopTelemetry = {
  clientSpan<T>(name: string, attributes: Attributes, fn: (span: Span) => Promise<T>): Promise<T> {
    return inSpan(name, { kind: SpanKind.CLIENT, attributes }, fn);
  },
  spanEvent(name: string, attributes?: Attributes): void {
    spanEvent(name, attributes);
  },
  modelCall(call: Parameters<typeof metrics.modelCall>[0]): void {
    metrics.modelCall(call);
  },
  approvalDecided(status: string, seconds: number): void {
    metrics.approvalDecided(status, seconds);
  },
};
