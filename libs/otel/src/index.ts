import { ConfigError } from '@bosun/config';

/** The SDK of a service, started by {@link startTracing}. */
export interface Tracing {
  /** Exports the spans still buffered and stops the SDK. */
  shutdown(): Promise<void>;
}

type Env = Record<string, string | undefined>;

/**
 * Whether the environment asks for traces: `OTEL_EXPORTER_OTLP_ENDPOINT` (or its traces-only
 * form) or `OTEL_TRACES_EXPORTER` is set, and `OTEL_TRACES_EXPORTER` is not `none`.
 */
export function tracingWanted(env: Env = process.env): boolean {
  const exporter = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase();
  if (exporter === 'none') return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || exporter);
}

/**
 * Starts the OpenTelemetry SDK of a service when {@link tracingWanted}: spans batched to an
 * OTLP/HTTP exporter (JSON; the endpoint, headers and timeouts from the standard
 * `OTEL_EXPORTER_OTLP_*` variables, the batching from `OTEL_BSP_*`), W3C trace context, and
 * `service.name` from `OTEL_SERVICE_NAME` or `bosun-<service>`. Returns undefined, and starts
 * nothing, otherwise: then every span of the libs (`@opentelemetry/api`) is a no-op. Throws a
 * ConfigError for an `OTEL_TRACES_EXPORTER` other than `otlp` or `none` at once; the SDK's
 * packages load only when traces are wanted (about 0.5 s of CPU at every start otherwise), so
 * the SDK is running when the returned promise resolves.
 */
export function startTracing(service: string, env: Env = process.env): Promise<Tracing> | undefined {
  if (!tracingWanted(env)) return undefined;
  const exporter = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase();
  if (exporter && exporter !== 'otlp')
    throw new ConfigError(`OTEL_TRACES_EXPORTER: "${exporter}" is not supported (Bosun exports traces with "otlp", or "none")`);
  return startSdk(env.OTEL_SERVICE_NAME || `bosun-${service}`);
}

async function startSdk(serviceName: string): Promise<Tracing> {
  const { registerSdk } = await import('./sdk.js');
  return registerSdk(serviceName);
}
