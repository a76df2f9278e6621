import { startService, type ServiceKind, type ServiceProcess } from './processes.js';
import { demoConfig, openContext, writeConfig, type TestContext } from './context.js';

/** A test file's one service process (test/service): context, config and the process, no cluster. */
export interface ServiceTest {
  ctx: TestContext;
  /** The environment the service got (context, config file, `env` of the options). */
  env: Record<string, string>;
  service: ServiceProcess;
  /** Stops the service (SIGTERM; resolves with how it ended) and closes the context. */
  close(): Promise<void>;
}

/** Options of {@link startServiceTest}. */
export interface ServiceTestOptions {
  /** More environment for the service, over the context's (secrets, ports). */
  env?: Record<string, string>;
  /** The service's command-line arguments. */
  args?: string[];
}

/**
 * Opens a context, lets `configure` change the demo config (it gets the context, e.g. for a file
 * in `ctx.dir`), writes it, and starts one `kind` process at `LOG_LEVEL=info` with a bounded
 * tail of its output (printed when a test fails); resolves once the process is ready. For the
 * surface of one service — its HTTP API, its refusals, what it logs — without a whole cluster:
 * a run it needs finished can be routed to nobody (`payload: { fake: { route: ['nobody'] } }`
 * ends at once, partial, with no specialist).
 */
export async function startServiceTest(
  label: string,
  kind: ServiceKind,
  configure: (config: Record<string, any>, ctx: TestContext) => void = () => undefined,
  options: ServiceTestOptions = {},
): Promise<ServiceTest> {
  const ctx = await openContext(label);
  let service: ServiceProcess | undefined;
  try {
    const config = demoConfig();
    configure(config, ctx);
    const env = { ...ctx.env, BOSUN_CONFIG: writeConfig(ctx, config), ...options.env };
    service = startService(kind, env, { args: options.args });
    await service.ready();
    const started = service;
    return {
      ctx,
      env,
      service,
      async close() {
        await started.stop();
        await ctx.close();
      },
    };
  } catch (err) {
    await service?.stop();
    await ctx.close();
    throw err;
  }
}
