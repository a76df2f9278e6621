import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ENTRY,
  READY_LINE,
  demoConfig,
  freePort,
  openContext,
  reap,
  runEntry,
  startService,
  waitUntil,
  writeConfig,
  type CliRun,
  type TestContext,
} from '../helpers/index.js';

// How a script knows a service is ready without reading log lines: `--check` (one line, exit
// 0 / 1 / 2) and the ready line on stdout, next to `/readyz` (docs/architecture.md).

const SERVICES = ['gateway', 'coordinator', 'specialist'] as const;
type Kind = (typeof SERVICES)[number];
const NAME: Record<Kind, string> = { gateway: 'tool-gateway', coordinator: 'coordinator', specialist: 'specialist' };

const OPERATOR_TOKEN = 'op-secret-4f9a1c2b7d';
const FACE_TOKEN = 'face-secret-8e3d5a6f0c';
const REDIS_PASSWORD = 'redis-pass-3b7c9e1a';

let ctx: TestContext;
let env: Record<string, string>;

const check = (kind: Kind, extra: Record<string, string> = {}, args: string[] = ['--check']): Promise<CliRun> =>
  runEntry(ENTRY[kind], { ...env, ...extra }, args);

/** Runs one after the other: a 2-core machine gains nothing from starting them all at once. */
async function inTurn<T extends (() => Promise<CliRun>)[]>(...runs: T): Promise<{ [K in keyof T]: CliRun }> {
  const out: CliRun[] = [];
  for (const run of runs) out.push(await run());
  // One result per run, in order: the tuple of results has the shape of the tuple of runs.
  return out as { [K in keyof T]: CliRun };
}

function expectNoSecret(run: CliRun): void {
  for (const secret of [OPERATOR_TOKEN, FACE_TOKEN, REDIS_PASSWORD]) {
    expect(run.stdout).not.toContain(secret);
    expect(run.stderr).not.toContain(secret);
  }
}

beforeAll(async () => {
  ctx = await openContext('readiness');
  const config = demoConfig();
  config.coordinator.http = { port: 0, operatorToken: '${BOSUN_OPERATOR_TOKEN}' };
  config.gateway = { ...config.gateway, mcpServer: { port: '${BOSUN_MCP_PORT:-0}', token: '${BOSUN_GATEWAY_TOKEN}', tools: ['demo__*'] } };
  env = {
    ...ctx.env,
    BOSUN_CONFIG: writeConfig(ctx, config),
    BOSUN_OPERATOR_TOKEN: OPERATOR_TOKEN,
    BOSUN_GATEWAY_TOKEN: FACE_TOKEN,
  };
});

afterAll(async () => {
  await ctx?.close();
});

describe('--check', () => {
  it('with a good config and environment: one line on stdout, exit 0, no secret', async () => {
    const runs = await inTurn(...SERVICES.map((kind) => () => check(kind)));
    runs.forEach((run, i) => {
      const kind = SERVICES[i]!;
      expect(run.code, run.stderr).toBe(0);
      expect(run.stderr).toBe('');
      // LOG_LEVEL is info here: the logger is silenced, stdout holds the result line only.
      expect(run.stdout.split('\n')).toEqual([expect.stringMatching(new RegExp(`^${NAME[kind]}: check ok: config .*bosun\\.json`)), '']);
      expect(run.stdout).toContain(`(prefix ${ctx.prefix}), NATS ${ctx.natsUrl}`);
      expect(run.stdout).toContain('with JetStream');
      expectNoSecret(run);
    });
    expect(runs[0]!.stdout).toMatch(/MCP servers: demo \(\d+ tools\)/);
    expect(runs[0]!.stdout).toContain('MCP face on 127.0.0.1:0');
    expect(runs[1]!.stdout).toContain('operator API on 127.0.0.1:0');
    expect(runs[2]!.stdout).toContain('specialists kubernetes (fake), database (fake)');
    // The check takes no work: no worker ever registered under the prefix.
    expect(await ctx.redis.keys(`${ctx.prefix}:*:w:*`)).toEqual([]);
  }, 120_000);

  it('with a bad config or environment: a clear error on stderr, exit 1, nothing on stdout', async () => {
    const badRoute = demoConfig();
    badRoute.coordinator.routes.DiskFull = ['storage'];
    const badRouteFile = writeConfig(ctx, badRoute, 'bad-route.json');
    const [route, emptyToken, missingVar, badNumber, healthPort, only] = await inTurn(
      () => check('coordinator', { BOSUN_CONFIG: badRouteFile }),
      () => check('coordinator', { BOSUN_OPERATOR_TOKEN: '' }),
      () => runEntry(ENTRY.gateway, Object.fromEntries(Object.entries(env).filter(([k]) => k !== 'BOSUN_GATEWAY_TOKEN')), ['--check']),
      // A secret put by mistake where a number belongs is never printed.
      () => check('gateway', { BOSUN_MCP_PORT: FACE_TOKEN }),
      () => check('specialist', { BOSUN_HEALTH_PORT: '99999' }),
      () => check('specialist', {}, ['--check', '--only', 'kubernetes,nosuch']),
    );
    expect(route.stderr).toMatch(
      /^coordinator: check failed: .*bad-route\.json: coordinator\.routes\.DiskFull: unknown specialist "storage"/,
    );
    expect(emptyToken.stderr).toMatch(
      /^coordinator: check failed: .*bosun\.json: coordinator\.http\.operatorToken is empty after substitution\n$/,
    );
    expect(missingVar.stderr).toMatch(
      /^tool-gateway: check failed: .*bosun\.json: gateway\.mcpServer\.token: environment variable BOSUN_GATEWAY_TOKEN is not set\n$/,
    );
    expect(badNumber.stderr).toContain('tool-gateway: check failed: ');
    expect(badNumber.stderr).toContain(
      'gateway.mcpServer.port: ${BOSUN_MCP_PORT:-0} must give a number (environment variable BOSUN_MCP_PORT; its value is not shown)',
    );
    expect(healthPort.stderr).toBe('specialist: check failed: BOSUN_HEALTH_PORT: "99999" must be a port number\n');
    expect(only.stderr).toMatch(/^specialist: check failed: --only: unknown specialist\(s\) nosuch/);
    for (const run of [route, emptyToken, missingVar, badNumber, healthPort, only]) {
      expect(run.code, run.stderr).toBe(1);
      expect(run.stdout).toBe('');
      expectNoSecret(run);
    }
  }, 120_000);

  it('an MCP server that cannot start fails the gateway check, naming it', async () => {
    const config = demoConfig();
    config.mcpServers.broken = {
      transport: 'stdio',
      command: join(ctx.dir, 'no-such-server'),
      env: { API_TOKEN: '${BOSUN_GATEWAY_TOKEN}' },
    };
    const run = await check('gateway', { BOSUN_CONFIG: writeConfig(ctx, config, 'broken-server.json') });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^tool-gateway: check failed: cannot connect to MCP server broken: /);
    expect(run.stderr).not.toContain('MCP server demo');
    expectNoSecret(run);
  }, 120_000);

  it('Redis or NATS unreachable, or NATS without JetStream: exit 1 naming the variable', async () => {
    const [redisPort, natsPort, plainNatsPort] = await Promise.all([freePort(), freePort(), freePort()]);
    // A NATS server without JetStream (-js not given).
    const plain = reap(spawn('nats-server', ['-a', '127.0.0.1', '-p', String(plainNatsPort)], { stdio: 'ignore' }));
    try {
      const [redis, nats] = await Promise.all([
        check('coordinator', { REDIS_URL: `redis://:${REDIS_PASSWORD}@127.0.0.1:${redisPort}` }),
        check('specialist', { NATS_URL: `nats://127.0.0.1:${natsPort}` }),
      ]);
      expect(redis.code).toBe(1);
      // The password in the URL is a secret: the message names the server without it.
      expect(redis.stderr).toMatch(
        new RegExp(
          `^coordinator: check failed: Redis at redis://127\\.0\\.0\\.1:${redisPort}/? did not answer within 5000 ms .*Start it or set REDIS_URL\\.`,
        ),
      );
      expect(nats.code).toBe(1);
      expect(nats.stderr).toMatch(
        new RegExp(`^specialist: check failed: NATS at nats://127\\.0\\.0\\.1:${natsPort}/? is unreachable .*Start it or set NATS_URL\\.`),
      );
      for (const run of [redis, nats]) {
        expect(run.stdout).toBe('');
        expectNoSecret(run);
      }
      await waitUntil(
        async () => (await check('gateway', { NATS_URL: `nats://127.0.0.1:${plainNatsPort}` })).stderr.includes('JetStream does not'),
        10_000,
        'the check reports NATS without JetStream',
      );
    } finally {
      plain.kill();
    }
  }, 120_000);

  it('an unknown option is a usage error: exit 2', async () => {
    const run = await check('coordinator', {}, ['--chek']);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("coordinator: Unknown option '--chek'");
    expect(run.stderr).toContain('(options: --check)');
    expect(run.stdout).toBe('');
  }, 120_000);
});

describe('the ready line', () => {
  it('is printed once on stdout when /readyz turns 200, whatever LOG_LEVEL says', async () => {
    const healthPort = await freePort();
    const gateway = startService('gateway', { ...env, LOG_LEVEL: 'silent', BOSUN_HEALTH_PORT: String(healthPort) });
    try {
      const line = await gateway.waitForLine(READY_LINE, 30_000);
      expect(JSON.parse(line)).toEqual({ bosun: 'ready', service: 'tool-gateway', pid: gateway.pid });
      const ready = await fetch(`http://127.0.0.1:${healthPort}/readyz`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toEqual({ service: 'tool-gateway', state: 'ready' });
      // Silent: the ready line is the only line printed.
      expect(gateway.lines).toEqual([line]);
    } finally {
      expect((await gateway.stop()).code).toBe(0);
    }
    expect(gateway.lines.filter((l) => READY_LINE.test(l))).toHaveLength(1);
  }, 120_000);
});
