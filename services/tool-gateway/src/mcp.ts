import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { BosunError, TOOL_NAMESPACE_SEPARATOR, type CatalogTool, errorMessage } from '@bosun/contract';
import { scrub, type ClusterConfig, type Logger, type McpServerConfig } from '@bosun/config';

/** A call that never reached its server (no connection): its effect certainly did not happen. */
export class CallNotSentError extends BosunError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('call_not_sent', message, options);
    this.name = 'CallNotSentError';
  }
}

/** The text and structured parts of an MCP tool result. */
export interface McpCallOutcome {
  isError: boolean;
  text: string;
  structured?: unknown;
}

/**
 * One MCP server behind the gateway: connects, lists its tools, calls them, and reconnects
 * (with backoff) after the server dies.
 */
export class McpServerConnection {
  readonly name: string;
  private readonly config: McpServerConfig;
  private readonly log: Logger;
  private client: Client | null = null;
  private stdio: StdioClientTransport | null = null;
  private connecting: Promise<Client> | null = null;
  private nextAttemptAt = 0;
  private failures = 0;
  private closed = false;
  /** Tools of this server from the last listing. */
  tools: CatalogTool[] = [];
  /** Called after a reconnect re-listed the tools. */
  onToolsChanged: (() => void) | undefined;

  constructor(name: string, config: McpServerConfig, log: Logger) {
    this.name = name;
    this.config = config;
    this.log = log.child({ server: name });
  }

  /** Connects if needed; rejects while a reconnect backoff is running or the server is unreachable. */
  async connect(): Promise<Client> {
    if (this.client) return this.client;
    if (this.closed) throw new BosunError('mcp_server_closed', `MCP server ${this.name} is closed`);
    if (this.connecting) return this.connecting;
    const wait = this.nextAttemptAt - Date.now();
    if (wait > 0)
      throw new BosunError('mcp_server_unavailable', `MCP server ${this.name} is unavailable; next reconnect attempt in ${wait} ms`);
    this.connecting = this.open().finally(() => {
      this.connecting = null;
    });
    return this.connecting;
  }

  private async open(): Promise<Client> {
    const client = new Client({ name: 'bosun-tool-gateway', version: '0.1.0' });
    let transport: Transport;
    if (this.config.transport === 'stdio') {
      const stdio = new StdioClientTransport({
        command: this.config.command,
        args: this.config.args,
        env: { ...getDefaultEnvironment(), ...this.config.env },
        ...(this.config.cwd ? { cwd: this.config.cwd } : {}),
        stderr: 'pipe',
      });
      this.stdio = stdio;
      stdio.stderr?.on('data', (chunk: Buffer) => this.log.debug({ stderr: chunk.toString('utf8').trimEnd() }, 'server stderr'));
      transport = stdio;
    } else {
      transport = new StreamableHTTPClientTransport(new URL(this.config.url), { requestInit: { headers: this.config.headers } });
    }
    try {
      await client.connect(transport);
      const tools: CatalogTool[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor ? { cursor } : {});
        for (const t of page.tools) {
          tools.push({
            name: `${this.name}${TOOL_NAMESPACE_SEPARATOR}${t.name}`,
            server: this.name,
            remoteName: t.name,
            description: t.description ?? '',
            inputSchema: t.inputSchema,
            annotations: t.annotations ?? {},
          });
        }
        cursor = page.nextCursor;
      } while (cursor);
      this.tools = tools;
      this.failures = 0;
      client.onclose = () => {
        if (this.client === client) {
          this.client = null;
          if (!this.closed) this.log.warn('MCP server connection closed; will reconnect on next use');
        }
      };
      this.client = client;
      this.log.info({ tools: tools.length }, 'MCP server connected');
      this.onToolsChanged?.();
      return client;
    } catch (err) {
      this.failures++;
      this.nextAttemptAt = Date.now() + Math.min(500 * 2 ** (this.failures - 1), 30_000);
      // The client that failed to connect: the connect error is what matters, and it is thrown below.
      await client.close().catch(() => undefined);
      throw new BosunError('mcp_connect_failed', `cannot connect to MCP server ${this.name}: ${errorMessage(err)}`, { cause: err });
    }
  }

  /** The process id of a connected stdio server. */
  get pid(): number | undefined {
    return this.client ? (this.stdio?.pid ?? undefined) : undefined;
  }

  /** Calls a tool by its name on this server. Throws on protocol and connection failures. */
  async call(
    remoteName: string,
    args: Record<string, unknown>,
    options: { timeoutMs: number; maxChars: number; onProgress?: (p: { progress: number; total?: number; message?: string }) => void },
  ): Promise<McpCallOutcome> {
    let client: Client;
    try {
      client = await this.connect();
    } catch (err) {
      throw new CallNotSentError(errorMessage(err), { cause: err });
    }
    const result = await client.callTool({ name: remoteName, arguments: args }, undefined, {
      timeout: options.timeoutMs,
      // Progress is forwarded to observers; it does not extend the per-call timeout.
      ...(options.onProgress ? { onprogress: (p: { progress: number; total?: number; message?: string }) => options.onProgress?.(p) } : {}),
    });
    const parts: string[] = [];
    const content = Array.isArray(result.content) ? (result.content as { type: string; text?: string }[]) : [];
    for (const c of content) {
      if (c.type === 'text' && typeof c.text === 'string') parts.push(c.text);
      else parts.push(`[${c.type} content omitted]`);
    }
    let text = parts.join('\n');
    if (text.length > options.maxChars) {
      text = `${text.slice(0, options.maxChars)}\n[TRUNCATED by the tool gateway: ${text.length} characters, limit ${options.maxChars}]`;
    }
    const structured = (result as { structuredContent?: unknown }).structuredContent;
    const structuredOk = structured !== undefined && JSON.stringify(structured).length <= options.maxChars;
    return { isError: result.isError === true, text, ...(structuredOk ? { structured } : {}) };
  }

  async close(): Promise<void> {
    this.closed = true;
    const c = this.client;
    this.client = null;
    // Shutting down: a server that fails to close is being dropped anyway (its child process is killed).
    if (c) await c.close().catch(() => undefined);
  }
}

/**
 * The gateway's `--check`: connects to every configured MCP server (starting the stdio ones),
 * lists its tools and closes it again. Returns `<name> (<n> tools)` per server; throws naming
 * every server that could not be reached, with the configured secrets (env and header values)
 * scrubbed from the messages.
 */
export async function checkMcpServers(config: ClusterConfig, log: Logger): Promise<string[]> {
  const servers = Object.entries(config.mcpServers).map(([name, cfg]) => new McpServerConnection(name, cfg, log));
  const secrets = Object.values(config.mcpServers)
    .flatMap((cfg) => Object.values(cfg.transport === 'stdio' ? cfg.env : cfg.headers))
    .filter((v) => v.length >= 6);
  const outcomes = await Promise.all(
    servers.map(async (s) => {
      try {
        await s.connect();
        return { ok: `${s.name} (${s.tools.length} tools)` };
      } catch (err) {
        return { failed: scrub(errorMessage(err), secrets) };
      } finally {
        await s.close();
      }
    }),
  );
  const failed = outcomes.flatMap((o) => (o.failed ? [o.failed] : []));
  if (failed.length > 0) throw new BosunError('mcp_server_unavailable', failed.join('; '));
  return outcomes.flatMap((o) => (o.ok ? [o.ok] : []));
}
