import { fileURLToPath } from 'node:url';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { Writable } from 'node:stream';

import { afterEach, describe, expect, it } from 'vitest';
import { STALL_MARKER } from '@bosun/contract';
import { stringify } from 'yaml';

import { ConfigError, loadClusterConfig, parseClusterConfig } from './cluster.js';
import { readEnv } from './env.js';
import { createLogger } from './logger.js';
import { buildStallPayload, deriveStallPayload, validateAgainstSchema } from './output-schema.js';

const DEMO = fileURLToPath(new URL('../../../infra/demo/bosun.yaml', import.meta.url));

/** The demo specialists' report schema. */
function reportSchema(): Record<string, unknown> {
  return {
    type: 'object',
    required: ['summary', 'findings', 'evidence'],
    properties: {
      summary: { type: 'string' },
      findings: {
        type: 'array',
        items: { type: 'object', required: ['title', 'detail'], properties: { title: { type: 'string' }, detail: { type: 'string' } } },
      },
      evidence: { type: 'array', items: { type: 'string' } },
      suspectedCause: { type: 'string' },
    },
  };
}

/** A small valid raw config; each call returns a fresh object that a test may change. */
function minimal(): Record<string, any> {
  return {
    coordinator: { routes: { PodCrashLooping: ['kubernetes'] }, defaultRoute: ['kubernetes'] },
    specialists: {
      kubernetes: { description: 'pods', tools: ['demo__*'], outputSchema: reportSchema() },
    },
    mcpServers: { demo: { transport: 'stdio', command: 'node', args: ['main.js'] } },
  };
}

/** The ConfigError thrown by parsing `raw`. */
function configError(
  raw: unknown,
  env: NodeJS.ProcessEnv = {},
  options: { resolveServers?: boolean; resolveOperatorToken?: boolean } = {},
): ConfigError {
  try {
    parseClusterConfig(raw, { file: 'cluster.yaml', env, ...options });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('the demo config', () => {
  it('loads with defaults substituted', () => {
    const config = loadClusterConfig(DEMO, { env: {} });
    expect(Object.keys(config.specialists).sort()).toEqual(['database', 'kubernetes', 'triage']);
    // The CodeAct specialist: its limits not given keep their defaults; the others run the task loop.
    expect(config.specialists.triage).toMatchObject({
      loop: 'codeact',
      mode: 'read-only',
      codeact: { timeMs: 5000, memoryMb: 64, stackKb: 128, maxToolCalls: 20, maxOutputChars: 262_144, maxConsoleChars: 65_536 },
    });
    expect(config.specialists.kubernetes?.loop).toBe('task');
    expect(config.coordinator.mode).toBe('route');
    expect(config.coordinator.routes.ErrorRateHigh).toEqual(['kubernetes', 'database']);
    expect(config.coordinator.defaultRoute).toEqual(['kubernetes']);
    expect(config.coordinator.maxRounds).toBe(3);
    const demo = config.mcpServers.demo;
    expect(demo?.transport).toBe('stdio');
    if (demo?.transport !== 'stdio') throw new Error('unreachable');
    expect(demo.env.DEMO_MCP_SLOW_MS).toBe('0');
    // Relative paths are resolved against the config file's folder.
    expect(demo.cwd).toBe(dirname(DEMO));
    const k = config.specialists.kubernetes!;
    expect(k.tools).toEqual(['demo__*']);
    expect(k.maxToolRounds).toBe(8);
    expect(k.maxInvalidOutputs).toBe(2);
    expect(k.model.provider).toBe('auto');
    expect(k.fakePlan.map((c) => c.tool)).toEqual(['demo__get_pods', 'demo__get_logs', 'demo__get_deployments']);
    expect(k.fakePlan[1]?.args).toEqual({ service: '${labels.service}', lines: 10 });
    expect(config.gateway.callTimeoutMs).toBe(30000);
  });

  it('takes a substituted value from the environment when set', () => {
    const config = loadClusterConfig(DEMO, { env: { DEMO_MCP_SLOW_MS: '250' } });
    const demo = config.mcpServers.demo;
    if (demo?.transport !== 'stdio') throw new Error('expected a stdio server');
    expect(demo.env.DEMO_MCP_SLOW_MS).toBe('250');
  });

  it('is frozen', () => {
    const config = loadClusterConfig(DEMO, { env: {} });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.specialists.kubernetes!.tools)).toBe(true);
  });

  it('names the file when it cannot be read', () => {
    expect(() => loadClusterConfig('/nonexistent/bosun.yaml', { env: {} })).toThrow(/cannot read config file \/nonexistent\/bosun\.yaml/);
  });
});

describe('config errors name the field', () => {
  it('accepts the minimal config', () => {
    expect(() => parseClusterConfig(minimal(), { file: 'cluster.yaml', env: {} })).not.toThrow();
  });

  it('a route to an unknown specialist', () => {
    const raw = minimal();
    raw.coordinator.routes.HighLatency = ['kubernetes', 'databse'];
    const err = configError(raw);
    expect(err.message).toContain('cluster.yaml');
    expect(err.message).toContain('coordinator.routes.HighLatency');
    expect(err.message).toContain('"databse"');
    expect(err.code).toBe('invalid_config');
  });

  it('a default route to an unknown specialist', () => {
    const raw = minimal();
    raw.coordinator.defaultRoute = ['nobody'];
    expect(configError(raw).message).toContain('coordinator.defaultRoute');
  });

  it('a tool pattern for an unknown server', () => {
    const raw = minimal();
    raw.specialists.kubernetes.tools = ['demo__get_pods', 'k8s__*'];
    const err = configError(raw);
    expect(err.message).toContain('specialists.kubernetes.tools.1');
    expect(err.message).toContain('"k8s__*"');
  });

  it('a tool pattern without a server', () => {
    const raw = minimal();
    raw.specialists.kubernetes.tools = ['get_pods'];
    expect(configError(raw).message).toContain('specialists.kubernetes.tools.0');
  });

  it('a bad specialist name', () => {
    const raw = minimal();
    raw.specialists.Kube_1 = raw.specialists.kubernetes;
    expect(configError(raw).message).toContain('specialists.Kube_1');
  });

  it('an unknown top-level key', () => {
    const raw = minimal();
    raw.specialist = {};
    expect(configError(raw).message).toContain('"specialist"');
  });

  it('an unknown key inside a specialist', () => {
    const raw = minimal();
    raw.specialists.kubernetes.maxToolRound = 3;
    const message = configError(raw).message;
    expect(message).toContain('specialists.kubernetes');
    expect(message).toContain('maxToolRound');
  });

  it('a missing ${VAR} without a default names the variable and the field', () => {
    const raw = minimal();
    raw.mcpServers.demo.env = { TOKEN: 'Bearer ${DEMO_TOKEN}' };
    const err = configError(raw, {});
    expect(err.message).toContain('DEMO_TOKEN');
    expect(err.message).toContain('mcpServers.demo.env.TOKEN');
    // Set, it is substituted.
    const config = parseClusterConfig(minimal2(raw), { file: 'cluster.yaml', env: { DEMO_TOKEN: 't0k' } });
    const demo = config.mcpServers.demo;
    if (demo?.transport !== 'stdio') throw new Error('expected a stdio server');
    expect(demo.env.TOKEN).toBe('Bearer t0k');
  });

  it('reserves the specialist name mcp-client for the gateway MCP face', () => {
    const raw = minimal();
    raw.specialists['mcp-client'] = raw.specialists.kubernetes;
    expect(configError(raw, {}).message).toContain('specialists.mcp-client: the name is reserved');
  });

  it('leaves server values unresolved for services that do not connect to servers', () => {
    const raw = minimal();
    raw.mcpServers.demo.env = { TOKEN: 'Bearer ${DEMO_TOKEN}' };
    const config = parseClusterConfig(raw, { file: 'cluster.yaml', env: {}, resolveServers: false });
    const demo = config.mcpServers.demo;
    if (demo?.transport !== 'stdio') throw new Error('expected a stdio server');
    expect(demo.env.TOKEN).toBe('Bearer ${DEMO_TOKEN}');
  });

  it('a missing ${VAR} in an http header names the header', () => {
    const raw = minimal();
    raw.mcpServers.web = { transport: 'http', url: 'http://127.0.0.1:1/mcp', headers: { Authorization: '${WEB_TOKEN}' } };
    const err = configError(raw, {});
    expect(err.message).toContain('WEB_TOKEN');
    expect(err.message).toContain('mcpServers.web.headers.Authorization');
  });

  it('an output schema whose required enum has no unknown-like value and no stallPayload', () => {
    const raw = minimal();
    raw.specialists.kubernetes.outputSchema = {
      type: 'object',
      required: ['summary', 'severity'],
      properties: { summary: { type: 'string' }, severity: { enum: ['low', 'high'] } },
    };
    const err = configError(raw);
    expect(err.message).toContain('specialists.kubernetes');
    expect(err.message).toContain('severity');
    expect(err.message).toContain('stallPayload');
  });

  it('a required enum with an unknown-like value is filled with it', () => {
    const raw = minimal();
    raw.specialists.kubernetes.outputSchema = {
      type: 'object',
      required: ['summary', 'severity'],
      properties: { summary: { type: 'string' }, severity: { enum: ['low', 'high', 'Unknown'] } },
    };
    expect(() => parseClusterConfig(raw, { file: 'cluster.yaml', env: {} })).not.toThrow();
  });

  it('a configured stallPayload with ${stallText} validates', () => {
    const raw = minimal();
    const schema = {
      type: 'object',
      required: ['summary', 'severity'],
      properties: { summary: { type: 'string' }, severity: { enum: ['low', 'high'] } },
    };
    raw.specialists.kubernetes.outputSchema = schema;
    raw.specialists.kubernetes.stallPayload = { summary: '${stallText}\n(stalled)', severity: 'high' };
    const config = parseClusterConfig(raw, { file: 'cluster.yaml', env: {} });
    const payload = buildStallPayload(config.specialists.kubernetes!, 'kubernetes', 'which cluster?');
    expect(payload.severity).toBe('high');
    expect(payload.summary).toMatch(new RegExp(`^${escape(STALL_MARKER)}`));
    expect(payload.summary).toContain('which cluster?');
    expect(validateAgainstSchema(schema, payload)).toBeNull();
  });

  it('a stallPayload without ${stallText} is rejected', () => {
    const raw = minimal();
    raw.specialists.kubernetes.stallPayload = { summary: 'nothing to see', findings: [], evidence: [] };
    expect(configError(raw).message).toContain('${stallText}');
  });

  it('a stallPayload that does not validate is rejected', () => {
    const raw = minimal();
    raw.specialists.kubernetes.stallPayload = { summary: '${stallText}', findings: 'none' };
    const message = configError(raw).message;
    expect(message).toContain('does not validate');
    expect(message).toContain('/findings');
  });

  it('no specialists at all', () => {
    const raw = minimal();
    raw.specialists = {};
    raw.coordinator = {};
    expect(configError(raw).message).toContain('specialists');
  });
});

describe('${VAR} in number and boolean fields', () => {
  const gatewayOnly = { resolveServers: true, resolveOperatorToken: false };
  const specialistOnly = { resolveServers: false, resolveOperatorToken: false };
  const withFace = (port: unknown): Record<string, any> => ({ ...minimal(), gateway: { mcpServer: { port, token: 'not-a-secret' } } });

  it('numbers: a placeholder becomes the number, from the environment or its default', () => {
    const raw = withFace('${MCP_PORT}');
    raw.workers = { lockDurationMs: '${LOCK_MS:-15000}', maxStalledCount: '${STALLS}' };
    raw.specialists.kubernetes.deadlineMs = '${DEADLINE_S}000';
    const config = parseClusterConfig(raw, {
      file: 'cluster.yaml',
      env: { MCP_PORT: '8090', STALLS: ' 3 ', DEADLINE_S: '90' },
      ...gatewayOnly,
    });
    expect(config.gateway.mcpServer?.port).toBe(8090);
    expect(config.workers.lockDurationMs).toBe(15_000);
    expect(config.workers.maxStalledCount).toBe(3);
    expect(config.specialists.kubernetes?.deadlineMs).toBe(90_000);
  });

  it('booleans: true or false, in any case', () => {
    const raw = minimal();
    raw.specialists.kubernetes.routing = { enabled: '${ROUTING}' };
    const on = parseClusterConfig(minimal2(raw), { file: 'cluster.yaml', env: { ROUTING: 'TRUE' } });
    expect(on.specialists.kubernetes?.routing.enabled).toBe(true);
    const off = parseClusterConfig(minimal2(raw), { file: 'cluster.yaml', env: { ROUTING: 'false' } });
    expect(off.specialists.kubernetes?.routing.enabled).toBe(false);
    raw.specialists.kubernetes.routing = { enabled: '${ROUTING:-false}' };
    expect(parseClusterConfig(minimal2(raw), { file: 'cluster.yaml', env: {} }).specialists.kubernetes?.routing.enabled).toBe(false);
  });

  it('takes an unquoted ${VAR} in a YAML file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'bosun-config-'));
    try {
      const file = join(dir, 'bosun.yaml');
      writeFileSync(
        file,
        `${stringify(minimal())}gateway:\n  callTimeoutMs: \${CALL_MS}\n  mcpServer:\n    port: \${MCP_PORT:-9000}\n    token: x\n`,
      );
      const config = loadClusterConfig(file, { env: { CALL_MS: '2500' } });
      expect(config.gateway.callTimeoutMs).toBe(2_500);
      expect(config.gateway.mcpServer?.port).toBe(9_000);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a value that is not a number or a boolean names the field and the variable, and never shows the value', () => {
    const secret = 'sk-live-0123456789abcdef';
    const notNumber = configError(withFace('${MCP_PORT}'), { MCP_PORT: secret });
    expect(notNumber.message).toBe(
      'cluster.yaml: gateway.mcpServer.port: ${MCP_PORT} must give a number (environment variable MCP_PORT; its value is not shown)',
    );
    const outOfRange = configError(withFace('${MCP_PORT}'), { MCP_PORT: '70000' });
    expect(outOfRange.message).toContain('gateway.mcpServer.port: ${MCP_PORT}: Too big');
    expect(outOfRange.message).toContain('MCP_PORT; its value is not shown');
    expect(outOfRange.message).not.toContain('70000');
    const fraction = minimal();
    fraction.workers = { maxStalledCount: '${STALLS}' };
    expect(configError(fraction, { STALLS: '1.5' }).message).toMatch(
      /^cluster\.yaml: workers\.maxStalledCount: \$\{STALLS\}: .*expected int/,
    );
    const bool = minimal();
    bool.specialists.kubernetes.routing = { enabled: '${ROUTING}' };
    const badBool = configError(bool, { ROUTING: secret });
    expect(badBool.message).toBe(
      'cluster.yaml: specialists.kubernetes.routing.enabled: ${ROUTING} must give true or false (environment variable ROUTING; its value is not shown)',
    );
    for (const err of [notNumber, outOfRange, badBool]) expect(err.message).not.toContain(secret);
    // A default from the file is not secret: it is shown.
    expect(configError(withFace('${MCP_PORT:-eighty}'), {}).message).toContain('must give a number ("eighty")');
  });

  it('an unset variable without a default names the field and the variable', () => {
    expect(configError(withFace('${MCP_PORT}'), {}).message).toBe(
      'cluster.yaml: gateway.mcpServer.port: environment variable MCP_PORT is not set',
    );
  });

  it('a plain string is still not a number', () => {
    const raw = withFace('8080');
    expect(configError(raw).message).toBe('cluster.yaml: gateway.mcpServer.port: Invalid input: expected number, received string');
    raw.gateway.mcpServer.port = 70_000;
    expect(configError(raw).message).toContain('gateway.mcpServer.port: Too big');
  });

  it('each service resolves only its own sections: gateway.mcpServer in the gateway, coordinator.http in the coordinator', () => {
    const raw = withFace('${MCP_PORT}');
    raw.coordinator.http = { port: '${API_PORT}', operatorToken: '${OP_TOKEN}' };
    raw.workers = { lockDurationMs: '${LOCK_MS}' };
    const env = { LOCK_MS: '20000' };
    // The specialist needs neither port, and leaves both as written; every service resolves workers.
    const specialist = parseClusterConfig(minimal2(raw), { file: 'cluster.yaml', env, ...specialistOnly });
    expect(specialist.gateway.mcpServer?.port).toBe('${MCP_PORT}');
    expect(specialist.coordinator.http?.port).toBe('${API_PORT}');
    expect(specialist.workers.lockDurationMs).toBe(20_000);
    // The gateway needs its port, not the coordinator's.
    expect(configError(minimal2(raw), env, gatewayOnly).message).toBe(
      'cluster.yaml: gateway.mcpServer.port: environment variable MCP_PORT is not set',
    );
    const gateway = parseClusterConfig(minimal2(raw), { file: 'cluster.yaml', env: { ...env, MCP_PORT: '8090' }, ...gatewayOnly });
    expect(gateway.gateway.mcpServer?.port).toBe(8090);
    expect(gateway.coordinator.http?.port).toBe('${API_PORT}');
    // The coordinator needs its port, not the gateway's.
    const coordinator = parseClusterConfig(minimal2(raw), {
      file: 'cluster.yaml',
      env: { ...env, API_PORT: '8081', OP_TOKEN: 'op-token-1' },
      resolveServers: false,
    });
    expect(coordinator.coordinator.http?.port).toBe(8081);
    expect(coordinator.gateway.mcpServer?.port).toBe('${MCP_PORT}');
  });
});

describe('stall payloads and schema validation', () => {
  it('deriveStallPayload leaves arrays empty and puts the marker in summary', () => {
    const payload = deriveStallPayload(reportSchema(), `${STALL_MARKER}\nAgent: k`);
    expect(payload).toEqual({ summary: `${STALL_MARKER}\nAgent: k`, findings: [], evidence: [] });
    expect(validateAgainstSchema(reportSchema(), payload)).toBeNull();
  });

  it('deriveStallPayload refuses a required number', () => {
    const schema = {
      type: 'object',
      required: ['summary', 'count'],
      properties: { summary: { type: 'string' }, count: { type: 'number' } },
    };
    expect(() => deriveStallPayload(schema, 'x')).toThrow(/count.*stallPayload/);
  });

  it('validateAgainstSchema names the failing paths', () => {
    expect(validateAgainstSchema(reportSchema(), { summary: 's', findings: [], evidence: [] })).toBeNull();
    const problem = validateAgainstSchema(reportSchema(), { summary: 3, findings: [{ title: 't' }], evidence: [] });
    expect(problem).toContain('/summary: must be string');
    expect(problem).toContain("/findings/0: must have required property 'detail'");
    const missing = validateAgainstSchema(reportSchema(), { summary: 's' });
    expect(missing).toContain("(root): must have required property 'findings'");
    const enumSchema = { type: 'object', properties: { severity: { enum: ['low', 'high'] } } };
    expect(validateAgainstSchema(enumSchema, { severity: 'mid' })).toBe(
      '/severity: must be equal to one of the allowed values ["low","high"]',
    );
  });
});

describe('createLogger', () => {
  const saved = process.env.FOO_API_KEY;
  afterEach(() => {
    if (saved === undefined) delete process.env.FOO_API_KEY;
    else process.env.FOO_API_KEY = saved;
  });

  function capture(): { lines: () => Record<string, unknown>[]; stream: Writable } {
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
          .map((l) => JSON.parse(l) as Record<string, unknown>),
    };
  }

  it('writes the service name and redacts secret-bearing keys', () => {
    const out = capture();
    const log = createLogger({ service: 'svc-test', destination: out.stream });
    log.info(
      { apiKey: 'AIza-123456', headers: { Authorization: 'Bearer abcdef' }, env: { X: 'y' }, server: { env: { Y: 'z' } }, keep: 'visible' },
      'hello',
    );
    const [line] = out.lines();
    expect(line).toBeDefined();
    expect(line!.name).toBe('svc-test');
    expect(line!.msg).toBe('hello');
    expect(line!.apiKey).toBe('[redacted]');
    expect(line!.headers).toBe('[redacted]');
    expect(line!.env).toBe('[redacted]');
    expect((line!.server as Record<string, unknown>).env).toBe('[redacted]');
    expect(line!.keep).toBe('visible');
    const raw = JSON.stringify(out.lines());
    expect(raw).not.toContain('AIza-123456');
    expect(raw).not.toContain('abcdef');
  });

  it('scrubs the value of a KEY-like environment variable from messages', () => {
    process.env.FOO_API_KEY = 'sekrit-value-42';
    const out = capture();
    const log = createLogger({ service: 'svc-test', destination: out.stream });
    log.warn('request failed: key sekrit-value-42 rejected');
    log.error({ op: 'x' }, 'again sekrit-value-42');
    const lines = out.lines();
    expect(lines).toHaveLength(2);
    expect(lines[0]!.msg).toBe('request failed: key [redacted] rejected');
    expect(lines[1]!.msg).toBe('again [redacted]');
    expect(JSON.stringify(lines)).not.toContain('sekrit-value-42');
  });

  it('respects the level', () => {
    const out = capture();
    const log = createLogger({ service: 'svc-test', level: 'warn', destination: out.stream });
    log.info('quiet');
    log.warn('loud');
    expect(out.lines().map((l) => l.msg)).toEqual(['loud']);
  });
});

describe('readEnv', () => {
  it('rejects a BOSUN_PREFIX with a dot, naming BOSUN_PREFIX', () => {
    expect(() => readEnv({ BOSUN_PREFIX: 'bosun.test' })).toThrow(ConfigError);
    expect(() => readEnv({ BOSUN_PREFIX: 'bosun.test' })).toThrow(/^BOSUN_PREFIX: /);
  });

  it('has defaults and the bundled demo config', () => {
    const env = readEnv({});
    expect(env.prefix).toBe('bosun');
    expect(env.redisUrl).toBe('redis://127.0.0.1:6379');
    expect(env.natsUrl).toBe('nats://127.0.0.1:4222');
    expect(env.configFile).toBe(resolve(DEMO));
    expect(env.geminiApiKey).toBeUndefined();
    expect(env.logLevel).toBe('info');
  });

  it('rejects a non-redis REDIS_URL and a missing config file, naming the variable', () => {
    expect(() => readEnv({ REDIS_URL: 'http://x' })).toThrow(/^REDIS_URL: /);
    expect(() => readEnv({ BOSUN_CONFIG: '/nonexistent/bosun.yaml' })).toThrow(/^BOSUN_CONFIG: /);
  });

  it('treats a blank GEMINI_API_KEY as unset', () => {
    expect(readEnv({ GEMINI_API_KEY: '  ' }).geminiApiKey).toBeUndefined();
    expect(readEnv({ GEMINI_API_KEY: 'abc' }).geminiApiKey).toBe('abc');
  });
});

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** A copy of a raw config (the parsed one is frozen and substituted in place). */
function minimal2(raw: Record<string, any>): Record<string, any> {
  return JSON.parse(JSON.stringify(raw)) as Record<string, any>;
}
