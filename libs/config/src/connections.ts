import { errorMessage } from '@bosun/contract';
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { inspect } from 'node:util';
import { ConfigError } from './cluster.js';

/**
 * A secret read from the environment or from a file (a password, a token, an NKEY seed, a private
 * key). It prints as `[redacted]` wherever it ends up (string, JSON, `util.inspect`, pino); only
 * {@link SecretValue.reveal} gives the value, for the client library that sends it.
 */
export class SecretValue {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  /** The value itself: hand it to a client library, never to a message or a log. */
  reveal(): string {
    return this.#value;
  }

  toString(): string {
    return '[redacted]';
  }

  toJSON(): string {
    return '[redacted]';
  }

  [inspect.custom](): string {
    return '[redacted]';
  }
}

/** TLS material read at start-up from `<X>_TLS_CA_FILE`, `<X>_TLS_CERT_FILE`, `<X>_TLS_KEY_FILE`. */
export interface TlsMaterial {
  /** PEM CA certificate(s) trusted instead of Node's built-in CAs; unset: the built-in ones. */
  readonly ca: string | undefined;
  /** PEM client certificate, for servers that verify clients; always set together with `key`. */
  readonly cert: string | undefined;
  /** PEM private key of `cert`. */
  readonly key: SecretValue | undefined;
  /** The variables that were set, to name in error messages. */
  readonly vars: { readonly ca: string; readonly cert: string; readonly key: string };
}

/** How Bosun connects to Redis: everything `REDIS_*` says, files read and checked. */
export interface RedisSettings {
  /** The node URLs of `REDIS_URL`, credentials removed. */
  readonly urls: readonly string[];
  /** `REDIS_URL` without credentials, for messages. */
  readonly display: string;
  /** Connect as a Redis Cluster client. */
  readonly cluster: boolean;
  /** Set when the URLs are `rediss://`: TLS, with these CAs and client certificate (each optional). */
  readonly tls: TlsMaterial | undefined;
  /** ACL user (`REDIS_USERNAME` or the URL's); unset: the `default` user. */
  readonly username: string | undefined;
  /** Password (`REDIS_PASSWORD`, `REDIS_PASSWORD_FILE` or the URL's). */
  readonly password: SecretValue | undefined;
  /** Where the user and password came from, to name when the server refuses them. */
  readonly authFrom: string | undefined;
  /** Send the commands of one pass of the event loop in one socket write (`REDIS_COALESCE_WRITES`, default on). */
  readonly coalesceWrites: boolean;
}

/** How Bosun authenticates to NATS; exactly one way, or none. */
export type NatsAuth =
  | { readonly kind: 'none' }
  | { readonly kind: 'user'; readonly user: string; readonly password: SecretValue; readonly from: string }
  | { readonly kind: 'token'; readonly token: SecretValue; readonly from: string }
  | { readonly kind: 'nkey'; readonly seed: SecretValue; readonly from: string }
  | { readonly kind: 'creds'; readonly creds: SecretValue; readonly from: string };

/** How Bosun connects to NATS: everything `NATS_*` says, files read and checked. */
export interface NatsSettings {
  /** `host:port` of each server of `NATS_URL`, credentials and scheme removed. */
  readonly servers: readonly string[];
  /** `NATS_URL` without credentials, for messages. */
  readonly display: string;
  /**
   * TLS required (`tls://` URLs, or any `NATS_TLS_*` file set), with this material. Unset: TLS
   * only when the server asks for it, checked against Node's built-in CAs.
   */
  readonly tls: TlsMaterial | undefined;
  readonly auth: NatsAuth;
}

type Env = NodeJS.ProcessEnv;

/** A variable's value, or undefined when unset or blank (a blank value counts as unset). */
function value(raw: string | undefined): string | undefined {
  return raw === undefined || raw.trim() === '' ? undefined : raw;
}

/** The content of the file a `*_FILE` variable names; an empty file counts as unset. */
function readFileVar(name: string, path: string | undefined): string | undefined {
  const p = value(path);
  if (p === undefined) return undefined;
  let text: string;
  try {
    text = readFileSync(p, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT'
        ? 'no such file'
        : code === 'EACCES'
          ? 'permission denied'
          : code === 'EISDIR'
            ? 'it is a folder'
            : (code ?? errorMessage(err));
    throw new ConfigError(`${name}: cannot read ${p} (${why})`);
  }
  return text.trim() === '' ? undefined : text;
}

/**
 * A secret given either inline (`NAME`) or as a file (`NAME_FILE`, preferred: Kubernetes mounts
 * Secrets as files). Surrounding whitespace, such as a trailing newline, is dropped.
 */
function secretVar(name: string, inline: string | undefined, file: string | undefined): { secret: SecretValue; from: string } | undefined {
  const a = value(inline);
  const b = readFileVar(`${name}_FILE`, file);
  if (a !== undefined && b !== undefined) throw new ConfigError(`${name} and ${name}_FILE are both set: set one`);
  if (a !== undefined) return { secret: new SecretValue(a.trim()), from: name };
  if (b !== undefined) return { secret: new SecretValue(b.trim()), from: `${name}_FILE` };
  return undefined;
}

/** Reads and checks `<X>_TLS_CA_FILE`, `<X>_TLS_CERT_FILE` and `<X>_TLS_KEY_FILE`. */
function tlsFiles(
  prefix: 'REDIS' | 'NATS',
  caPath: string | undefined,
  certPath: string | undefined,
  keyPath: string | undefined,
): TlsMaterial | undefined {
  const vars = { ca: `${prefix}_TLS_CA_FILE`, cert: `${prefix}_TLS_CERT_FILE`, key: `${prefix}_TLS_KEY_FILE` };
  const ca = readFileVar(vars.ca, caPath);
  const cert = readFileVar(vars.cert, certPath);
  const key = readFileVar(vars.key, keyPath);
  if (ca === undefined && cert === undefined && key === undefined) return undefined;
  if ((cert === undefined) !== (key === undefined)) {
    throw new ConfigError(
      `${cert === undefined ? vars.key : vars.cert} is set without ${cert === undefined ? vars.cert : vars.key}: a client certificate needs both`,
    );
  }
  if (ca !== undefined) certificate(vars.ca, caPath, ca);
  if (cert !== undefined && key !== undefined) {
    const x509 = certificate(vars.cert, certPath, cert);
    let privateKey;
    try {
      privateKey = createPrivateKey(key);
    } catch {
      throw new ConfigError(`${vars.key}: ${keyPath} is not a PEM private key (an encrypted key is not supported)`);
    }
    if (!x509.checkPrivateKey(privateKey))
      throw new ConfigError(`${vars.key}: ${keyPath} is not the key of the certificate in ${vars.cert}`);
  }
  return Object.freeze({ ca, cert, key: key === undefined ? undefined : new SecretValue(key), vars });
}

function noTlsFiles(prefix: 'REDIS' | 'NATS'): TlsMaterial {
  return Object.freeze({
    ca: undefined,
    cert: undefined,
    key: undefined,
    vars: { ca: `${prefix}_TLS_CA_FILE`, cert: `${prefix}_TLS_CERT_FILE`, key: `${prefix}_TLS_KEY_FILE` },
  });
}

function certificate(name: string, path: string | undefined, pem: string): X509Certificate {
  try {
    return new X509Certificate(pem);
  } catch {
    throw new ConfigError(`${name}: ${path} is not a PEM certificate`);
  }
}

function parseUrl(name: string, raw: string): URL {
  try {
    return new URL(raw);
  } catch {
    throw new ConfigError(`${name}: "${maskCredentials(raw)}" is not a URL`);
  }
}

/** A URL's user or password, percent-decoded; undefined when empty. */
function decoded(name: string, part: string): string | undefined {
  if (!part) return undefined;
  try {
    return decodeURIComponent(part);
  } catch {
    throw new ConfigError(`${name}: the user or password is not valid percent-encoding`);
  }
}

/** `raw` with anything between `//` and `@` masked, for messages about a URL that may not parse. */
function maskCredentials(raw: string): string {
  return raw.replace(/\/\/[^/@]*@/, '//***@');
}

/** Reads `REDIS_URL`, `REDIS_CLUSTER`, `REDIS_USERNAME`, `REDIS_PASSWORD(_FILE)`, `REDIS_TLS_*` and `REDIS_COALESCE_WRITES`. */
export function readRedisSettings(env: Env): RedisSettings {
  const raw = env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  const parts = raw
    .split(',')
    .map((u) => u.trim())
    .filter(Boolean);
  if (parts.length === 0 || !parts.every((u) => /^rediss?:\/\//.test(u)))
    throw new ConfigError(`REDIS_URL: every URL must start with redis:// or rediss://`);
  const parsed = parts.map((u) => parseUrl('REDIS_URL', u));
  const schemes = new Set(parsed.map((u) => u.protocol));
  if (schemes.size > 1) throw new ConfigError('REDIS_URL: the nodes mix redis:// and rediss://; use one scheme for all');
  const secure = parsed[0]!.protocol === 'rediss:';
  const creds = new Set(parsed.map((u) => `${u.username}:${u.password}`));
  if (creds.size > 1)
    throw new ConfigError('REDIS_URL: the nodes carry different users or passwords; give them once (REDIS_USERNAME, REDIS_PASSWORD_FILE)');
  const urlUser = decoded('REDIS_URL', parsed[0]!.username);
  const urlPassword = decoded('REDIS_URL', parsed[0]!.password);

  const envUser = value(env.REDIS_USERNAME)?.trim();
  if (envUser !== undefined && urlUser !== undefined)
    throw new ConfigError('REDIS_USERNAME is set and REDIS_URL names a user too: set one');
  const envPassword = secretVar('REDIS_PASSWORD', env.REDIS_PASSWORD, env.REDIS_PASSWORD_FILE);
  if (envPassword && urlPassword !== undefined)
    throw new ConfigError(`${envPassword.from} is set and REDIS_URL has a password too: set one`);
  const username = envUser ?? urlUser;
  const password = envPassword?.secret ?? (urlPassword === undefined ? undefined : new SecretValue(urlPassword));
  if (username !== undefined && password === undefined)
    throw new ConfigError(
      `${envUser !== undefined ? 'REDIS_USERNAME' : 'REDIS_URL'} names a user but there is no password (REDIS_PASSWORD_FILE, REDIS_PASSWORD or the URL's)`,
    );
  const userFrom = envUser !== undefined ? 'REDIS_USERNAME' : urlUser !== undefined ? 'the user in REDIS_URL' : undefined;
  const authFrom =
    password === undefined ? undefined : [userFrom, envPassword?.from ?? 'the password in REDIS_URL'].filter(Boolean).join(' and ');

  const tls = tlsFiles('REDIS', env.REDIS_TLS_CA_FILE, env.REDIS_TLS_CERT_FILE, env.REDIS_TLS_KEY_FILE);
  if (tls && !secure) {
    const set = [tls.ca && tls.vars.ca, tls.cert && tls.vars.cert].filter(Boolean).join(', ');
    throw new ConfigError(`${set} ${set.includes(',') ? 'are' : 'is'} set, but REDIS_URL is redis:// (no TLS): use rediss://`);
  }
  const urls = parsed.map((u) => {
    u.username = '';
    u.password = '';
    return u.toString();
  });
  const cluster = parts.length > 1 || /^(1|true|yes)$/i.test(env.REDIS_CLUSTER ?? '');
  const coalesce = value(env.REDIS_COALESCE_WRITES)?.trim() ?? '';
  if (coalesce !== '' && !/^(1|true|yes|on|0|false|no|off)$/i.test(coalesce))
    throw new ConfigError(`REDIS_COALESCE_WRITES: "${coalesce}" is not one of 1, true, yes, on (the default) or 0, false, no, off`);
  return Object.freeze({
    coalesceWrites: !/^(0|false|no|off)$/i.test(coalesce),
    urls: Object.freeze(urls),
    display: urls.join(','),
    cluster,
    tls: secure ? (tls ?? noTlsFiles('REDIS')) : undefined,
    username,
    password,
    authFrom,
  });
}

const NKEY_USER_SEED = /^SU[A-Z2-7]{56}$/;
const CREDS_BLOCKS = [/-----BEGIN NATS USER JWT-----/, /-----BEGIN USER NKEY SEED-----/];

/**
 * Reads `NATS_URL`, the NATS credentials (`NATS_CREDS_FILE`, `NATS_NKEY_SEED_FILE`,
 * `NATS_TOKEN(_FILE)`, `NATS_USER` with `NATS_PASSWORD(_FILE)`, or the URL's user and password)
 * and `NATS_TLS_*`.
 */
export function readNatsSettings(env: Env): NatsSettings {
  const raw = env.NATS_URL ?? 'nats://127.0.0.1:4222';
  const parts = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (parts.length === 0) throw new ConfigError('NATS_URL: no server');
  const parsed = parts.map((s) => {
    const withScheme = /^[a-z]+:\/\//i.test(s) ? s : `nats://${s}`;
    const u = parseUrl('NATS_URL', withScheme);
    if (u.protocol !== 'nats:' && u.protocol !== 'tls:')
      throw new ConfigError(`NATS_URL: "${maskCredentials(s)}" must be nats://host:port, tls://host:port or host:port`);
    return u;
  });
  const creds = new Set(parsed.map((u) => `${u.username}:${u.password}`));
  if (creds.size > 1)
    throw new ConfigError(
      'NATS_URL: the servers carry different credentials; give them once (NATS_USER and NATS_PASSWORD_FILE, or NATS_TOKEN_FILE)',
    );
  const first = parsed[0]!;
  const urlUser = decoded('NATS_URL', first.username);
  const urlPassword = decoded('NATS_URL', first.password);

  const ways: NatsAuth[] = [];
  const credsFile = readFileVar('NATS_CREDS_FILE', env.NATS_CREDS_FILE);
  if (credsFile !== undefined) {
    if (!CREDS_BLOCKS.every((re) => re.test(credsFile)))
      throw new ConfigError(`NATS_CREDS_FILE: ${env.NATS_CREDS_FILE} is not a NATS credentials file (a user JWT and an NKEY seed block)`);
    ways.push({ kind: 'creds', creds: new SecretValue(credsFile), from: 'NATS_CREDS_FILE' });
  }
  const seed = readFileVar('NATS_NKEY_SEED_FILE', env.NATS_NKEY_SEED_FILE)?.trim();
  if (seed !== undefined) {
    if (!NKEY_USER_SEED.test(seed))
      throw new ConfigError(
        `NATS_NKEY_SEED_FILE: ${env.NATS_NKEY_SEED_FILE} does not hold a user NKEY seed (SU followed by 56 characters)`,
      );
    ways.push({ kind: 'nkey', seed: new SecretValue(seed), from: 'NATS_NKEY_SEED_FILE' });
  }
  const token = secretVar('NATS_TOKEN', env.NATS_TOKEN, env.NATS_TOKEN_FILE);
  if (token) ways.push({ kind: 'token', token: token.secret, from: token.from });
  const user = value(env.NATS_USER)?.trim();
  const password = secretVar('NATS_PASSWORD', env.NATS_PASSWORD, env.NATS_PASSWORD_FILE);
  if (user !== undefined && !password) throw new ConfigError('NATS_USER is set without a password (NATS_PASSWORD_FILE or NATS_PASSWORD)');
  if (password && user === undefined) throw new ConfigError(`${password.from} is set without NATS_USER`);
  if (user !== undefined && password) ways.push({ kind: 'user', user, password: password.secret, from: `NATS_USER / ${password.from}` });
  if (urlUser !== undefined && urlPassword !== undefined)
    ways.push({ kind: 'user', user: urlUser, password: new SecretValue(urlPassword), from: 'the user and password in NATS_URL' });
  else if (urlUser !== undefined) ways.push({ kind: 'token', token: new SecretValue(urlUser), from: 'the token in NATS_URL' });
  if (ways.length > 1)
    throw new ConfigError(
      `NATS credentials are given more than once (${ways.map((w) => (w.kind === 'none' ? '' : w.from)).join('; ')}): set one way`,
    );

  const files = tlsFiles('NATS', env.NATS_TLS_CA_FILE, env.NATS_TLS_CERT_FILE, env.NATS_TLS_KEY_FILE);
  const schemes = new Set(parsed.map((u) => u.protocol));
  if (schemes.size > 1) throw new ConfigError('NATS_URL: the servers mix nats:// and tls://; use one scheme for all');
  const required = first.protocol === 'tls:' || files !== undefined;
  // Credentials are never shown: they are in the settings, not in the URL.
  const display = parsed.map((u) => `${u.protocol}//${u.host}`).join(',');
  return Object.freeze({
    servers: Object.freeze(parsed.map((u) => u.host)),
    display,
    tls: required ? (files ?? noTlsFiles('NATS')) : undefined,
    auth: ways[0] ?? { kind: 'none' as const },
  });
}
