import { describe, expect, it } from 'vitest';

import { ConfigError, parseClusterConfig } from './cluster.js';
import { normalizeHost, normalizeOrigin } from './http-origin.js';

describe('normalizeHost and normalizeOrigin', () => {
  it('read Host values as hostname:port, the port always written', () => {
    expect(normalizeHost('LocalHost:8080')).toBe('localhost:8080');
    expect(normalizeHost('mcp.example.org')).toBe('mcp.example.org:80');
    expect(normalizeHost('[::1]:9')).toBe('[::1]:9');
    for (const bad of ['', 'http://x', 'x/y', 'u@x', 'x y', 'x:port', '[::1']) expect(normalizeHost(bad), bad).toBeUndefined();
  });

  it('read origins as browsers send them, and refuse anything else', () => {
    expect(normalizeOrigin('HTTP://LocalHost:80')).toBe('http://localhost');
    expect(normalizeOrigin('https://console.example.org:443/')).toBe('https://console.example.org');
    expect(normalizeOrigin('http://[::1]:7000')).toBe('http://[::1]:7000');
    for (const bad of ['null', 'localhost:80', 'ftp://x', 'http://x/path', 'http://u:p@x', 'http://x/?q=1'])
      expect(normalizeOrigin(bad), bad).toBeUndefined();
  });
});

describe('gateway.mcpServer.allowedHosts and allowedOrigins', () => {
  const raw = (face: Record<string, unknown>): Record<string, unknown> => ({
    specialists: {
      kubernetes: {
        description: 'pods',
        tools: ['demo__*'],
        outputSchema: { type: 'object', required: ['summary'], properties: { summary: { type: 'string' } } },
      },
    },
    mcpServers: { demo: { transport: 'stdio', command: 'node', args: ['main.js'] } },
    gateway: { mcpServer: { port: 0, token: 't', tools: ['demo__*'], ...face } },
  });

  it('are optional and kept as given', () => {
    expect(parseClusterConfig(raw({}), { file: 'c.yaml', env: {} }).gateway.mcpServer?.allowedHosts).toBeUndefined();
    const config = parseClusterConfig(raw({ allowedHosts: ['gw.example.org:8080'], allowedOrigins: ['https://console.example.org'] }), {
      file: 'c.yaml',
      env: {},
    });
    expect(config.gateway.mcpServer).toMatchObject({
      allowedHosts: ['gw.example.org:8080'],
      allowedOrigins: ['https://console.example.org'],
    });
  });

  it('a value that is not a Host or an origin fails the config check, naming the field', () => {
    expect(() => parseClusterConfig(raw({ allowedHosts: ['http://gw.example.org'] }), { file: 'c.yaml', env: {} })).toThrow(ConfigError);
    expect(() => parseClusterConfig(raw({ allowedHosts: ['http://gw.example.org'] }), { file: 'c.yaml', env: {} })).toThrow(
      /gateway\.mcpServer\.allowedHosts\.0: must be a Host value/,
    );
    expect(() => parseClusterConfig(raw({ allowedOrigins: ['gw.example.org'] }), { file: 'c.yaml', env: {} })).toThrow(
      /gateway\.mcpServer\.allowedOrigins\.0: must be an origin/,
    );
  });
});
