/**
 * Redis and NATS as production runs them: TLS with a private CA, client certificates, and
 * credentials (a Redis ACL user with a password, a NATS user with a password). The test makes
 * its own PKI with openssl and starts its own redis-server and nats-server requiring all of it;
 * the services run as separate processes and the CLI as a user runs it. A refused password or
 * certificate stops a service at start-up with a message naming the setting, and no secret is
 * ever printed.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  OwnServer,
  TestCluster,
  freePort,
  demoConfig,
  makeCertificates,
  runCli,
  secretFile,
  startService,
  wholeOutput,
  type TestCertificates,
} from '../helpers/index.js';

const REDIS_PASSWORD = 'redis-acl-pw-4f9c2e';
const NATS_PASSWORD = 'nats-user-pw-8b1d7a';
const WRONG_PASSWORD = 'wrong-pw-31c5e0';

let dir: string;
let certs: TestCertificates;
let redis: OwnServer;
let nats: OwnServer;
/** Everything a process needs to reach both servers. */
let env: Record<string, string>;
let cluster: TestCluster | undefined;
/** Strings that must never appear in any output. */
let secrets: string[];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'bosun-tls-'));
  certs = makeCertificates(dir);
  redis = await new OwnServer('redis', dir, {
    scheme: 'rediss',
    // No plain port; TLS with client certificates required (tls-auth-clients defaults to yes);
    // an ACL user for Bosun, and a different password on the default user.
    args: (port, d) => [
      '--port',
      '0',
      '--tls-port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      d,
      '--save',
      '',
      '--appendonly',
      'no',
      '--tls-cert-file',
      certs.serverCert,
      '--tls-key-file',
      certs.serverKey,
      '--tls-ca-cert-file',
      certs.ca,
      '--requirepass',
      `default-${REDIS_PASSWORD}`,
      '--user',
      'bosun',
      'on',
      `>${REDIS_PASSWORD}`,
      '~*',
      '&*',
      '+@all',
    ],
  }).start();
  nats = new OwnServer('nats', dir, {
    scheme: 'tls',
    // TLS required, client certificates verified, and a user with a password.
    args: (port, d) => {
      const conf = join(d, 'nats.conf');
      writeFileSync(
        conf,
        [
          `listen: 127.0.0.1:${port}`,
          `jetstream { store_dir: ${JSON.stringify(join(d, 'js'))} }`,
          `tls { cert_file: ${JSON.stringify(certs.serverCert)}, key_file: ${JSON.stringify(certs.serverKey)}, ca_file: ${JSON.stringify(certs.ca)}, verify: true }`,
          `authorization { users = [ { user: bosun, password: ${JSON.stringify(NATS_PASSWORD)} } ] }`,
        ].join('\n'),
      );
      return ['-c', conf];
    },
  });
  await nats.start();

  const config = join(dir, 'bosun.json');
  writeFileSync(config, JSON.stringify(demoConfig()));
  env = {
    BOSUN_PREFIX: `t-tls-${randomUUID().slice(0, 8)}`,
    BOSUN_CONFIG: config,
    LOG_LEVEL: 'info',
    REDIS_URL: redis.url,
    REDIS_USERNAME: 'bosun',
    REDIS_PASSWORD_FILE: secretFile(dir, 'redis-password', `${REDIS_PASSWORD}\n`),
    REDIS_TLS_CA_FILE: certs.ca,
    REDIS_TLS_CERT_FILE: certs.clientCert,
    REDIS_TLS_KEY_FILE: certs.clientKey,
    NATS_URL: nats.url,
    NATS_USER: 'bosun',
    NATS_PASSWORD_FILE: secretFile(dir, 'nats-password', `${NATS_PASSWORD}\n`),
    NATS_TLS_CA_FILE: certs.ca,
    NATS_TLS_CERT_FILE: certs.clientCert,
    NATS_TLS_KEY_FILE: certs.clientKey,
  };
  // A line from the middle of the client's private key stands for the key.
  const keyLine = readFileSync(certs.clientKey, 'utf8').split('\n')[5]!;
  secrets = [REDIS_PASSWORD, NATS_PASSWORD, WRONG_PASSWORD, keyLine];
});

afterAll(async () => {
  await cluster?.stop();
  await nats?.stop();
  await redis?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function expectNoSecret(output: string): void {
  for (const s of secrets) expect(output, 'a secret was printed').not.toContain(s);
}

describe('TLS and credentials for Redis and NATS', () => {
  it('runs an incident end to end through Redis and NATS that require TLS, client certificates and passwords', async () => {
    cluster = await TestCluster.start(env, { specialists: 1 });
    const incident = {
      id: 'tls-1',
      source: 'test',
      reason: 'PodCrashLooping',
      summary: 'checkout crash-looping',
      labels: { service: 'checkout' },
    };
    const pub = await runCli(env, ['publish', '-'], JSON.stringify(incident));
    expect(pub.code, pub.stderr).toBe(0);
    const runId = pub.stdout.trim();

    const res = await runCli(env, ['result', 'tls-1', '--wait', '--timeout', '60']);
    expect(res.code, res.stderr).toBe(0);
    const result = JSON.parse(res.stdout) as { status: string; runId: string; answer: string };
    expect(result).toMatchObject({ status: 'completed', runId });

    // The events went through NATS over TLS, into the runs stream, and back out to the CLI.
    const watch = await runCli(env, ['watch', runId]);
    expect(watch.code, watch.stderr).toBe(0);
    const lines = watch.stdout.trim().split('\n');
    expect(lines[0]).toContain('run.started');
    expect(lines.at(-1)).toContain('run.completed');

    const everything =
      [pub, res, watch].map((r) => r.stdout + r.stderr).join('\n') + cluster.processes.map((p) => wholeOutput(p).join('\n')).join('\n');
    expectNoSecret(everything);
  });

  const refusals: [string, () => Record<string, string>, RegExp][] = [
    [
      'a wrong Redis password',
      () => ({ REDIS_PASSWORD_FILE: secretFile(dir, 'wrong-redis', WRONG_PASSWORD) }),
      /Redis: authentication failed \(WRONGPASS [^)]*\) — check REDIS_USERNAME and REDIS_PASSWORD_FILE/,
    ],
    [
      'a Redis server certificate from an unknown CA',
      () => ({ REDIS_TLS_CA_FILE: certs.otherCa }),
      /Redis TLS: certificate signed by an unknown CA \(SELF_SIGNED_CERT_IN_CHAIN\) — check REDIS_TLS_CA_FILE/,
    ],
    [
      'a wrong NATS password',
      () => ({ NATS_PASSWORD_FILE: secretFile(dir, 'wrong-nats', WRONG_PASSWORD) }),
      /NATS: authorization violation — check NATS_USER \/ NATS_PASSWORD_FILE/,
    ],
    [
      'a NATS server certificate from an unknown CA',
      () => ({ NATS_TLS_CA_FILE: certs.otherCa }),
      /NATS TLS: certificate signed by an unknown CA \(UNABLE_TO_VERIFY_LEAF_SIGNATURE\) — check NATS_TLS_CA_FILE/,
    ],
    [
      'a TLS file that does not exist',
      () => ({ REDIS_TLS_CA_FILE: join(dir, 'nope', 'ca.crt') }),
      /REDIS_TLS_CA_FILE: cannot read \S+nope\/ca\.crt \(no such file\)/,
    ],
  ];

  it.each(refusals)(
    '%s stops a service at start-up with exit code 1, naming the setting, printing no secret',
    async (_name, change, message) => {
      const p = startService('coordinator', { ...env, ...change() }, { name: 'coordinator-refused' });
      const { code } = await p.exited;
      const output = wholeOutput(p).join('\n');
      expect(code, output).toBe(1);
      expect(output).toMatch(message);
      // The plain line on stderr, for people and scripts.
      expect(p.lines.some((l) => l.startsWith('coordinator: ') && message.test(l))).toBe(true);
      expectNoSecret(output);
    },
  );

  it('NATS away at start-up and refusing the password later: the service keeps running and says why', async () => {
    const late = new OwnServer('nats', dir, {
      args: (port, d) => {
        const conf = join(d, 'nats.conf');
        writeFileSync(
          conf,
          `listen: 127.0.0.1:${port}\nauthorization { users = [ { user: bosun, password: "another-${NATS_PASSWORD}" } ] }\n`,
        );
        return ['-c', conf];
      },
    });
    late.port = await freePort();
    const natsEnv = { NATS_URL: late.url, NATS_TLS_CA_FILE: '', NATS_TLS_CERT_FILE: '', NATS_TLS_KEY_FILE: '' };
    const p = startService('coordinator', { ...env, ...natsEnv }, { name: 'coordinator-late-nats' });
    try {
      await p.ready();
      await p.waitForLine(/NATS unreachable; events are buffered until it answers/);
      await late.start();
      await p.waitForLine(
        /"err":\{"type":"ConnectionSettingsError","message":"NATS: authorization violation — check NATS_USER \/ NATS_PASSWORD_FILE.*NATS refused the connection settings; events are buffered until it accepts them/,
      );
      expect(p.running).toBe(true);
      expectNoSecret(wholeOutput(p).join('\n'));
    } finally {
      await p.stop();
      await late.stop();
    }
  });

  it('the CLI says the same, with exit code 1', async () => {
    const redisRefused = await runCli({ ...env, REDIS_PASSWORD_FILE: secretFile(dir, 'wrong-redis-cli', WRONG_PASSWORD) }, [
      'result',
      'tls-1',
    ]);
    expect(redisRefused.code).toBe(1);
    expect(redisRefused.stderr).toMatch(
      /^bosun: Redis: authentication failed \(WRONGPASS [^)]*\) — check REDIS_USERNAME and REDIS_PASSWORD_FILE$/m,
    );
    const natsRefused = await runCli({ ...env, NATS_TLS_CA_FILE: certs.otherCa }, ['watch', 'r0123456789abcdef0123']);
    expect(natsRefused.code).toBe(1);
    expect(natsRefused.stderr).toMatch(
      /^bosun: NATS TLS: certificate signed by an unknown CA \(UNABLE_TO_VERIFY_LEAF_SIGNATURE\) — check NATS_TLS_CA_FILE$/m,
    );
    expectNoSecret(redisRefused.stdout + redisRefused.stderr + natsRefused.stdout + natsRefused.stderr);
  });
});
