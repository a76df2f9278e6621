import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import type { CatalogTool } from '@bosun/contract';
import { createLogger, loadClusterConfig, type ClusterConfig } from '@bosun/config';

import { startMcpFace, type McpFace } from './mcp-face.js';

// The face in this process, over a stand-in gateway (no Redis, NATS or MCP server): paging of
// tools/list with a small page size, through the SDK's own client.

const DEMO = fileURLToPath(new URL('../../../infra/demo/bosun.yaml', import.meta.url));
const TOKEN = 'unit-face-token';
const NAMES = ['demo__e', 'demo__a', 'demo__d', 'demo__c', 'demo__b'];

let face: McpFace;
let client: Client;

beforeAll(async () => {
  const base = loadClusterConfig(DEMO, { resolveServers: false });
  const config: ClusterConfig = {
    ...base,
    gateway: {
      ...base.gateway,
      mcpServer: { port: 0, host: '127.0.0.1', token: TOKEN, tools: ['demo__*'], mode: 'read-write', approvalTimeoutMs: 1_000 },
    },
  };
  const tools: CatalogTool[] = NAMES.map((name) => ({
    name,
    server: 'demo',
    remoteName: name.slice('demo__'.length),
    description: `tool ${name}`,
    inputSchema: { type: 'object' },
    annotations: { readOnlyHint: true },
  }));
  face = await startMcpFace({
    gateway: {
      catalog: () => ({ v: 1, updatedAt: new Date(0).toISOString(), tools, unavailable: {} }),
      execute: () => Promise.reject(new Error('no calls in this test')),
      servers: [],
    },
    config,
    approvals: {
      request: () => Promise.reject(new Error('unused')),
      get: () => Promise.resolve(null),
      decide: () => Promise.reject(new Error('unused')),
      pending: () => Promise.resolve([]),
    },
    events: { emit: () => undefined, flush: () => Promise.resolve() },
    log: createLogger({ service: 'face-test', level: 'silent' }),
    port: 0,
    token: TOKEN,
    pageSize: 2,
  });
  client = new Client({ name: 'face-unit', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${face.port}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } },
    }),
  );
});

afterAll(async () => {
  await client?.close();
  await face?.close();
});

describe('tools/list paging', () => {
  it('pages through every offered tool by name, each once, with nextCursor until the last page', async () => {
    const pages: string[][] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor === undefined ? {} : { cursor });
      pages.push(page.tools.map((t) => t.name));
      cursor = page.nextCursor;
    } while (cursor !== undefined && pages.length < 10);
    expect(pages).toEqual([['demo__a', 'demo__b'], ['demo__c', 'demo__d'], ['demo__e']]);
  });

  it('answers a cursor it did not issue with -32602 (invalid params)', async () => {
    const { nextCursor } = await client.listTools();
    expect(nextCursor).toBeTypeOf('string');
    const forged = Buffer.from(JSON.stringify({ after: 'demo__a', more: 1 })).toString('base64url');
    for (const cursor of ['nope', '', `${nextCursor}x`, forged, Buffer.from('"demo__a"').toString('base64url')]) {
      const err = await client.listTools({ cursor }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, `cursor ${JSON.stringify(cursor)}`).toBeInstanceOf(McpError);
      expect((err as McpError).code).toBe(ErrorCode.InvalidParams);
      expect((err as McpError).message).toMatch(/Invalid cursor/);
    }
  });
});
