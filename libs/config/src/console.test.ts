import { describe, expect, it } from 'vitest';
import { BosunError, describeIssues } from '@bosun/contract';
import { ConsoleConfigSchema, resolveOidcSecret, type OidcSettings } from './console.js';

// The console's section: OpenID Connect settings checked strictly, with messages that name the field.

const good = () => ({
  issuer: 'https://id.example.com/realms/ops',
  clientId: 'bosun-console',
  clientSecret: '${BOSUN_OIDC_CLIENT_SECRET}',
  allowedGroups: ['sre'],
  operatorGroups: ['oncall'],
});

/** The issues of parsing `{ oidc }`, as `path: message`. */
function problems(oidc: Record<string, unknown>, extra: Record<string, unknown> = {}): string[] {
  const parsed = ConsoleConfigSchema.safeParse({ oidc, ...extra });
  return parsed.success ? [] : describeIssues(parsed.error).issues;
}

describe('console config', () => {
  it('takes the documented fields with their defaults; token login off by default', () => {
    const c = ConsoleConfigSchema.parse({ oidc: good() });
    expect(c.allowTokenLogin).toBe(false);
    expect(c.oidc).toEqual({ ...good(), scopes: ['openid', 'email', 'profile'], groupsClaim: 'groups' });
    expect(ConsoleConfigSchema.parse({})).toEqual({ allowTokenLogin: false });
    expect(
      ConsoleConfigSchema.parse({ oidc: { ...good(), allowedGroups: undefined, allowedEmails: ['Ada@Example.com'] } }).oidc!.allowedEmails,
    ).toEqual(['ada@example.com']);
  });

  it('names each wrong field', () => {
    expect(problems({ ...good(), issuer: 'http://id.example.com' }).join()).toMatch(
      /oidc\.issuer.*https:\/\/ URL \(http:\/\/ only on loopback/,
    );
    expect(problems({ ...good(), issuer: 'id.example.com' }).join()).toMatch(/oidc\.issuer.*absolute URL/);
    expect(problems({ ...good(), issuer: 'https://id.example.com/#x' }).join()).toMatch(/oidc\.issuer.*fragment/);
    expect(problems({ ...good(), clientSecret: '' }).join()).toMatch(/oidc\.clientSecret/);
    expect(problems({ ...good(), scopes: ['email'] }).join()).toMatch(/oidc\.scopes.*must include "openid"/);
    expect(problems({ ...good(), scopes: ['openid email'] }).join()).toMatch(/oidc\.scopes\.0.*without spaces/);
    expect(problems({ ...good(), allowedGroups: undefined }).join()).toMatch(/oidc.*set allowedGroups or allowedEmails/);
    expect(problems({ ...good(), allowedGroups: [] }).join()).toMatch(/oidc\.allowedGroups/);
    expect(problems({ ...good(), allowedEmails: ['not-an-email'] }).join()).toMatch(/oidc\.allowedEmails\.0/);
    expect(problems({ ...good(), redirectUrl: 'https://console.example.com/callback' }).join()).toMatch(
      /oidc\.redirectUrl.*\/auth\/callback/,
    );
    expect(problems({ ...good(), clientSecrets: 'x' }).join()).toMatch(/clientSecrets/);
    expect(problems(good(), { allowTokenLogin: 'yes' }).join()).toMatch(/allowTokenLogin/);
  });

  it('accepts http:// only on loopback (a provider on the same machine)', () => {
    expect(problems({ ...good(), issuer: 'http://127.0.0.2:9000', redirectUrl: 'http://localhost:8092/auth/callback' })).toEqual([]);
    expect(problems({ ...good(), issuer: 'http://[::1]:9000' })).toEqual([]);
    expect(problems({ ...good(), issuer: 'http://127.example.com' }).join()).toMatch(/oidc\.issuer/);
  });

  it('resolves the client secret from the environment, and names the field (not the value) when it cannot', () => {
    const oidc = ConsoleConfigSchema.parse({ oidc: good() }).oidc as OidcSettings;
    expect(resolveOidcSecret(oidc, { BOSUN_OIDC_CLIENT_SECRET: 's3cret' }).clientSecret).toBe('s3cret');
    expect(oidc.clientSecret).toBe('${BOSUN_OIDC_CLIENT_SECRET}');
    expect(() => resolveOidcSecret(oidc, {})).toThrow(
      /^console\.oidc\.clientSecret: environment variable BOSUN_OIDC_CLIENT_SECRET is not set$/,
    );
    const empty = () => resolveOidcSecret(oidc, { BOSUN_OIDC_CLIENT_SECRET: ' ' });
    expect(empty).toThrow(BosunError);
    expect(empty).toThrow(/^console\.oidc\.clientSecret: empty after substitution$/);
  });
});
