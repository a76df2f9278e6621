import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { expect } from 'vitest';
import type { RunEvent, RunResult } from '@bosun/contract';
import { demoConfig, openContext, writeConfig, type TestContext } from './context.js';
import { FaultProxy } from './fault-proxy.js';
import { openClient, runCli, type Client } from './harness.js';
import { ROOT } from './paths.js';
import { startService, taskHolderPid, type ServiceProcess } from './processes.js';

/** The independent counting MCP server (test/fixtures/mcp/counter.mjs). */
export const COUNTER_MCP = join(ROOT, 'test/fixtures/mcp/counter.mjs');

/** Every process's own links: its Redis and its NATS, each through a {@link FaultProxy}. */
export interface ServiceLinks {
  redis: FaultProxy;
  nats: FaultProxy;
}

/** Options of {@link FaultCluster.start}. */
export interface FaultClusterOptions {
  /** Changes the config (the demo's, with the counting server as `counter` and `kubernetes` allowed to use it). */
  configure?: (config: Record<string, any>, ctx: TestContext) => void;
  /** How many specialist processes (default 1); co-located, how many `bosun serve` processes. */
  specialists?: number;
  /**
   * `split` (default): gateway, coordinator and specialists, each a process with its own links.
   * `colocated`: `bosun serve` processes (`serve-1`, …), each with its own links, which its three
   * services share.
   */
  layout?: 'split' | 'colocated';
  /** Where each service's NATS link leads (default the tests' NATS): a server of the test's own. */
  natsUrl?: (name: string) => string;
  /** Extra environment for every service. */
  env?: Record<string, string>;
  /** The NATS server the test's client watches events on (default the tests' NATS); with {@link natsUrl}. */
  clientNatsUrl?: string;
}

/** The effects the counting server applied, by call id. */
export interface EffectLog {
  readonly path: string;
  /** Effects per id, in the order they happened. */
  perId(): Map<string, number>;
  /** Ids that took effect more than once. */
  twice(): string[];
}

/** An {@link EffectLog} over `path`. */
export function effectLog(path: string): EffectLog {
  const perId = () => {
    const counts = new Map<string, number>();
    if (!existsSync(path)) return counts;
    for (const line of readFileSync(path, 'utf8').split('\n').filter(Boolean)) {
      const { id } = JSON.parse(line) as { id: string };
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
    return counts;
  };
  return { path, perId, twice: () => [...perId()].filter(([, n]) => n > 1).map(([id]) => id) };
}

/**
 * A cluster for fault tests: gateway, coordinator and specialists as separate processes, each
 * with its own Redis link and NATS link through a {@link FaultProxy}, so a test can hold, reset,
 * blackhole or delay one service's link alone; the counting MCP server as `counter`; short locks
 * (3 s, stalled check every second). The test's own client talks to Redis and NATS directly.
 */
export class FaultCluster {
  readonly links = new Map<string, ServiceLinks>();
  readonly processes: ServiceProcess[] = [];
  /** The client's own NATS connection, when it watches another server than the tests'. */
  private ownNats: NatsConnection | undefined;

  private constructor(
    readonly ctx: TestContext,
    readonly env: Record<string, string>,
    readonly client: Client,
    readonly effects: EffectLog,
    private readonly options: FaultClusterOptions,
  ) {}

  static async start(label: string, options: FaultClusterOptions = {}): Promise<FaultCluster> {
    const ctx = await openContext(label);
    const effects = effectLog(join(ctx.dir, 'effects.jsonl'));
    const config = demoConfig();
    config.mcpServers.demo.tools = {};
    config.mcpServers.counter = { transport: 'stdio', command: 'node', args: [COUNTER_MCP], env: { COUNTER_LOG: effects.path } };
    config.specialists.kubernetes.tools = ['counter__*', 'demo__*'];
    config.workers = { lockDurationMs: 3_000, stalledIntervalMs: 1_000, maxStalledCount: 5 };
    options.configure?.(config, ctx);
    const env = { ...ctx.env, LOG_LEVEL: 'info', BOSUN_CONFIG: writeConfig(ctx, config), ...options.env };
    let own: NatsConnection | undefined;
    if (options.clientNatsUrl) own = await connect({ servers: options.clientNatsUrl });
    const client = await openClient(own ? { ...ctx, nats: own, natsUrl: options.clientNatsUrl! } : ctx);
    const cluster = new FaultCluster(ctx, env, client, effects, options);
    cluster.ownNats = own;
    try {
      if (options.layout === 'colocated') {
        await Promise.all(Array.from({ length: options.specialists ?? 1 }, (_, i) => cluster.startService('serve', `serve-${i + 1}`)));
        return cluster;
      }
      await cluster.startService('gateway', 'gateway');
      const others = [cluster.startService('coordinator', 'coordinator')];
      for (let i = 1; i <= (options.specialists ?? 1); i++) others.push(cluster.startService('specialist', `specialist-${i}`));
      await Promise.all(others);
    } catch (err) {
      await cluster.close();
      throw err;
    }
    return cluster;
  }

  /** Starts a service named `name` behind links of its own (made on its first start, kept across restarts). */
  async startService(kind: 'gateway' | 'coordinator' | 'specialist' | 'serve', name: string): Promise<ServiceProcess> {
    let links = this.links.get(name);
    if (!links) {
      const natsUrl = this.options.natsUrl?.(name) ?? this.ctx.natsUrl;
      links = { redis: await FaultProxy.start(this.ctx.redisUrl, `${name}-redis`), nats: await FaultProxy.start(natsUrl, `${name}-nats`) };
      this.links.set(name, links);
    }
    const p = startService(kind, { ...this.env, REDIS_URL: links.redis.url('redis'), NATS_URL: links.nats.url('nats') }, { name });
    this.processes.push(p);
    await p.ready();
    return p;
  }

  /** The links of service `name`. */
  link(name: string): ServiceLinks {
    const l = this.links.get(name);
    if (!l) throw new Error(`no service ${name}`);
    return l;
  }

  /** The newest process named `name`. */
  get(name: string): ServiceProcess {
    const p = [...this.processes].reverse().find((x) => x.name === name);
    if (!p) throw new Error(`no process ${name}`);
    return p;
  }

  /**
   * The process that holds task `taskId` now, if any: by its job's worker name, or — a local task
   * of `bosun serve`, which has no job — by the worker of its run's incident job.
   */
  async holderOf(taskId: string, agent = 'kubernetes'): Promise<string | undefined> {
    const { pid, via } = await taskHolderPid(this.ctx.redis, this.ctx.prefix, agent, taskId);
    const kinds = via === 'task' ? ['specialist', 'serve'] : ['serve'];
    return this.processes.find((p) => p.running && kinds.some((k) => p.name.startsWith(k)) && String(p.pid) === pid)?.name;
  }

  /** Heals every link, stops every process and proxy, closes the client and the context. */
  async close(): Promise<void> {
    for (const l of this.links.values()) {
      l.redis.heal();
      l.nats.heal();
    }
    await this.client.close();
    await Promise.all(this.processes.map((p) => p.stop()));
    for (const l of this.links.values()) await Promise.all([l.redis.close(), l.nats.close()]);
    await this.ownNats?.close();
    await this.ctx.close();
  }

  /**
   * Checks that every view of a finished run agrees on its calls in doubt: the run result's
   * `inDoubt`, the `tool.in_doubt` events, the in-doubt dead letters, `bosun runs show`, the audit
   * and the in-doubt index (which holds those still in doubt: not the ones seen done since).
   * Returns the keys declared in doubt and those of them seen done.
   */
  async agreement(result: RunResult, events: RunEvent[]): Promise<{ inDoubt: string[]; seenDone: string[] }> {
    const { ctx, env, client } = this;
    const runId = result.runId;
    const sorted = (a: Iterable<string>) => [...new Set(a)].sort();
    const fromResult = sorted((result.inDoubt?.calls ?? []).map((c) => c.key));
    const fromEvents = sorted(events.filter((e) => e.type === 'tool.in_doubt').map((e) => String(e.data.key)));
    const letters = (await client.deadLetters(runId)).filter((d) => d.kind === 'in-doubt');
    const fromLetters = sorted(letters.map((d) => String((d.input as { key: string }).key)));
    const [show, audit] = await Promise.all([
      runCli(env, ['runs', 'show', runId, '--json']),
      runCli(env, ['audit', '--run', runId, '--json']),
    ]);
    expect(show.code, show.stderr).toBe(0);
    const view = JSON.parse(show.stdout) as { inDoubt: { key: string; laterSeen?: unknown }[] };
    const fromShow = sorted(view.inDoubt.map((c) => c.key));
    expect(audit.code, audit.stderr).toBe(0);
    const fromAudit = sorted(
      (JSON.parse(audit.stdout) as { key: string; status: string }[]).filter((e) => e.status === 'in-doubt').map((e) => e.key),
    );
    const seenDone = sorted(view.inDoubt.filter((c) => c.laterSeen !== undefined).map((c) => c.key));
    const indexed = sorted((await ctx.redis.zrange(`${ctx.prefix}:toolcalls:in-doubt`, 0, -1)).filter((k) => k.startsWith(runId)));
    const views = { fromEvents, fromLetters, fromShow, fromAudit };
    // A call found in doubt after its task ended is not in the result (it could not be): the
    // others all name it. Every call the result names, they name too.
    for (const [name, keys] of Object.entries(views)) {
      expect(keys, `${name} against the tool.in_doubt events`).toEqual(fromEvents);
    }
    for (const key of fromResult) expect(fromEvents, 'the result names only calls declared in doubt').toContain(key);
    expect(indexed, 'the in-doubt index holds the calls still in doubt').toEqual(fromShow.filter((k) => !seenDone.includes(k)));
    // A letter is resolved exactly when its call was seen done (or acknowledged).
    for (const d of letters) {
      const key = String((d.input as { key: string }).key);
      expect(d.resolution !== undefined, `dead letter of ${key} resolved when seen done`).toBe(seenDone.includes(key));
    }
    return { inDoubt: fromEvents, seenDone };
  }
}
