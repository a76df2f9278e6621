import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Cluster, Redis } from 'ioredis';
import { AuthorizationError, nkeys } from '@nats-io/transport-node';
import { readNatsSettings, readRedisSettings } from '@bosun/config';
import { makeCertificates, type TestCertificates } from '../../../../test/helpers/tls.js';
import {
  DEAD_LINK,
  ConnectionSettingsError,
  createRedis,
  natsConnectOptions,
  natsSettingsFailure,
  redisClientOptions,
  redisSettingsFailure,
} from './connections.js';
import { CoalescingConnector } from './redis-writes.js';

let dir: string;
let certs: TestCertificates;
const file = (name: string, content: string) => {
  const p = join(dir, name);
  writeFileSync(p, content);
  return p;
};
const pem = (path: string) => readFileSync(path, 'utf8');

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'bosun-conn-'));
  certs = makeCertificates(dir);
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** An error as a client library raises it: Node's TLS errors carry a `code`, Redis replies are `ReplyError`s. */
function libError(message: string, props: Record<string, unknown>): Error {
  return Object.assign(new Error(message), props);
}

describe('the environment → Redis client options', () => {
  it('rediss:// with a CA, a client certificate, an ACL user and a password', () => {
    const settings = readRedisSettings({
      REDIS_URL: 'rediss://r.example:6380/1',
      REDIS_USERNAME: 'bosun',
      REDIS_PASSWORD_FILE: file('pw', 'pw-1\n'),
      REDIS_TLS_CA_FILE: certs.ca,
      REDIS_TLS_CERT_FILE: certs.clientCert,
      REDIS_TLS_KEY_FILE: certs.clientKey,
    });
    const o = redisClientOptions(settings, { name: 'bosun-test' });
    expect(o.cluster).toBe(false);
    if (o.cluster) return;
    expect(o.url).toBe('rediss://r.example:6380/1');
    expect(o.options).toMatchObject({ username: 'bosun', password: 'pw-1', connectionName: 'bosun-test', maxRetriesPerRequest: null });
    expect(o.options.tls).toEqual({ ca: pem(certs.ca), cert: pem(certs.clientCert), key: pem(certs.clientKey) });
  });

  it('plain redis:// gets no TLS; rediss:// without files gets TLS with the built-in CAs', () => {
    const tlsOf = (o: ReturnType<typeof redisClientOptions>) => (o.cluster ? o.options.redisOptions?.tls : o.options.tls);
    expect(tlsOf(redisClientOptions(readRedisSettings({})))).toBeUndefined();
    expect(tlsOf(redisClientOptions(readRedisSettings({ REDIS_URL: 'rediss://r:6379' })))).toEqual({});
  });

  it('Redis Cluster: every node connection gets the TLS and the credentials (redisOptions)', () => {
    const settings = readRedisSettings({ REDIS_URL: 'rediss://:pw-2@r1:7000,rediss://:pw-2@r2:7001', REDIS_TLS_CA_FILE: certs.ca });
    const o = redisClientOptions(settings);
    expect(o.cluster).toBe(true);
    if (!o.cluster) return;
    expect(o.nodes).toEqual([
      { host: 'r1', port: 7000 },
      { host: 'r2', port: 7001 },
    ]);
    expect(o.options.redisOptions).toMatchObject({ password: 'pw-2', tls: { ca: pem(certs.ca) }, maxRetriesPerRequest: null });
  });

  it('finds a dead link in seconds on every connection: a socket timeout above the longest blocking command, TCP keep-alive, NATS pings', () => {
    const plain = redisClientOptions(readRedisSettings({}));
    const cluster = redisClientOptions(readRedisSettings({ REDIS_URL: 'redis://r1:7000,redis://r2:7001' }));
    const dead = { socketTimeout: DEAD_LINK.socketTimeoutMs, keepAlive: DEAD_LINK.keepAliveMs };
    expect(plain.options).toMatchObject(dead);
    expect(cluster.cluster && cluster.options.redisOptions).toMatchObject(dead);
    // Longer than BullMQ's longest block (10 s) with room for a slow link; short enough for 15 s.
    expect(DEAD_LINK.socketTimeoutMs).toBeGreaterThan(11_000);
    expect(DEAD_LINK.socketTimeoutMs).toBeLessThanOrEqual(15_000);
    const nats = natsConnectOptions(readNatsSettings({}));
    expect(nats).toMatchObject({ pingInterval: DEAD_LINK.natsPingIntervalMs, maxPingOut: DEAD_LINK.natsMaxPingOut });
    // Stale at the ping after maxPingOut unanswered ones.
    expect(DEAD_LINK.natsPingIntervalMs * (DEAD_LINK.natsMaxPingOut + 1)).toBeLessThanOrEqual(15_000);
  });

  it('the clients createRedis opens, and the duplicates BullMQ makes of them, carry it all', () => {
    const settings = readRedisSettings({ REDIS_URL: 'rediss://127.0.0.1:1', REDIS_PASSWORD: 'pw-3', REDIS_TLS_CA_FILE: certs.ca });
    const single = createRedis(settings) as Redis;
    const dup = single.duplicate();
    const cluster = createRedis(
      readRedisSettings({ REDIS_URL: 'rediss://127.0.0.1:1', REDIS_CLUSTER: '1', REDIS_PASSWORD: 'pw-3', REDIS_TLS_CA_FILE: certs.ca }),
    ) as Cluster;
    const clusterDup = cluster.duplicate();
    for (const c of [single, dup, cluster, clusterDup]) c.on('error', () => undefined);
    try {
      for (const options of [single.options, dup.options, cluster.options.redisOptions!, clusterDup.options.redisOptions!]) {
        expect(options).toMatchObject({ password: 'pw-3', tls: { ca: pem(certs.ca) }, Connector: CoalescingConnector });
      }
      // REDIS_COALESCE_WRITES=off: ioredis's own connector, one write per command.
      expect(redisClientOptions(readRedisSettings({ REDIS_COALESCE_WRITES: 'off' })).options).not.toHaveProperty('Connector');
    } finally {
      for (const c of [single, dup, cluster, clusterDup]) c.disconnect();
    }
  });
});

describe('the environment → NATS connection options', () => {
  it('tls:// with a CA and a client certificate', () => {
    const o = natsConnectOptions(
      readNatsSettings({
        NATS_URL: 'tls://n1:4222,tls://n2:4222',
        NATS_TLS_CA_FILE: certs.ca,
        NATS_TLS_CERT_FILE: certs.clientCert,
        NATS_TLS_KEY_FILE: certs.clientKey,
      }),
      { name: 'bosun-test' },
    );
    expect(o).toMatchObject({ servers: ['n1:4222', 'n2:4222'], name: 'bosun-test', maxReconnectAttempts: -1 });
    expect(o.tls).toEqual({ ca: pem(certs.ca), cert: pem(certs.clientCert), key: pem(certs.clientKey) });
    expect(o.authenticator).toBeUndefined();
    // nats:// with no TLS file: TLS only when the server asks (the option stays unset).
    expect(natsConnectOptions(readNatsSettings({})).tls).toBeUndefined();
    expect(natsConnectOptions(readNatsSettings({ NATS_URL: 'tls://n1:4222' })).tls).toEqual({});
  });

  it('a user and password, a token, an NKEY seed and a creds file each answer the server as NATS expects', () => {
    const auth = (env: Record<string, string>, nonce = 'nonce-1') => {
      const a = natsConnectOptions(readNatsSettings(env)).authenticator;
      if (typeof a !== 'function') throw new Error('no authenticator');
      return a(nonce) as unknown as Record<string, unknown>;
    };
    expect(auth({ NATS_USER: 'bosun', NATS_PASSWORD_FILE: file('npw', 'n-pw\n') })).toEqual({ user: 'bosun', pass: 'n-pw' });
    expect(auth({ NATS_URL: 'nats://u1:p1@n:4222' })).toEqual({ user: 'u1', pass: 'p1' });
    expect(auth({ NATS_TOKEN_FILE: file('tok', 'tok-1\n') })).toEqual({ auth_token: 'tok-1' });

    const user = nkeys.createUser();
    const seed = new TextDecoder().decode(user.getSeed());
    const signed = auth({ NATS_NKEY_SEED_FILE: file('user.nk', `${seed}\n`) });
    expect(signed.nkey).toBe(user.getPublicKey());
    expect(
      nkeys
        .fromPublic(user.getPublicKey())
        .verify(new TextEncoder().encode('nonce-1'), new Uint8Array(Buffer.from(String(signed.sig), 'base64url'))),
    ).toBe(true);

    const jwt = 'eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJzdWIiOiJVIn0.c2ln';
    const creds = `-----BEGIN NATS USER JWT-----\n${jwt}\n------END NATS USER JWT------\n\n-----BEGIN USER NKEY SEED-----\n${seed}\n------END USER NKEY SEED------\n`;
    const fromCreds = auth({ NATS_CREDS_FILE: file('user.creds', creds) });
    expect(fromCreds).toMatchObject({ jwt, nkey: user.getPublicKey() });
  });

  it('the options object holds no secret: credentials are functions', () => {
    const o = natsConnectOptions(
      readNatsSettings({ NATS_USER: 'bosun', NATS_PASSWORD: 'n-pw-in-env', NATS_URL: 'tls://n:4222', NATS_TLS_CA_FILE: certs.ca }),
    );
    expect(JSON.stringify(o)).not.toContain('n-pw-in-env');
  });
});

describe('start-up refusals name the setting to check', () => {
  const redis = readRedisSettings({ REDIS_URL: 'rediss://r:6379' });

  it('Redis: a refused password names where it came from, and the error carries no command arguments', () => {
    const settings = readRedisSettings({
      REDIS_URL: 'rediss://r:6379',
      REDIS_USERNAME: 'bosun',
      REDIS_PASSWORD_FILE: file('rpw', 'the-pw'),
    });
    const err = libError('WRONGPASS invalid username-password pair or user is disabled.', {
      name: 'ReplyError',
      command: { name: 'auth', args: ['bosun', 'the-pw'] },
    });
    const f = redisSettingsFailure(err, settings);
    expect(f).toBeInstanceOf(ConnectionSettingsError);
    expect(f?.code).toBe('redis_auth_failed');
    expect(f?.message).toBe(
      'Redis: authentication failed (WRONGPASS invalid username-password pair or user is disabled.) — check REDIS_USERNAME and REDIS_PASSWORD_FILE',
    );
    expect(JSON.stringify({ ...f, cause: { ...(f?.cause as object) } })).not.toContain('the-pw');
    expect((f?.cause as Record<string, unknown>).command).toBeUndefined();
    const noPassword = redisSettingsFailure(libError('NOAUTH Authentication required.', { name: 'ReplyError' }), readRedisSettings({}));
    expect(noPassword?.message).toMatch(/the server requires a password: set REDIS_PASSWORD_FILE/);
  });

  it.each([
    [
      'SELF_SIGNED_CERT_IN_CHAIN',
      'redis_tls_failed',
      /^Redis TLS: certificate signed by an unknown CA \(SELF_SIGNED_CERT_IN_CHAIN\) — set REDIS_TLS_CA_FILE to the CA that signed the server's certificate$/,
    ],
    ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'redis_tls_failed', /unknown CA/],
    ['ERR_TLS_CERT_ALTNAME_INVALID', 'redis_tls_failed', /^Redis TLS: the server's certificate does not name the host in REDIS_URL/],
    ['CERT_HAS_EXPIRED', 'redis_tls_failed', /has expired/],
    [
      'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED',
      'redis_tls_failed',
      /^Redis TLS: the server requires a client certificate \(ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED\) — set REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE$/,
    ],
    [
      'ERR_SSL_TLSV1_ALERT_UNKNOWN_CA',
      'redis_tls_failed',
      /^Redis TLS: the server refused the client certificate .* check REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE/,
    ],
    ['ERR_SSL_WRONG_VERSION_NUMBER', 'redis_tls_failed', /does not speak TLS on this port/],
  ])('Redis TLS: %s', (code, want, message) => {
    const f = redisSettingsFailure(libError('openssl says no', { code }), redis);
    expect(f?.code).toBe(want);
    expect(f?.message).toMatch(message);
  });

  it('Redis: an unreachable server is not a settings failure (the service waits and retries)', () => {
    expect(redisSettingsFailure(libError('connect ECONNREFUSED', { code: 'ECONNREFUSED' }), redis)).toBeUndefined();
    expect(redisSettingsFailure(libError('ERR unknown command', { name: 'ReplyError' }), redis)).toBeUndefined();
  });

  it('NATS: a refused login names the credentials in use, or says what to set', () => {
    const user = readNatsSettings({ NATS_USER: 'bosun', NATS_PASSWORD: 'x-pw' });
    expect(natsSettingsFailure(new AuthorizationError('Authorization Violation'), user)?.message).toBe(
      'NATS: authorization violation — check NATS_USER / NATS_PASSWORD',
    );
    expect(natsSettingsFailure(new AuthorizationError('Authorization Violation'), readNatsSettings({}))?.message).toBe(
      'NATS: authorization violation — the server requires credentials: set NATS_USER and NATS_PASSWORD_FILE, NATS_TOKEN_FILE, NATS_NKEY_SEED_FILE or NATS_CREDS_FILE',
    );
    const tls = readNatsSettings({ NATS_URL: 'tls://n:4222', NATS_TLS_CA_FILE: certs.otherCa });
    expect(
      natsSettingsFailure(libError('unable to verify the first certificate', { code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' }), tls)?.message,
    ).toBe('NATS TLS: certificate signed by an unknown CA (UNABLE_TO_VERIFY_LEAF_SIGNATURE) — check NATS_TLS_CA_FILE');
    expect(natsSettingsFailure(libError('connect ECONNREFUSED', { code: 'ECONNREFUSED' }), tls)).toBeUndefined();
  });
});
