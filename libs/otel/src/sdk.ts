/*
 * The OpenTelemetry SDK as a service runs it, imported by `startTracing` only when traces are
 * wanted. Its packages are imported here by name, statically, and this module lazily: the
 * packages are CommonJS, and a lazy `import()` of a CommonJS package inside a bundle
 * (scripts/bundle.mjs) yields only its `default`, where Node.js would also give the named exports.
 */
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';

/** Registers the global tracer provider of `serviceName`; resolves to its shutdown. */
export function registerSdk(serviceName: string): { shutdown(): Promise<void> } {
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': serviceName }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  provider.register({ propagator: new W3CTraceContextPropagator() });
  return { shutdown: () => provider.shutdown() };
}
