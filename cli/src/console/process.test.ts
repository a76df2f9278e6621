import { describe, expect, it } from 'vitest';
import { ConfigError, ConsoleConfigSchema } from '@bosun/config';
import { loginPlan } from './process.js';

// How a console's people log in, from its config section and environment.

const oidc = {
  issuer: 'https://id.example.com',
  clientId: 'bosun-console',
  clientSecret: '${BOSUN_OIDC_CLIENT_SECRET}',
  allowedGroups: ['sre'],
};
const section = (raw: Record<string, unknown>) => ConsoleConfigSchema.parse(raw);
const local = { host: '127.0.0.1', port: 8092 };

describe('loginPlan', () => {
  it('without oidc: the token, required as always', () => {
    expect(loginPlan(section({}), local, { BOSUN_CONSOLE_TOKEN: 't-1' })).toEqual({ token: 't-1', tokenIgnored: false });
    expect(() => loginPlan(section({}), local, {})).toThrow(/BOSUN_CONSOLE_TOKEN is not set/);
  });

  it('with oidc: no token login unless allowTokenLogin (a token set anyway is reported as unused)', () => {
    const env = { BOSUN_OIDC_CLIENT_SECRET: 's3cret' };
    const plan = loginPlan(section({ oidc }), local, env);
    expect(plan).toMatchObject({ token: undefined, tokenIgnored: false });
    expect(plan.oidc).toMatchObject({ clientSecret: 's3cret', redirectUrl: 'http://127.0.0.1:8092/auth/callback' });
    expect(loginPlan(section({ oidc }), local, { ...env, BOSUN_CONSOLE_TOKEN: 't-1' })).toMatchObject({
      token: undefined,
      tokenIgnored: true,
    });
    expect(loginPlan(section({ oidc, allowTokenLogin: true }), local, { ...env, BOSUN_CONSOLE_TOKEN: 't-1' }).token).toBe('t-1');
    expect(() => loginPlan(section({ oidc, allowTokenLogin: true }), local, env)).toThrow(/BOSUN_CONSOLE_TOKEN is not set/);
  });

  it('needs redirectUrl off loopback, and the client secret set', () => {
    const env = { BOSUN_OIDC_CLIENT_SECRET: 's3cret' };
    expect(() => loginPlan(section({ oidc }), { host: '0.0.0.0', port: 8092 }, env)).toThrow(
      /^console\.oidc\.redirectUrl: required when the console listens on 0\.0\.0\.0:8092/,
    );
    const behind = { ...oidc, redirectUrl: 'https://console.example.com/auth/callback' };
    expect(loginPlan(section({ oidc: behind }), { host: '0.0.0.0', port: 8092 }, env).oidc!.redirectUrl).toBe(behind.redirectUrl);
    const err = (() => {
      try {
        loginPlan(section({ oidc }), local, {});
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toBe('console.oidc.clientSecret: environment variable BOSUN_OIDC_CLIENT_SECRET is not set');
  });
});
