import { ProcessGroup, READY_LINE, type ServiceProcess } from '@bosun/transport';
import { ENTRY } from './paths.js';

export { READY_LINE, type ServiceProcess };

// Every service a test starts is SIGKILLed when the test process exits, even when a test timed
// out before its own clean-up ran: nothing outlives the test file that started it.
const processes = new ProcessGroup({ killOnExit: true });

/**
 * Starts one service process (the shared launcher of `@bosun/transport`) with `env` over the
 * test process's environment; every line of its output is kept for assertions
 * (`BOSUN_TEST_VERBOSE=1` also echoes them to stderr).
 */
export function startService(
  kind: 'coordinator' | 'specialist' | 'gateway' | 'intake' | 'a2a' | 'console',
  env: Record<string, string>,
  options: { name?: string; args?: string[] } = {},
): ServiceProcess {
  const name = options.name ?? kind;
  const verbose = Boolean(process.env.BOSUN_TEST_VERBOSE);
  return processes.launch({
    name,
    script: ENTRY[kind],
    args: options.args ?? [],
    env: { ...process.env, ...env },
    keepLines: Infinity,
    onLine: verbose ? (line) => process.stderr.write(`[${name}] ${line}\n`) : undefined,
  });
}

/** A whole cluster: gateway, coordinator and N specialist processes. */
export class TestCluster {
  readonly processes: ServiceProcess[] = [];

  static async start(
    env: Record<string, string>,
    options: { specialists?: number; specialistArgs?: string[][] } = {},
  ): Promise<TestCluster> {
    const cluster = new TestCluster();
    const gateway = cluster.add(startService('gateway', env));
    await gateway.ready();
    const argsList = options.specialistArgs ?? Array.from({ length: options.specialists ?? 1 }, () => []);
    const started = [cluster.add(startService('coordinator', env))];
    argsList.forEach((args, i) => started.push(cluster.add(startService('specialist', env, { name: `specialist-${i + 1}`, args }))));
    await Promise.all(started.map((p) => p.ready()));
    return cluster;
  }

  add(p: ServiceProcess): ServiceProcess {
    this.processes.push(p);
    return p;
  }

  get(name: string): ServiceProcess {
    const p = [...this.processes].reverse().find((x) => x.name === name);
    if (!p) throw new Error(`no process ${name}`);
    return p;
  }

  async stop(): Promise<void> {
    await Promise.all(this.processes.map((p) => p.stop()));
  }
}
