import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
// oidc-provider (OpenID Certified) ships no type declarations; the few calls here are typed below.
// @ts-expect-error -- no declaration file
import Provider from 'oidc-provider';

/** A test person: the claims the provider hands out for them (`sub` is their login name). */
export interface TestAccount {
  name: string;
  email: string;
  groups: string[];
}

/** Options of {@link startOidcProvider}. */
export interface OidcProviderOptions {
  /** Where it listens (a loopback address; 127.0.0.2 makes it another site than a console on 127.0.0.1). */
  host: string;
  client: { id: string; secret: string; redirectUrl: string };
  /** The people, by login name: the dev login form takes any password. */
  accounts: Record<string, TestAccount>;
}

/** A running provider. */
export interface OidcProvider {
  issuer: string;
  close(): Promise<void>;
}

interface ProviderInstance {
  callback(): (req: unknown, res: unknown) => void;
}

/**
 * A real OpenID provider (`oidc-provider`) on loopback: one confidential client (code flow,
 * client_secret_basic, PKCE required), the test people with their email and groups (claims by
 * `findAccount`), its development login and consent pages, and its own development signing key.
 */
export async function startOidcProvider(options: OidcProviderOptions): Promise<OidcProvider> {
  const server: Server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, options.host, () => resolve());
  });
  const issuer = `http://${options.host}:${(server.address() as AddressInfo).port}`;
  const ProviderClass = Provider as new (issuer: string, config: Record<string, unknown>) => ProviderInstance;
  const provider = new ProviderClass(issuer, {
    clients: [
      {
        client_id: options.client.id,
        client_secret: options.client.secret,
        redirect_uris: [options.client.redirectUrl],
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
      },
    ],
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'], groups: ['groups'] },
    scopes: ['openid', 'email', 'profile', 'groups'],
    pkce: { required: () => true },
    cookies: { keys: ['bosun-test-oidc-provider-cookie-key'] },
    features: { devInteractions: { enabled: true } },
    findAccount: (_ctx: unknown, id: string) => {
      const account = Object.hasOwn(options.accounts, id) ? options.accounts[id] : undefined;
      if (!account) return undefined;
      return { accountId: id, claims: () => ({ sub: id, ...account, email_verified: true }) };
    },
  });
  server.on('request', provider.callback());
  return {
    issuer,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((err) => (err ? reject(err) : resolve()));
      }),
  };
}
