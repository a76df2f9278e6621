import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nkeys, type NatsConnection } from '@nats-io/transport-node';
import { readNatsSettings } from '@bosun/config';
import { ConnectionSettingsError, connectNats } from '@bosun/transport';
import { OwnServer, secretFile } from '../helpers/index.js';

// The NATS ways of authenticating the end-to-end test does not use (it runs a user and a
// password): a token, and an NKEY seed, against real nats-servers that require them.

const TOKEN = 'nats-token-2d94be';

let dir: string;
let tokenServer: OwnServer;
let nkeyServer: OwnServer;
const user = nkeys.createUser();
const seed = new TextDecoder().decode(user.getSeed());

/** A nats-server with the given `authorization { ... }` block. */
function withAuthorization(block: string): OwnServer {
  return new OwnServer('nats', dir, {
    args: (port, d) => {
      const conf = join(d, 'nats.conf');
      writeFileSync(conf, `listen: 127.0.0.1:${port}\nauthorization { ${block} }\n`);
      return ['-c', conf];
    },
  });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'bosun-nats-auth-'));
  tokenServer = await withAuthorization(`token: ${JSON.stringify(TOKEN)}`).start();
  nkeyServer = await withAuthorization(`users = [ { nkey: ${user.getPublicKey()} } ]`).start();
});

afterAll(async () => {
  await tokenServer?.stop();
  await nkeyServer?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Connects with the settings `env` gives, and checks the connection carries messages. */
async function roundTrip(env: Record<string, string>): Promise<void> {
  let nc: NatsConnection | undefined;
  try {
    nc = await connectNats(readNatsSettings(env), { name: 'bosun-test' });
    const sub = nc.subscribe('ping', { max: 1 });
    nc.publish('ping', 'pong');
    for await (const m of sub) expect(m.string()).toBe('pong');
  } finally {
    await nc?.close();
  }
}

describe('NATS credentials from the environment', () => {
  it('a token from NATS_TOKEN_FILE, and in the URL', async () => {
    await roundTrip({ NATS_URL: tokenServer.url, NATS_TOKEN_FILE: secretFile(dir, 'token', `${TOKEN}\n`) });
    await roundTrip({ NATS_URL: tokenServer.url.replace('nats://', `nats://${TOKEN}@`) });
  });

  it('an NKEY seed from NATS_NKEY_SEED_FILE', async () => {
    await roundTrip({ NATS_URL: nkeyServer.url, NATS_NKEY_SEED_FILE: secretFile(dir, 'user.nk', `${seed}\n`) });
  });

  it('a wrong token or another NKEY is refused, naming the setting, without the secret', async () => {
    const wrongToken = readNatsSettings({ NATS_URL: tokenServer.url, NATS_TOKEN_FILE: secretFile(dir, 'wrong-token', 'not-the-token-77') });
    const err = await connectNats(wrongToken).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectionSettingsError);
    expect((err as Error).message).toBe('NATS: authorization violation — check NATS_TOKEN_FILE');
    expect(JSON.stringify(err) + String((err as Error).stack)).not.toContain('not-the-token-77');

    const other = new TextDecoder().decode(nkeys.createUser().getSeed());
    const wrongKey = readNatsSettings({ NATS_URL: nkeyServer.url, NATS_NKEY_SEED_FILE: secretFile(dir, 'other.nk', other) });
    await expect(connectNats(wrongKey)).rejects.toThrow('NATS: authorization violation — check NATS_NKEY_SEED_FILE');

    await expect(connectNats(readNatsSettings({ NATS_URL: tokenServer.url }))).rejects.toThrow(
      'NATS: authorization violation — the server requires credentials: set NATS_USER and NATS_PASSWORD_FILE, NATS_TOKEN_FILE, NATS_NKEY_SEED_FILE or NATS_CREDS_FILE',
    );
  });
});
