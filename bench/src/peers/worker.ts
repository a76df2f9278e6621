#!/usr/bin/env node
/**
 * A peer's worker process, started by the bench (`node bench/dist/peers/worker.js`) with its
 * settings as JSON in `BENCH_PEER_WORKER` (see {@link WorkerSpec}). It prints JSON lines on
 * stdout: `{"peer":"ready"}` once it serves or runs, `{"peer":"done",…}` per incident it ends
 * (LangGraph), `{"peer":"finished"}` when it has nothing left to do, `{"peer":"error",…}` before
 * exiting 1.
 *
 * - `restate`: the Restate endpoint (the `incident` service) on 127.0.0.1:`port` over HTTP/2,
 *   with one stdio session to the demo MCP server. It serves until SIGTERM (or SIGKILL).
 * - `langgraph`: runs (`mode: run`) or resumes after a crash (`mode: resume`) the given
 *   incidents, one thread each, then exits.
 */
import { createServer } from 'node:http2';
import { join } from 'node:path';
import { peerModule } from './load.js';
import { startLangGraph, type Durability } from './langgraph.js';
import type { PeerIncident, PeerOutcome } from './plan.js';
import { incidentService, type RestateSdk } from './restate.js';

/** What the bench asks of one worker process. */
export type WorkerSpec =
  | { kind: 'restate'; root: string; port: number; mcpEnv?: Record<string, string> }
  | {
      kind: 'langgraph';
      root: string;
      pgUrl: string;
      schema: string;
      appName: string;
      durability: Durability;
      mode: 'run' | 'resume';
      incidents: PeerIncident[];
      mcpEnv?: Record<string, string>;
    };

/** One line of a worker's output, as the bench reads it. */
export type WorkerLine =
  | { peer: 'ready'; pid: number }
  | { peer: 'done'; key: string; how: 'ran' | 'resumed' | 'resumed, getState listed no next step' | 'started again'; outcome: PeerOutcome }
  | { peer: 'finished' }
  | { peer: 'error'; message: string };

function say(line: WorkerLine): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

interface McpClient {
  connect(transport: unknown): Promise<void>;
  callTool(params: {
    name: string;
    arguments: Record<string, unknown>;
  }): Promise<{ content: unknown; structuredContent?: unknown; isError?: boolean }>;
  close(): Promise<void>;
}

/**
 * `Promise.withResolvers` (ES2024, Node.js 22): @restatedev/restate-sdk 1.17.2 calls it, and the
 * bench runs on Node.js 20 as Bosun does. The standard's semantics, defined only where missing.
 */
function definePromiseWithResolvers(): void {
  const P = Promise as unknown as { withResolvers?: unknown };
  if (typeof P.withResolvers === 'function') return;
  P.withResolvers = function withResolvers<T>() {
    let resolve!: (value: T) => void;
    let reject!: (reason: unknown) => void;
    const promise = new Promise<T>((a, b) => {
      resolve = a;
      reject = b;
    });
    return { promise, resolve, reject };
  };
}

async function serveRestate(spec: Extract<WorkerSpec, { kind: 'restate' }>): Promise<void> {
  definePromiseWithResolvers();
  const sdk = peerModule<RestateSdk>(spec.root, '@restatedev/restate-sdk');
  const { Client } = peerModule<{ Client: new (info: { name: string; version: string }) => McpClient }>(
    spec.root,
    '@modelcontextprotocol/sdk/client/index.js',
  );
  const { StdioClientTransport } = peerModule<{ StdioClientTransport: new (params: Record<string, unknown>) => unknown }>(
    spec.root,
    '@modelcontextprotocol/sdk/client/stdio.js',
  );
  const mcp = new Client({ name: 'bosun-bench-restate', version: '0.1.0' });
  await mcp.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [join(spec.root, 'mcp-servers/demo/dist/bundle/main.js')],
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...spec.mcpEnv },
      stderr: 'ignore',
    }),
  );
  const service = incidentService(sdk, async (name, args) => {
    const r = await mcp.callTool({ name, arguments: args });
    return { content: r.content, structuredContent: r.structuredContent ?? null, isError: r.isError ?? false };
  });
  const server = createServer(sdk.createEndpointHandler({ services: [service] }));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(spec.port, '127.0.0.1', () => resolve());
  });
  const stop = () => {
    server.close();
    // Exit whatever the MCP session says: the bench asked this process to end.
    mcp.close().then(
      () => process.exit(0),
      () => process.exit(0),
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  say({ peer: 'ready', pid: process.pid });
}

async function runLangGraph(spec: Extract<WorkerSpec, { kind: 'langgraph' }>): Promise<void> {
  const h = await startLangGraph(spec);
  say({ peer: 'ready', pid: process.pid });
  try {
    await Promise.all(
      spec.incidents.map(async (incident) => {
        if (spec.mode === 'run') {
          say({ peer: 'done', key: incident.id, how: 'ran', outcome: await h.run(incident.id, incident) });
          return;
        }
        const before = await h.resume(incident.id);
        // No checkpoint at all: the crash came before the first one; a restart can only begin again.
        if (before === undefined)
          say({ peer: 'done', key: incident.id, how: 'started again', outcome: await h.run(incident.id, incident) });
        else say({ peer: 'done', key: incident.id, ...before });
      }),
    );
  } finally {
    await h.close();
  }
  say({ peer: 'finished' });
}

async function main(): Promise<void> {
  const raw = process.env.BENCH_PEER_WORKER;
  if (!raw) throw new Error('BENCH_PEER_WORKER is not set: this worker is started by the bench (bench/src/peers/kill.ts)');
  const spec = JSON.parse(raw) as WorkerSpec;
  if (spec.kind === 'restate') await serveRestate(spec);
  else if (spec.kind === 'langgraph') {
    await runLangGraph(spec);
    process.exit(0);
  } else throw new Error(`BENCH_PEER_WORKER: unknown kind ${String((spec as { kind?: unknown }).kind)}`);
}

main().catch((err: unknown) => {
  say({ peer: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  process.exit(1);
});
