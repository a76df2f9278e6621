/**
 * Console login through OpenID Connect: the authorization code flow with PKCE, on `openid-client`.
 *
 * `begin()` makes a login attempt — a state, a nonce and a PKCE verifier, kept here in the
 * process under a random attempt id that the browser holds in a short-lived cookie — and the
 * provider's authorization URL. `finish()` takes the attempt back (once: it is deleted on use),
 * exchanges the code for tokens and lets `openid-client` check the ID token: its signature
 * (the provider's JWKS; asked for explicitly, see `discover`), issuer, audience, expiry and nonce. Then the person's groups and email
 * decide whether they get in, and as what: an operator (may decide) or read-only.
 */
import { randomBytes } from 'node:crypto';
import * as client from 'openid-client';
import type { OidcSettings } from '@bosun/config';

/** What a console session knows of the person behind it. */
export interface Person {
  /** The provider's subject identifier (`sub`); `token` for a shared-token login. */
  sub: string;
  name: string;
  email?: string;
  groups: string[];
  /** `operator` may decide; `read-only` sees approvals but every POST but logout is refused (403). */
  role: 'operator' | 'read-only';
  /** How the session was opened. */
  via: 'oidc' | 'token';
}

/** Why a login through the provider did not open a session (branch on `reason`, never on the message). */
export type OidcRefusal =
  /** No (or an expired, or an already used) login attempt for this browser: start again. */
  | 'no_attempt'
  /** The provider answered the login with an error (the person cancelled, or it refused). */
  | 'provider_error'
  /** The code exchange or the ID token's checks failed (signature, issuer, audience, nonce, expiry). */
  | 'token_invalid'
  /** A valid login of a person this console does not let in (groups, email). */
  | 'not_allowed';

/** A refused login through the provider; `reason` says which step refused it. */
export class OidcLoginError extends Error {
  constructor(
    readonly reason: OidcRefusal,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'OidcLoginError';
  }
}

/** How long a login attempt (the way to the provider and back) may take. */
export const ATTEMPT_TTL_MS = 10 * 60 * 1000;
/** Attempts kept at once: the oldest go first, so that unauthenticated requests cannot grow memory without bound. */
export const MAX_ATTEMPTS = 10_000;

interface Attempt {
  state: string;
  nonce: string;
  verifier: string;
  expiresAt: number;
}

/** Options of {@link OidcLogin.discover}. */
export interface OidcLoginOptions {
  /** The settings, `clientSecret` resolved and `redirectUrl` set. */
  settings: OidcSettings & { redirectUrl: string };
  /** A fetch for every request to the provider (tests answer in memory); default the global fetch. */
  fetch?: client.CustomFetch;
  now?: () => number;
}

/** One provider's login: discovered once at start-up. */
export class OidcLogin {
  private readonly attempts = new Map<string, Attempt>();

  private constructor(
    private readonly config: client.Configuration,
    private readonly settings: OidcSettings & { redirectUrl: string },
    private readonly now: () => number,
  ) {}

  /**
   * Fetches the provider's discovery document and returns the login.
   * @throws Error naming the issuer when discovery fails (its cause says why).
   */
  static async discover(options: OidcLoginOptions): Promise<OidcLogin> {
    const { settings } = options;
    const issuer = new URL(settings.issuer);
    // The ID token's signature is checked against the provider's JWKS (enableNonRepudiationChecks):
    // openid-client would otherwise trust the TLS channel to the token endpoint alone. Plain http
    // only to a provider on loopback (the config allows nothing else).
    const execute = [client.enableNonRepudiationChecks, ...(issuer.protocol === 'http:' ? [client.allowInsecureRequests] : [])];
    let config: client.Configuration;
    try {
      config = await client.discovery(issuer, settings.clientId, undefined, client.ClientSecretBasic(settings.clientSecret), {
        execute,
        ...(options.fetch ? { [client.customFetch]: options.fetch } : {}),
      });
    } catch (err) {
      throw new Error(`console.oidc.issuer: discovery at ${issuer.href} failed: ${(err as Error).message}`, { cause: err });
    }
    return new OidcLogin(config, settings, options.now ?? Date.now);
  }

  /** A new login attempt: its id (for the browser's cookie) and where to send the browser. */
  async begin(): Promise<{ attempt: string; authorizationUrl: URL }> {
    this.sweep();
    const attempt = randomBytes(32).toString('base64url');
    const a: Attempt = {
      state: client.randomState(),
      nonce: client.randomNonce(),
      verifier: client.randomPKCECodeVerifier(),
      expiresAt: this.now() + ATTEMPT_TTL_MS,
    };
    this.attempts.set(attempt, a);
    const authorizationUrl = client.buildAuthorizationUrl(this.config, {
      redirect_uri: this.settings.redirectUrl,
      scope: this.settings.scopes.join(' '),
      state: a.state,
      nonce: a.nonce,
      code_challenge: await client.calculatePKCECodeChallenge(a.verifier),
      code_challenge_method: 'S256',
    });
    return { attempt, authorizationUrl };
  }

  /**
   * Ends the attempt `attempt` with the provider's answer (the callback's query) and returns the person.
   * @throws OidcLoginError saying which step refused the login.
   */
  async finish(attempt: string | undefined, query: URLSearchParams): Promise<Person> {
    const a = attempt === undefined ? undefined : this.attempts.get(attempt);
    if (attempt !== undefined) this.attempts.delete(attempt);
    if (!a || a.expiresAt <= this.now())
      throw new OidcLoginError('no_attempt', 'no login attempt in progress for this browser (expired or already used): log in again');
    if (query.has('error')) {
      const description = (query.get('error_description') ?? '').slice(0, 200);
      throw new OidcLoginError(
        'provider_error',
        `the provider refused the login: ${query.get('error')!.slice(0, 100)} ${description}`.trim(),
      );
    }
    // The URL the provider sent the browser to, built from the configured redirect URL, never from the request's Host.
    const current = new URL(this.settings.redirectUrl);
    for (const [k, v] of query) current.searchParams.append(k, v);
    let tokens: Awaited<ReturnType<typeof client.authorizationCodeGrant>>;
    try {
      tokens = await client.authorizationCodeGrant(this.config, current, {
        pkceCodeVerifier: a.verifier,
        expectedState: a.state,
        expectedNonce: a.nonce,
        idTokenExpected: true,
      });
    } catch (err) {
      throw new OidcLoginError('token_invalid', `the login could not be completed: ${(err as Error).message}`, { cause: err });
    }
    return this.admit(await this.profileOf(tokens.claims()!, tokens.access_token));
  }

  /**
   * The person's claims: the ID token's, completed from the userinfo answer (its `sub` checked)
   * when the ID token lacks the groups, the email or the name — as providers do that put only
   * `sub` in an ID token issued with an access token. The ID token's own claims win.
   */
  private async profileOf(claims: client.IDToken, accessToken: string): Promise<Record<string, unknown> & { sub: string }> {
    const wanted = [this.settings.groupsClaim, 'email', 'name'];
    if (wanted.every((c) => claims[c] !== undefined) || this.config.serverMetadata().userinfo_endpoint === undefined) return claims;
    try {
      const info = await client.fetchUserInfo(this.config, accessToken, claims.sub);
      return { ...info, ...claims };
    } catch (err) {
      throw new OidcLoginError('token_invalid', `the provider's userinfo answer could not be used: ${(err as Error).message}`, {
        cause: err,
      });
    }
  }

  /** The groups claim as a list of names (none when absent). */
  private groupsOf(claims: Record<string, unknown>): string[] {
    const value = claims[this.settings.groupsClaim];
    if (value === undefined) return [];
    if (!Array.isArray(value) || !value.every((g) => typeof g === 'string'))
      throw new OidcLoginError(
        'token_invalid',
        `the "${this.settings.groupsClaim}" claim is not a list of group names (console.oidc.groupsClaim)`,
      );
    return value;
  }

  /** Lets a verified person in (or not), with their role. */
  private admit(claims: Record<string, unknown> & { sub: string }): Person {
    const { allowedGroups, allowedEmails, operatorGroups } = this.settings;
    const groups = this.groupsOf(claims);
    const email = typeof claims.email === 'string' ? claims.email : undefined;
    // Only an email the provider vouches for counts: many providers let people type any address.
    const emailOk = email !== undefined && claims.email_verified === true && (allowedEmails ?? []).includes(email.toLowerCase());
    const groupOk = (allowedGroups ?? []).some((g) => groups.includes(g));
    if (!emailOk && !groupOk)
      throw new OidcLoginError('not_allowed', `${email ?? claims.sub} is not in console.oidc.allowedGroups or allowedEmails`);
    const name = [claims.name, claims.preferred_username, email].find((v): v is string => typeof v === 'string' && v.trim() !== '');
    return {
      sub: claims.sub,
      name: name ?? claims.sub,
      ...(email !== undefined ? { email } : {}),
      groups,
      role: operatorGroups.some((g) => groups.includes(g)) ? 'operator' : 'read-only',
      via: 'oidc',
    };
  }

  private sweep(): void {
    const now = this.now();
    for (const [id, a] of this.attempts) if (a.expiresAt <= now) this.attempts.delete(id);
    // Map keeps insertion order: the first keys are the oldest attempts.
    for (const id of this.attempts.keys()) {
      if (this.attempts.size < MAX_ATTEMPTS) break;
      this.attempts.delete(id);
    }
  }
}
