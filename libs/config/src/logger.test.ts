import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';

import { configSecrets, parseClusterConfig } from './cluster.js';
import { addLogSecrets, createLogger } from './logger.js';

function capture(): { lines: () => Record<string, any>[]; stream: Writable } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer | string, _enc, cb) {
      chunks.push(chunk.toString());
      cb();
    },
  });
  return {
    stream,
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.parse(l) as Record<string, any>),
  };
}

describe('the logger keeps secrets out of logged objects', () => {
  it('cuts known secret values out of every string of a logged object, at any depth, errors and their causes included', () => {
    const out = capture();
    const log = createLogger({ service: 'svc', level: 'debug', destination: out.stream, secrets: ['tok-0123456789'] });
    // Known later: what a service resolves from its config file.
    addLogSecrets(log, ['late-secret-42']);
    const child = log.child({ server: 'vault' });
    // An MCP server's stderr, logged as an object field (the finding).
    child.debug({ stderr: 'vault starting with token tok-0123456789' }, 'server stderr');
    child.warn({ nested: { deeper: { list: ['a late-secret-42 b', { text: 'tok-0123456789' }] } } }, 'nested');
    const err = new Error('call failed: late-secret-42', { cause: new Error('upstream said tok-0123456789') });
    child.error({ err, key: 'k-1' }, 'tool call failed');
    child.error(new Error('boom tok-0123456789'));
    child.error({ detail: { err: new TypeError('inner late-secret-42') } }, 'deep error');

    const lines = out.lines();
    expect(JSON.stringify(lines)).not.toContain('tok-0123456789');
    expect(JSON.stringify(lines)).not.toContain('late-secret-42');
    const [stderr, nested, failed, bare, deep] = lines;
    expect(stderr).toMatchObject({ server: 'vault', stderr: 'vault starting with token [redacted]', msg: 'server stderr' });
    expect(nested!.nested.deeper.list).toEqual(['a [redacted] b', { text: '[redacted]' }]);
    expect(failed!.err).toMatchObject({ type: 'Error', message: expect.stringContaining('call failed: [redacted]') });
    expect(failed!.err.message).toContain('upstream said [redacted]');
    expect(failed!.err.stack).toContain('call failed: [redacted]');
    expect(failed!.key).toBe('k-1');
    expect(bare).toMatchObject({ msg: 'boom [redacted]', err: { type: 'Error', message: 'boom [redacted]' } });
    expect(deep!.detail.err).toMatchObject({ type: 'TypeError', message: 'inner [redacted]' });
  });

  it('redacts the values of secret-looking keys at any depth, keeping the rest', () => {
    const out = capture();
    const log = createLogger({ service: 'svc', destination: out.stream, secrets: [] });
    log.info(
      {
        call: {
          tool: 't',
          args: { user: 'u', db_password: 'hunter2', nested: { clientSecret: 'cs', accessToken: 'at', 'x-api-key': 'k' } },
        },
        count: 3,
      },
      'call',
    );
    const [line] = out.lines();
    expect(line!.call).toEqual({
      tool: 't',
      args: {
        user: 'u',
        db_password: '[redacted]',
        nested: { clientSecret: '[redacted]', accessToken: '[redacted]', 'x-api-key': '[redacted]' },
      },
    });
    expect(line!.count).toBe(3);
  });

  it("takes the configured secrets from a config: MCP servers' secret env and headers, the tokens", () => {
    const config = parseClusterConfig(
      {
        coordinator: { http: { port: 0, operatorToken: '${OP_TOKEN}' } },
        specialists: {
          kubernetes: {
            description: 'pods',
            tools: ['demo__*'],
            outputSchema: { type: 'object', required: ['summary'], properties: { summary: { type: 'string' } } },
          },
        },
        mcpServers: {
          demo: { transport: 'stdio', command: 'node', env: { VAULT_TOKEN: '${VT}', LOG_FILE: '/tmp/log.jsonl' } },
          web: { transport: 'http', url: 'http://127.0.0.1:1/mcp', headers: { Authorization: 'Bearer ${WT}', Accept: 'application/json' } },
        },
        gateway: { mcpServer: { port: 0, token: '${GT}' } },
      },
      { file: 'secrets.json', env: { OP_TOKEN: 'operator-token-1', VT: 'vault-token-1', WT: 'web-token-1', GT: 'gateway-token-1' } },
    );
    expect(configSecrets(config).sort()).toEqual(['Bearer web-token-1', 'gateway-token-1', 'operator-token-1', 'vault-token-1']);
  });

  it('treats a LOG_LEVEL that is an object property (constructor, toString) as no level', () => {
    for (const level of ['constructor', 'toString', '__proto__']) {
      const out = capture();
      const log = createLogger({ service: 'svc', level, destination: out.stream, secrets: [] });
      log.debug('hidden');
      log.info('shown');
      expect(out.lines().map((l) => l.msg)).toEqual([expect.stringContaining(`LOG_LEVEL "${level}" is not a level`), 'shown']);
    }
  });
});
