/**
 * The gateway's ports over the real world: the audit stream in Redis and the MCP connections.
 * (`ToolCallRecords` and `ApprovalStore` from `@bosun/transport` are the records and approvals
 * as they are.)
 */
import { auditFields, type AuditEntry, type CatalogTool } from '@bosun/contract';
import { keys, type RedisClient } from '@bosun/transport';
import { inMcpSpan } from './gateway-telemetry.js';
import { CallNotSentError, type McpCallOutcome, type McpServerConnection } from './mcp.js';
import type { AuditLog, McpServers } from './ports.js';

/** The audit stream `<prefix>:audit`, capped near `maxEntries` (`retention.audit.maxEntries`). */
export class RedisAuditLog implements AuditLog {
  private readonly options: { redis: RedisClient; prefix: string; maxEntries: number };

  constructor(options: { redis: RedisClient; prefix: string; maxEntries: number }) {
    this.options = options;
  }

  async append(entry: AuditEntry): Promise<void> {
    const { redis, prefix, maxEntries } = this.options;
    await redis.xadd(keys.audit(prefix), 'MAXLEN', '~', String(maxEntries), '*', ...auditFields(entry));
  }
}

/**
 * The gateway's MCP server connections, looked up at each use (a connection's tools change when
 * it reconnects). Each call runs in its MCP client span.
 */
export class McpServerSet implements McpServers {
  private readonly servers: readonly McpServerConnection[];

  constructor(servers: readonly McpServerConnection[]) {
    this.servers = servers;
  }

  tools(): CatalogTool[] {
    return this.servers.flatMap((s) => s.tools);
  }

  call(tool: CatalogTool, args: Record<string, unknown>, options: Parameters<McpServers['call']>[2]): Promise<McpCallOutcome> {
    const server = this.servers.find((s) => s.name === tool.server);
    // The catalog lists only the tools of these servers: a tool of no server was never sent anywhere.
    if (!server) return Promise.reject(new CallNotSentError(`no MCP server "${tool.server}" for tool ${tool.name}`));
    return inMcpSpan(tool, () => server.call(tool.remoteName, args, options));
  }
}
