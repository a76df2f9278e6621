import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { inspect } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCertificates, type TestCertificates } from '../../../test/helpers/tls.js';
import { ConfigError } from './cluster.js';
import { SecretValue, readNatsSettings, readRedisSettings } from './connections.js';
import { readEnv } from './env.js';
import { createLogger } from './logger.js';

let dir: string;
let certs: TestCertificates;
const file = (name: string, content: string) => {
  const p = join(dir, name);
  writeFileSync(p, content);
  return p;
};
/** A user NKEY seed's shape: SU and 56 base32 characters (not a real key; only the shape is checked here). */
const SEED = `SU${'A'.repeat(56)}`;
const CREDS =
  '-----BEGIN NATS USER JWT-----\neyJhbGciOi.x.y\n------END NATS USER JWT------\n\n-----BEGIN USER NKEY SEED-----\nSUAAAA\n------END USER NKEY SEED------\n';

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'bosun-conn-'));
  certs = makeCertificates(dir);
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('SecretValue', () => {
  it('prints as [redacted] as a string, in JSON and through util.inspect; reveal() gives the value', () => {
    const s = new SecretValue('hunter2-value');
    expect(String(s)).toBe('[redacted]');
    // eslint-disable-next-line @typescript-eslint/restrict-template-expressions -- a template literal is how a secret would leak into a message
    expect(`${s}`).toBe('[redacted]');
    expect(JSON.stringify({ s })).toBe('{"s":"[redacted]"}');
    expect(inspect({ s })).not.toContain('hunter2');
    expect(s.reveal()).toBe('hunter2-value');
  });
});

describe('readRedisSettings', () => {
  it('defaults to a plain local Redis without credentials', () => {
    expect(readRedisSettings({})).toMatchObject({
      urls: ['redis://127.0.0.1:6379'],
      cluster: false,
      tls: undefined,
      username: undefined,
      password: undefined,
      coalesceWrites: true,
    });
  });

  it('REDIS_COALESCE_WRITES: on unless 0, false, no or off; any other value is refused, named', () => {
    for (const on of ['1', 'true', 'YES', 'on', ' ']) expect(readRedisSettings({ REDIS_COALESCE_WRITES: on }).coalesceWrites).toBe(true);
    for (const off of ['0', 'false', 'No', 'OFF']) expect(readRedisSettings({ REDIS_COALESCE_WRITES: off }).coalesceWrites).toBe(false);
    expect(() => readRedisSettings({ REDIS_COALESCE_WRITES: 'sometimes' })).toThrow(
      'REDIS_COALESCE_WRITES: "sometimes" is not one of 1, true, yes, on (the default) or 0, false, no, off',
    );
  });

  it('rediss:// with a CA, a client certificate, an ACL user and a password file (its trailing newline dropped)', () => {
    const s = readRedisSettings({
      REDIS_URL: 'rediss://redis.example:6380/2',
      REDIS_USERNAME: 'bosun',
      REDIS_PASSWORD_FILE: file('redis-pw', 'p4ss-word\n'),
      REDIS_TLS_CA_FILE: certs.ca,
      REDIS_TLS_CERT_FILE: certs.clientCert,
      REDIS_TLS_KEY_FILE: certs.clientKey,
    });
    expect(s.urls).toEqual(['rediss://redis.example:6380/2']);
    expect(s.username).toBe('bosun');
    expect(s.password?.reveal()).toBe('p4ss-word');
    expect(s.authFrom).toBe('REDIS_USERNAME and REDIS_PASSWORD_FILE');
    expect(s.tls?.ca).toContain('BEGIN CERTIFICATE');
    expect(s.tls?.cert).toContain('BEGIN CERTIFICATE');
    expect(s.tls?.key?.reveal()).toContain('PRIVATE KEY');
    // Nothing secret survives printing the settings.
    expect(JSON.stringify(s)).not.toContain('p4ss-word');
    expect(JSON.stringify(s)).not.toContain('PRIVATE KEY');
  });

  it('takes the user and password out of the URL, so they are given once and never shown', () => {
    const s = readRedisSettings({ REDIS_URL: 'rediss://app:s%40cret@r1:6379,rediss://app:s%40cret@r2:6379' });
    expect(s.urls).toEqual(['rediss://r1:6379', 'rediss://r2:6379']);
    expect(s.display).toBe('rediss://r1:6379,rediss://r2:6379');
    expect(s).toMatchObject({ cluster: true, username: 'app', authFrom: 'the user in REDIS_URL and the password in REDIS_URL' });
    expect(s.password?.reveal()).toBe('s@cret');
    expect(s.tls).toMatchObject({ ca: undefined, cert: undefined });
  });

  it('a missing file is an error naming the variable and the path', () => {
    expect(() => readRedisSettings({ REDIS_URL: 'rediss://r:6379', REDIS_TLS_CA_FILE: '/nonexistent/ca.crt' })).toThrow(ConfigError);
    expect(() => readRedisSettings({ REDIS_URL: 'rediss://r:6379', REDIS_TLS_CA_FILE: '/nonexistent/ca.crt' })).toThrow(
      /^REDIS_TLS_CA_FILE: cannot read \/nonexistent\/ca\.crt \(no such file\)$/,
    );
    expect(() => readRedisSettings({ REDIS_PASSWORD_FILE: '/nonexistent/pw' })).toThrow(
      /^REDIS_PASSWORD_FILE: cannot read \/nonexistent\/pw \(no such file\)$/,
    );
    expect(() => readRedisSettings({ REDIS_PASSWORD_FILE: dir })).toThrow(/^REDIS_PASSWORD_FILE: cannot read \S+ \(it is a folder\)$/);
  });

  it('an empty file or a blank variable counts as unset (a Secret shipped with empty keys)', () => {
    const empty = file('empty', '\n');
    const s = readRedisSettings({
      REDIS_PASSWORD_FILE: empty,
      REDIS_USERNAME: '',
      REDIS_TLS_CA_FILE: empty,
      REDIS_TLS_CERT_FILE: '',
      REDIS_TLS_KEY_FILE: empty,
    });
    expect(s).toMatchObject({ username: undefined, password: undefined, tls: undefined });
  });

  it('refuses settings that contradict each other, naming the variables', () => {
    const pw = file('pw2', 'x');
    expect(() => readRedisSettings({ REDIS_PASSWORD: 'a', REDIS_PASSWORD_FILE: pw })).toThrow(
      /^REDIS_PASSWORD and REDIS_PASSWORD_FILE are both set: set one$/,
    );
    expect(() => readRedisSettings({ REDIS_URL: 'redis://:a@r:6379', REDIS_PASSWORD_FILE: pw })).toThrow(
      /^REDIS_PASSWORD_FILE is set and REDIS_URL has a password too: set one$/,
    );
    expect(() => readRedisSettings({ REDIS_URL: 'redis://u:a@r:6379', REDIS_USERNAME: 'v' })).toThrow(
      /^REDIS_USERNAME is set and REDIS_URL names a user too/,
    );
    expect(() => readRedisSettings({ REDIS_USERNAME: 'bosun' })).toThrow(/^REDIS_USERNAME names a user but there is no password/);
    expect(() => readRedisSettings({ REDIS_URL: 'redis://r1:6379,rediss://r2:6379' })).toThrow(
      /^REDIS_URL: the nodes mix redis:\/\/ and rediss:\/\//,
    );
    expect(() => readRedisSettings({ REDIS_URL: 'redis://:a@r1:6379,redis://:b@r2:6379' })).toThrow(
      /^REDIS_URL: the nodes carry different users or passwords/,
    );
    expect(() => readRedisSettings({ REDIS_URL: 'redis://:%zz@r:6379' })).toThrow(
      /^REDIS_URL: the user or password is not valid percent-encoding$/,
    );
  });

  it('TLS files need rediss://: a redis:// URL with them would connect in plain text', () => {
    expect(() => readRedisSettings({ REDIS_URL: 'redis://r:6379', REDIS_TLS_CA_FILE: certs.ca })).toThrow(
      /^REDIS_TLS_CA_FILE is set, but REDIS_URL is redis:\/\/ \(no TLS\): use rediss:\/\/$/,
    );
  });

  it('checks the TLS files: PEM, and a key that belongs to its certificate', () => {
    const url = { REDIS_URL: 'rediss://r:6379' };
    expect(() => readRedisSettings({ ...url, REDIS_TLS_CA_FILE: file('not-pem', 'hello') })).toThrow(
      /^REDIS_TLS_CA_FILE: \S+not-pem is not a PEM certificate$/,
    );
    expect(() => readRedisSettings({ ...url, REDIS_TLS_CERT_FILE: certs.clientCert })).toThrow(
      /^REDIS_TLS_CERT_FILE is set without REDIS_TLS_KEY_FILE: a client certificate needs both$/,
    );
    expect(() => readRedisSettings({ ...url, REDIS_TLS_KEY_FILE: certs.clientKey })).toThrow(
      /^REDIS_TLS_KEY_FILE is set without REDIS_TLS_CERT_FILE/,
    );
    expect(() => readRedisSettings({ ...url, REDIS_TLS_CERT_FILE: certs.clientCert, REDIS_TLS_KEY_FILE: certs.ca })).toThrow(
      /^REDIS_TLS_KEY_FILE: \S+ is not a PEM private key/,
    );
    expect(() => readRedisSettings({ ...url, REDIS_TLS_CERT_FILE: certs.clientCert, REDIS_TLS_KEY_FILE: certs.otherClientKey })).toThrow(
      /^REDIS_TLS_KEY_FILE: \S+ is not the key of the certificate in REDIS_TLS_CERT_FILE$/,
    );
  });
});

describe('readNatsSettings', () => {
  it('defaults to a local NATS, TLS only if the server asks, no credentials', () => {
    expect(readNatsSettings({})).toMatchObject({ servers: ['127.0.0.1:4222'], tls: undefined, auth: { kind: 'none' } });
  });

  it('tls:// requires TLS; a TLS file with nats:// does too', () => {
    expect(readNatsSettings({ NATS_URL: 'tls://n1:4222,tls://n2:4222' })).toMatchObject({
      servers: ['n1:4222', 'n2:4222'],
      tls: { ca: undefined },
    });
    const s = readNatsSettings({
      NATS_URL: 'nats://n1:4222',
      NATS_TLS_CA_FILE: certs.ca,
      NATS_TLS_CERT_FILE: certs.clientCert,
      NATS_TLS_KEY_FILE: certs.clientKey,
    });
    expect(s.tls?.ca).toContain('BEGIN CERTIFICATE');
    expect(s.tls?.key?.reveal()).toContain('PRIVATE KEY');
    expect(() => readNatsSettings({ NATS_URL: 'nats://n1:4222,tls://n2:4222' })).toThrow(
      /^NATS_URL: the servers mix nats:\/\/ and tls:\/\//,
    );
  });

  it('one way of authenticating: user and password file, token, NKEY seed file or creds file', () => {
    const pw = file('nats-pw', 'n-pass\n');
    expect(readNatsSettings({ NATS_USER: 'bosun', NATS_PASSWORD_FILE: pw }).auth).toMatchObject({
      kind: 'user',
      user: 'bosun',
      from: 'NATS_USER / NATS_PASSWORD_FILE',
    });
    expect(readNatsSettings({ NATS_TOKEN_FILE: file('tok', 'tok-1\n') }).auth).toMatchObject({ kind: 'token', from: 'NATS_TOKEN_FILE' });
    expect(readNatsSettings({ NATS_TOKEN: 'tok-2' }).auth).toMatchObject({ kind: 'token', from: 'NATS_TOKEN' });
    const nkey = readNatsSettings({ NATS_NKEY_SEED_FILE: file('seed', `${SEED}\n`) }).auth;
    expect(nkey).toMatchObject({ kind: 'nkey', from: 'NATS_NKEY_SEED_FILE' });
    expect(nkey.kind === 'nkey' && nkey.seed.reveal()).toBe(SEED);
    expect(readNatsSettings({ NATS_CREDS_FILE: file('user.creds', CREDS) }).auth).toMatchObject({ kind: 'creds', from: 'NATS_CREDS_FILE' });
  });

  it('accepts user:password and a token in the URL (the client library would drop them), and never shows them', () => {
    const s = readNatsSettings({ NATS_URL: 'nats://bosun:p%40ss@n1:4222,nats://bosun:p%40ss@n2:4222' });
    expect(s.servers).toEqual(['n1:4222', 'n2:4222']);
    expect(s.display).toBe('nats://n1:4222,nats://n2:4222');
    expect(s.auth).toMatchObject({ kind: 'user', user: 'bosun', from: 'the user and password in NATS_URL' });
    expect(s.auth.kind === 'user' && s.auth.password.reveal()).toBe('p@ss');
    expect(readNatsSettings({ NATS_URL: 'tls://s3cr3t-token@n1:4222' }).auth).toMatchObject({
      kind: 'token',
      from: 'the token in NATS_URL',
    });
    expect(readNatsSettings({ NATS_URL: 'n1:4222' }).servers).toEqual(['n1:4222']);
  });

  it('refuses two ways at once, half a pair, a missing file and files that are not what they say, naming the variables', () => {
    const pw = file('nats-pw2', 'x');
    expect(() => readNatsSettings({ NATS_TOKEN: 't', NATS_USER: 'u', NATS_PASSWORD_FILE: pw })).toThrow(
      /^NATS credentials are given more than once \(NATS_TOKEN; NATS_USER \/ NATS_PASSWORD_FILE\): set one way$/,
    );
    expect(() => readNatsSettings({ NATS_URL: 'nats://u:p@n1:4222', NATS_TOKEN: 't' })).toThrow(
      /more than once \(NATS_TOKEN; the user and password in NATS_URL\)/,
    );
    expect(() => readNatsSettings({ NATS_USER: 'u' })).toThrow(/^NATS_USER is set without a password/);
    expect(() => readNatsSettings({ NATS_PASSWORD_FILE: pw })).toThrow(/^NATS_PASSWORD_FILE is set without NATS_USER$/);
    expect(() => readNatsSettings({ NATS_CREDS_FILE: '/nonexistent/user.creds' })).toThrow(
      /^NATS_CREDS_FILE: cannot read \/nonexistent\/user\.creds \(no such file\)$/,
    );
    expect(() => readNatsSettings({ NATS_CREDS_FILE: pw })).toThrow(/^NATS_CREDS_FILE: \S+ is not a NATS credentials file/);
    expect(() => readNatsSettings({ NATS_NKEY_SEED_FILE: pw })).toThrow(/^NATS_NKEY_SEED_FILE: \S+ does not hold a user NKEY seed/);
    expect(() => readNatsSettings({ NATS_TLS_CA_FILE: '/nonexistent/ca.crt' })).toThrow(
      /^NATS_TLS_CA_FILE: cannot read \/nonexistent\/ca\.crt \(no such file\)$/,
    );
    expect(() => readNatsSettings({ NATS_URL: 'ws://n1:80' })).toThrow(
      /^NATS_URL: "ws:\/\/n1:80" must be nats:\/\/host:port, tls:\/\/host:port or host:port$/,
    );
  });
});

describe('readEnv', () => {
  it('reads the connection settings at start-up, and a missing file stops it naming the variable', () => {
    const env = readEnv({ REDIS_URL: 'rediss://r:6379', REDIS_TLS_CA_FILE: certs.ca, NATS_URL: 'tls://n:4222' });
    expect(env.redis.tls?.ca).toContain('BEGIN CERTIFICATE');
    expect(env.nats.tls).toBeDefined();
    expect(() => readEnv({ NATS_TLS_CERT_FILE: '/nonexistent/client.crt', NATS_TLS_KEY_FILE: certs.clientKey })).toThrow(
      /^NATS_TLS_CERT_FILE: cannot read /,
    );
  });
});

describe('logger', () => {
  it("redacts the arguments of a failed Redis command on a logged error (AUTH's are the password)", () => {
    const chunks: string[] = [];
    const stream = new Writable({
      write(c: Buffer, _e, cb) {
        chunks.push(c.toString());
        cb();
      },
    });
    const log = createLogger({ service: 't', destination: stream });
    const err = Object.assign(new Error('WRONGPASS invalid username-password pair'), {
      name: 'ReplyError',
      command: { name: 'auth', args: ['bosun', 'pw-in-args-9'] },
    });
    log.error({ err }, 'worker error');
    expect(chunks.join('')).toContain('WRONGPASS');
    expect(chunks.join('')).not.toContain('pw-in-args-9');
  });
});
