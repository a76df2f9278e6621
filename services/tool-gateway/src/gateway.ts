import { randomUUID } from 'node:crypto';
import { UnrecoverableError, type Job } from 'bullmq';
import { ToolCallJob, describeIssues, type Catalog, type ToolCallResult, errorMessage } from '@bosun/contract';
import type { ClusterConfig, Logger } from '@bosun/config';
import {
  ApprovalStore,
  NotAToolCallError,
  ToolCallRecords,
  keys,
  type DeadLetters,
  type EventSink,
  type InProcessGateway,
  type RedisClient,
  toolCallSubject,
} from '@bosun/transport';
import { McpServerSet, RedisAuditLog } from './adapters.js';
import { ToolCallFlow } from './call-flow.js';
import { McpServerConnection } from './mcp.js';
import { inGatewaySpan, observeToolCall, type CallArrival, type Span } from './gateway-telemetry.js';

export { MCP_CLIENT } from './admission.js';

/** The connections and settings of the gateway. */
export interface GatewayDeps {
  redis: RedisClient;
  prefix: string;
  config: ClusterConfig;
  events: EventSink;
  deadLetters: Pick<DeadLetters, 'add' | 'resolveInDoubt'>;
  log: Logger;
  /** How long a claim holds a running call (default `TOOL_CALL_LEASE_MS`; tests shorten it). */
  leaseMs?: number;
}

/**
 * The tool gateway: the only way agents reach MCP servers. It publishes the catalog, enforces
 * which specialist may call which tool, and records every call's result under its idempotency
 * key, so a call that arrives again is answered from the record and never executed twice. The
 * way of one call is {@link ToolCallFlow}'s, over its ports; this class wires them to Redis and
 * the MCP connections.
 */
export class ToolGateway {
  private readonly deps: GatewayDeps;
  readonly servers: McpServerConnection[];
  private unavailable: Record<string, string> = {};
  private readonly approvals: ApprovalStore;
  private readonly flow: ToolCallFlow;
  /** The calls of the specialists in this process (`inProcess`) still running: {@link close} waits for them. */
  private readonly directCalls = new Set<Promise<ToolCallResult>>();

  constructor(deps: GatewayDeps) {
    this.deps = deps;
    this.approvals = new ApprovalStore({ redis: deps.redis, prefix: deps.prefix });
    const records = new ToolCallRecords({
      redis: deps.redis,
      prefix: deps.prefix,
      leaseMs: deps.leaseMs,
      ttlSeconds: deps.config.retention.toolRecords,
    });
    this.servers = Object.entries(deps.config.mcpServers).map(([name, cfg]) => {
      const s = new McpServerConnection(name, cfg, deps.log);
      s.onToolsChanged = () => void this.publishCatalog().catch((err: unknown) => deps.log.warn({ err }, 'could not publish the catalog'));
      return s;
    });
    this.flow = new ToolCallFlow({
      records,
      approvals: this.approvals,
      audit: new RedisAuditLog({ redis: deps.redis, prefix: deps.prefix, maxEntries: deps.config.retention.audit.maxEntries }),
      servers: new McpServerSet(this.servers),
      events: deps.events,
      deadLetters: deps.deadLetters,
      config: deps.config,
      prefix: deps.prefix,
      log: deps.log,
      ...(deps.leaseMs === undefined ? {} : { leaseMs: deps.leaseMs }),
    });
  }

  /** Connects every server (an unreachable one is reported in the catalog, not fatal) and publishes the catalog. */
  async start(): Promise<Catalog> {
    await Promise.all(
      this.servers.map(async (s) => {
        try {
          await s.connect();
          delete this.unavailable[s.name];
        } catch (err) {
          this.unavailable[s.name] = errorMessage(err);
          this.deps.log.error({ server: s.name, err }, 'MCP server unavailable');
        }
      }),
    );
    return this.publishCatalog();
  }

  /** The catalog of every connected server's tools. */
  catalog(): Catalog {
    return {
      v: 1,
      updatedAt: new Date().toISOString(),
      tools: this.servers.flatMap((s) => s.tools),
      unavailable: { ...this.unavailable },
    };
  }

  async publishCatalog(): Promise<Catalog> {
    const catalog = this.catalog();
    await this.deps.redis.set(keys.catalog(this.deps.prefix), JSON.stringify(catalog));
    return catalog;
  }

  /**
   * The BullMQ processor of the `tools` queue: parses the job and {@link execute}s the call. A job
   * whose data is not a tool call is poison: it goes to the dead-letter queue with its data, and
   * the job fails without retries.
   */
  async process(job: Job): Promise<ToolCallResult> {
    const parsed = await this.parseCall(job.data, `poison-${job.id ?? 'unknown'}`);
    if (typeof parsed === 'string') throw new UnrecoverableError(parsed);
    return this.execute(parsed, { via: 'queue' });
  }

  /**
   * Answers a tool-call request over NATS (`serveToolCalls`): as {@link process}, a request that
   * is not a tool call goes to the dead-letter queue with its data, and is refused.
   */
  async answer(data: unknown): Promise<ToolCallResult> {
    const parsed = await this.parseCall(data, `poison-nats-${randomUUID()}`);
    if (typeof parsed === 'string') throw new NotAToolCallError(parsed);
    return this.execute(parsed, { via: 'nats', subject: toolCallSubject(this.deps.prefix) });
  }

  /** The call in a job's or request's data, or (after its dead letter is written) why it is not one. */
  private async parseCall(data: unknown, deadLetterId: string): Promise<ToolCallJob | string> {
    const parsed = ToolCallJob.safeParse(data);
    if (parsed.success) return parsed.data;
    const reason = `invalid tool call: ${describeIssues(parsed.error).issues.join('; ')}`;
    await this.deps.deadLetters.add({ kind: 'poison', reason, input: data }, deadLetterId);
    return reason;
  }

  /**
   * Executes one call, from the tools queue or the gateway's MCP face: policy, approval check,
   * claim, the MCP call, record, events and audit (docs/durability.md, "Tool calls"). It always
   * answers with a result: an unexpected failure (Redis unreachable, a corrupt record) too, see
   * {@link ToolCallFlow.execute}. `arrival` is how the call came, named on its span: by default the MCP
   * face (its own trace); {@link process} and {@link answer} name the queue and NATS.
   */
  async execute(call: ToolCallJob, arrival: CallArrival = { via: 'mcp' }): Promise<ToolCallResult> {
    return inGatewaySpan(call, arrival, (span) => this.executeCall(call, span));
  }

  /** The gateway as a specialist in the same process calls it (`DirectToolClient`, `bosun serve`). */
  inProcess(): InProcessGateway {
    return {
      catalog: () => this.catalog(),
      execute: (call) => {
        const answer = this.execute(call, { via: 'direct' });
        this.directCalls.add(answer);
        const done = () => void this.directCalls.delete(answer);
        answer.then(done, done);
        return answer;
      },
    };
  }

  private async executeCall(call: ToolCallJob, span: Span): Promise<ToolCallResult> {
    const started = performance.now();
    const answer = await this.flow.execute(call);
    observeToolCall({ tool: answer.tool, decision: answer.decision }, answer.result, (performance.now() - started) / 1000, span);
    return answer.result;
  }

  async close(): Promise<void> {
    // A call of a specialist of this process (`bosun serve`) finishes and is recorded before its
    // MCP server closes, as a queue job or NATS request in flight does: the specialist has handed
    // its task back without waiting for it, and the next owner finds the call done, not in flight.
    await Promise.allSettled([...this.directCalls]);
    await Promise.all(this.servers.map((s) => s.close()));
    await this.approvals.close();
  }
}
