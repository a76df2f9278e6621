#!/usr/bin/env node
/**
 * Stdio entry point of the Bosun demo MCP server: a simulated production environment
 * (services checkout, payments, search) with read-only inspection tools and two
 * mutating tools. stdout carries the MCP protocol, so every diagnostic goes to stderr.
 *
 * Environment variables, read once at start-up (all optional, all meant for tests):
 *
 * - `DEMO_MCP_SLOW_MS`: a non-negative integer; every tool call waits that many
 *   milliseconds before answering. A call cancelled while waiting answers nothing and,
 *   for a mutating tool, changes nothing.
 * - `DEMO_MCP_CALL_LOG`: a file path; one JSON line `{"tool","args","pid","at"}` is
 *   appended (synchronously, so it survives a kill) for every tool call that reaches
 *   its handler, before any delay or hang. Lets a test count how often a tool ran.
 * - `DEMO_MCP_HANG_TOOLS`: comma-separated tool names whose calls never answer, until
 *   the client cancels them or the process ends.
 *
 * The process exits with code 0 when stdin closes or on SIGTERM/SIGINT, and with
 * code 2 when an environment variable is invalid.
 */
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { DemoEnvironment } from './environment.js';
import { createDemoServer, type DemoServerOptions } from './server.js';

function log(message: string): void {
  process.stderr.write(`[demo-mcp] ${message}\n`);
}

/** Reads {@link DemoServerOptions} from the environment variables documented above. */
function optionsFromEnv(env: NodeJS.ProcessEnv): DemoServerOptions {
  const options: DemoServerOptions = { log };
  const slow = env['DEMO_MCP_SLOW_MS']?.trim();
  if (slow) {
    if (!/^\d+$/.test(slow)) throw new Error(`DEMO_MCP_SLOW_MS must be a non-negative integer of milliseconds, got "${slow}"`);
    options.slowMs = Number(slow);
  }
  const callLog = env['DEMO_MCP_CALL_LOG']?.trim();
  if (callLog) options.callLogPath = callLog;
  const hang = env['DEMO_MCP_HANG_TOOLS']
    ?.split(',')
    .map((name) => name.trim())
    .filter((name) => name.length > 0);
  if (hang && hang.length > 0) options.hangTools = hang;
  return options;
}

async function main(): Promise<void> {
  let options: DemoServerOptions;
  try {
    options = optionsFromEnv(process.env);
  } catch (error) {
    log(error instanceof Error ? error.message : String(error));
    process.exit(2);
  }

  const server = createDemoServer(new DemoEnvironment(), options);

  let stopping = false;
  const stop = (reason: string): void => {
    if (stopping) return;
    stopping = true;
    log(`stopping: ${reason}`);
    // Exit explicitly: a slow call's timer would otherwise keep the process alive after the client is gone.
    server.close().then(
      () => process.exit(0),
      () => process.exit(0),
    );
  };

  // The SDK's stdio transport does not watch for end of input, and a server whose client went away should not linger.
  process.stdin.on('end', () => stop('stdin closed'));
  process.stdin.on('close', () => stop('stdin closed'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  // A write after the client closed its end raises EPIPE; without a listener that would crash with a stack trace.
  process.stdout.on('error', (error: Error) => stop(`stdout error: ${error.message}`));

  await server.connect(new StdioServerTransport());
  const extras = [
    options.slowMs !== undefined ? `slowMs=${options.slowMs}` : '',
    options.callLogPath !== undefined ? `callLog=${options.callLogPath}` : '',
    options.hangTools !== undefined ? `hangTools=${options.hangTools.join(',')}` : '',
  ].filter((part) => part.length > 0);
  log(`ready on stdio (pid ${process.pid}${extras.length > 0 ? `; ${extras.join('; ')}` : ''})`);
}

main().catch((error: unknown) => {
  log(`fatal: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exit(1);
});
