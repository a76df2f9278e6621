import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  RedisClusterServers,
  TestCluster,
  demoConfig,
  makeCertificates,
  openContext,
  runCli,
  secretFile,
  wholeOutput,
  writeConfig,
  type TestContext,
} from '../helpers/index.js';

// Bosun on a Redis Cluster that speaks only TLS (client and bus) and requires a password: every
// node connection the services, BullMQ and the CLI open must carry the CA and the password.

const PASSWORD = 'cluster-pw-5e0a91';

let ctx: TestContext;
let servers: RedisClusterServers;
let prefix: string;
let env: Record<string, string>;

beforeAll(async () => {
  ctx = await openContext('rcluster-tls');
  const certs = makeCertificates(ctx.dir);
  servers = await new RedisClusterServers(ctx.dir, {
    tls: { cert: certs.serverCert, key: certs.serverKey, ca: certs.ca },
    password: PASSWORD,
  }).start();
  prefix = `{${ctx.prefix}}`;
  env = {
    ...ctx.env,
    BOSUN_PREFIX: prefix,
    BOSUN_CONFIG: writeConfig(ctx, demoConfig()),
    REDIS_URL: servers.url,
    REDIS_PASSWORD_FILE: secretFile(ctx.dir, 'redis-password', `${PASSWORD}\n`),
    REDIS_TLS_CA_FILE: certs.ca,
    REDIS_TLS_CERT_FILE: certs.clientCert,
    REDIS_TLS_KEY_FILE: certs.clientKey,
  };
}, 60_000);

afterAll(async () => {
  const { jetstreamManager } = await import('@nats-io/jetstream');
  await (await jetstreamManager(ctx.nats)).streams.delete(`${prefix}-runs`).catch(() => undefined);
  await servers?.stop();
  await ctx?.close();
});

describe('Redis Cluster over TLS with a password', () => {
  it('runs an incident end to end: services, BullMQ and the CLI all reach every node', async () => {
    expect(servers.url).toMatch(/^rediss:\/\//);
    const cluster = await TestCluster.start(env, { specialists: 1 });
    try {
      const incident = {
        id: 'rct-1',
        source: 'cluster',
        reason: 'ErrorRateHigh',
        summary: 'x',
        labels: { service: 'checkout' },
        payload: { fake: { stall: ['database'] } },
      };
      const pub = await runCli(env, ['publish', '-'], JSON.stringify(incident));
      expect(pub.code, pub.stderr).toBe(0);
      const res = await runCli(env, ['result', 'rct-1', '--wait', '--timeout', '60']);
      expect(res.code, res.stderr).toBe(0);
      const result = JSON.parse(res.stdout) as { status: string; runId: string; specialists: { name: string; status: string }[] };
      expect(result.runId).toBe(pub.stdout.trim());
      expect(result.status).toBe('partial');
      expect(result.specialists.find((s) => s.name === 'kubernetes')?.status).toBe('completed');
      const output = [pub.stderr, res.stderr, ...cluster.processes.map((p) => wholeOutput(p).join('\n'))].join('\n');
      expect(output).not.toContain(PASSWORD);
    } finally {
      await cluster.stop();
    }
  }, 90_000);

  it('a wrong password is refused at once, naming the setting', async () => {
    const r = await runCli({ ...env, REDIS_PASSWORD_FILE: secretFile(ctx.dir, 'wrong', 'not-the-cluster-pw') }, ['result', 'rct-1']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^bosun: Redis: authentication failed \(WRONGPASS [^)]*\) — check REDIS_PASSWORD_FILE$/m);
    expect(r.stderr).not.toContain('not-the-cluster-pw');
  });
});
