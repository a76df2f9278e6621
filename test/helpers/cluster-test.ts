import { TestCluster, type ClusterOptions } from './processes.js';
import { demoConfig, openContext, writeConfig, type TestContext } from './context.js';
import { openClient, type Client } from './harness.js';

/** A test file's own cluster: context, config, the service processes and a client. */
export interface ClusterTest {
  ctx: TestContext;
  env: Record<string, string>;
  cluster: TestCluster;
  client: Client;
  /** Closes the client, stops every process and closes the context. */
  close(): Promise<void>;
}

/**
 * Opens a context, lets `configure` change the demo config (it gets the context, e.g. for a file
 * in `ctx.dir`), writes it, starts gateway, coordinator and specialists (and `options.more`), all at
 * once (or, with `layout: 'colocated'`, that many `bosun serve` processes), and opens a client.
 * `BOSUN_TEST_TOOL_TRANSPORT=queue` (or `nats`) sets `gateway.transport` where `configure` leaves
 * it unset, to run a file's tests over either path of the tool calls. Without `layout`, the
 * cluster starts in `BOSUN_TEST_LAYOUT`'s (`testLayout()`, default split).
 */
export async function startClusterTest(
  label: string,
  configure: (config: Record<string, any>, ctx: TestContext) => void,
  options: Pick<ClusterOptions, 'specialists' | 'specialistArgs' | 'more' | 'layout'> = {},
): Promise<ClusterTest> {
  const ctx = await openContext(label);
  let cluster: TestCluster | undefined;
  try {
    const config = demoConfig();
    configure(config, ctx);
    const transport = process.env.BOSUN_TEST_TOOL_TRANSPORT;
    if (transport && config.gateway?.transport === undefined) config.gateway = { ...config.gateway, transport };
    const env = { ...ctx.env, BOSUN_CONFIG: writeConfig(ctx, config) };
    cluster = await TestCluster.start(env, {
      specialists: options.specialists ?? 1,
      specialistArgs: options.specialistArgs,
      more: options.more,
      layout: options.layout,
    });
    const client = await openClient(ctx);
    const started = cluster;
    return {
      ctx,
      env,
      cluster,
      client,
      async close() {
        await client.close();
        await started.stop();
        await ctx.close();
      },
    };
  } catch (err) {
    await cluster?.stop();
    await ctx.close();
    throw err;
  }
}
