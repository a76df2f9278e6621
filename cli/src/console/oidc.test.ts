import { createHash } from 'node:crypto';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose';
import type { CustomFetch } from 'openid-client';
import { beforeAll, describe, expect, it } from 'vitest';
import type { OidcSettings } from '@bosun/config';
import { ATTEMPT_TTL_MS, OidcLogin, OidcLoginError, type OidcRefusal } from './oidc.js';

// The ID token checks of the console's OpenID Connect login, against a provider answered in
// memory (openid-client's customFetch): discovery, JWKS, a token endpoint that checks the PKCE
// verifier and answers with an ID token we sign ourselves with jose — good, forged, for another
// audience, expired, with another nonce or issuer. No network.

const ISSUER = 'https://id.example.test';
const CLIENT = 'bosun-console';
const REDIRECT = 'https://console.example.test/auth/callback';

let key: CryptoKey;
let otherKey: CryptoKey;
let jwk: JWK;

beforeAll(async () => {
  ({ privateKey: key, publicKey: jwk } = await generateKeyPair('RS256').then(async (p) => ({
    ...p,
    publicKey: await exportJWK(p.publicKey),
  })));
  ({ privateKey: otherKey } = await generateKeyPair('RS256'));
});

const settings = (over: Partial<OidcSettings> = {}): OidcSettings & { redirectUrl: string } => ({
  issuer: ISSUER,
  clientId: CLIENT,
  clientSecret: 'client-secret-1',
  scopes: ['openid', 'email', 'profile'],
  groupsClaim: 'groups',
  allowedGroups: ['sre'],
  operatorGroups: ['oncall'],
  ...over,
  redirectUrl: REDIRECT,
});

/** What the fake provider's token endpoint signs: claims over the good ones, and with which key. */
interface TokenPlan {
  claims?: Record<string, unknown>;
  signWith?: 'provider' | 'other';
  /** The userinfo answer (the endpoint exists only when set). */
  userinfo?: Record<string, unknown>;
}

/** A provider in memory: it remembers the authorization request's nonce and PKCE challenge. */
function provider(plan: () => TokenPlan) {
  const seen = { challenge: '', nonce: '', verifier: '', clientAuth: '' };
  const json = (body: unknown) => new Response(JSON.stringify(body), { status: 200, headers: { 'content-type': 'application/json' } });
  const fetch: CustomFetch = async (url, init) => {
    const u = new URL(url);
    if (u.pathname === '/.well-known/openid-configuration') {
      return json({
        issuer: ISSUER,
        authorization_endpoint: `${ISSUER}/auth`,
        token_endpoint: `${ISSUER}/token`,
        jwks_uri: `${ISSUER}/jwks`,
        ...(plan().userinfo ? { userinfo_endpoint: `${ISSUER}/me` } : {}),
        id_token_signing_alg_values_supported: ['RS256'],
        code_challenge_methods_supported: ['S256'],
      });
    }
    if (u.pathname === '/jwks') return json({ keys: [{ ...jwk, kid: 'k1', alg: 'RS256', use: 'sig' }] });
    if (u.pathname === '/me') return json({ sub: 'u-1', ...plan().userinfo });
    if (u.pathname === '/token') {
      const body = init.body;
      if (typeof body !== 'string' && !(body instanceof URLSearchParams)) throw new Error(`unexpected token request body: ${typeof body}`);
      const form = new URLSearchParams(body);
      seen.verifier = form.get('code_verifier') ?? '';
      seen.clientAuth = new Headers(init.headers).get('authorization') ?? '';
      if (createHash('sha256').update(seen.verifier).digest('base64url') !== seen.challenge)
        return new Response(JSON.stringify({ error: 'invalid_grant' }), { status: 400, headers: { 'content-type': 'application/json' } });
      const p = plan();
      const now = Math.floor(Date.now() / 1000);
      const claims = {
        iss: ISSUER,
        aud: CLIENT,
        sub: 'u-1',
        nonce: seen.nonce,
        iat: now,
        exp: now + 300,
        email: 'ada@example.test',
        ...p.claims,
      };
      const idToken = await new SignJWT(claims)
        .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
        .sign(p.signWith === 'other' ? otherKey : key);
      return json({ access_token: 'at-1', token_type: 'Bearer', expires_in: 300, id_token: idToken });
    }
    return new Response('not found', { status: 404 });
  };
  return { fetch, seen };
}

/** Logs in once: begin, the provider's answer as the browser brings it back, finish. */
async function loginWith(plan: TokenPlan, over: Partial<OidcSettings> = {}) {
  const p = provider(() => plan);
  const login = await OidcLogin.discover({ settings: settings(over), fetch: p.fetch });
  const { attempt, authorizationUrl } = await login.begin();
  p.seen.challenge = authorizationUrl.searchParams.get('code_challenge') ?? '';
  p.seen.nonce = authorizationUrl.searchParams.get('nonce') ?? '';
  const state = authorizationUrl.searchParams.get('state') ?? '';
  return {
    login,
    attempt,
    authorizationUrl,
    state,
    seen: p.seen,
    finish: () => login.finish(attempt, new URLSearchParams({ code: 'c-1', state })),
  };
}

async function refusal(p: Promise<unknown>): Promise<OidcRefusal> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OidcLoginError);
  return (err as OidcLoginError).reason;
}

describe('OidcLogin', () => {
  it('sends the browser to the provider with PKCE (S256), a state and a nonce, and our redirect URL and scopes', async () => {
    const { authorizationUrl, state } = await loginWith({});
    const q = authorizationUrl.searchParams;
    expect(`${authorizationUrl.origin}${authorizationUrl.pathname}`).toBe(`${ISSUER}/auth`);
    expect(Object.fromEntries(q)).toMatchObject({
      client_id: CLIENT,
      response_type: 'code',
      redirect_uri: REDIRECT,
      scope: 'openid email profile',
      code_challenge_method: 'S256',
    });
    expect(state).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(q.get('nonce')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(q.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('lets in a person of an allowed group, with the PKCE verifier and the client secret sent; an operator group makes an operator', async () => {
    const r = await loginWith({ claims: { name: 'Ada Lovelace', groups: ['sre', 'oncall'] } });
    expect(await r.finish()).toEqual({
      sub: 'u-1',
      name: 'Ada Lovelace',
      email: 'ada@example.test',
      groups: ['sre', 'oncall'],
      role: 'operator',
      via: 'oidc',
    });
    expect(createHash('sha256').update(r.seen.verifier).digest('base64url')).toBe(r.seen.challenge);
    // client_secret_basic: id and secret form-encoded, then base64 (RFC 6749 2.3.1).
    const [id, secret] = Buffer.from(r.seen.clientAuth.replace(/^Basic /, ''), 'base64')
      .toString()
      .split(':')
      .map(decodeURIComponent);
    expect([id, secret]).toEqual([CLIENT, 'client-secret-1']);
  });

  it('makes a person outside operatorGroups read-only, and refuses one outside allowedGroups', async () => {
    expect((await (await loginWith({ claims: { groups: ['sre'] } })).finish()).role).toBe('read-only');
    expect(await refusal((await loginWith({ claims: { groups: ['marketing'] } })).finish())).toBe('not_allowed');
    expect(await refusal((await loginWith({ claims: {} })).finish())).toBe('not_allowed');
  });

  it('lets in an allowed email only when the provider marks it verified (compared without case)', async () => {
    const over = { allowedGroups: undefined, allowedEmails: ['ada@example.test'] };
    const ok = await (await loginWith({ claims: { email: 'Ada@Example.test', email_verified: true } }, over)).finish();
    expect(ok).toMatchObject({ email: 'Ada@Example.test', role: 'read-only', name: 'Ada@Example.test' });
    expect(await refusal((await loginWith({ claims: { email_verified: false } }, over)).finish())).toBe('not_allowed');
    expect(await refusal((await loginWith({ claims: {} }, over)).finish())).toBe('not_allowed');
  });

  it('takes the groups from userinfo when the ID token has none', async () => {
    const r = await loginWith({ claims: {}, userinfo: { groups: ['sre', 'oncall'] } });
    expect(await r.finish()).toMatchObject({ groups: ['sre', 'oncall'], role: 'operator' });
    expect(await refusal((await loginWith({ claims: { groups: 'sre' } })).finish())).toBe('token_invalid');
  });

  it.each<[string, TokenPlan]>([
    ['signed with another key (forged)', { signWith: 'other', claims: { groups: ['sre'] } }],
    ['for another audience', { claims: { aud: 'someone-else', groups: ['sre'] } }],
    ['expired', { claims: { exp: Math.floor(Date.now() / 1000) - 600, iat: Math.floor(Date.now() / 1000) - 900, groups: ['sre'] } }],
    ['with another nonce', { claims: { nonce: 'not-the-one-we-sent', groups: ['sre'] } }],
    ['without a nonce', { claims: { nonce: undefined, groups: ['sre'] } }],
    ['from another issuer', { claims: { iss: 'https://evil.example.test', groups: ['sre'] } }],
  ])('refuses an ID token %s', async (_, plan) => {
    expect(await refusal((await loginWith(plan)).finish())).toBe('token_invalid');
  });

  it('refuses a callback with another state, and uses an attempt once', async () => {
    const r = await loginWith({ claims: { groups: ['sre'] } });
    expect(await refusal(r.login.finish(r.attempt, new URLSearchParams({ code: 'c-1', state: 'forged-state' })))).toBe('token_invalid');
    // The attempt was used up by the refused callback: the right state cannot follow it.
    expect(await refusal(r.login.finish(r.attempt, new URLSearchParams({ code: 'c-1', state: r.state })))).toBe('no_attempt');
    expect(await refusal(r.login.finish(undefined, new URLSearchParams({ code: 'c-1', state: r.state })))).toBe('no_attempt');
    expect(await refusal(r.login.finish('unknown', new URLSearchParams({ code: 'c-1', state: r.state })))).toBe('no_attempt');
  });

  it('refuses an attempt older than its lifetime, and says when the provider answered with an error', async () => {
    let now = Date.now();
    const p = provider(() => ({ claims: { groups: ['sre'] } }));
    const login = await OidcLogin.discover({ settings: settings(), fetch: p.fetch, now: () => now });
    const a = await login.begin();
    now += ATTEMPT_TTL_MS;
    const state = a.authorizationUrl.searchParams.get('state')!;
    expect(await refusal(login.finish(a.attempt, new URLSearchParams({ code: 'c-1', state })))).toBe('no_attempt');
    const b = await login.begin();
    const denied = new URLSearchParams({ error: 'access_denied', error_description: 'the person cancelled', state });
    expect(await refusal(login.finish(b.attempt, denied))).toBe('provider_error');
  });

  it('names the issuer when discovery fails', async () => {
    const fetch: CustomFetch = async () => new Response('no', { status: 500 });
    await expect(OidcLogin.discover({ settings: settings(), fetch })).rejects.toThrow(
      /^console\.oidc\.issuer: discovery at https:\/\/id\.example\.test\/ failed/,
    );
  });
});
