import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LOGIN_REFUSALS, loginPages } from './login-page.js';

// The login page in each console's form: the sign-on button, the token form, or both; fixed messages.

const template = readFileSync(join(import.meta.dirname, '../../web/login.html'), 'utf8');

describe('loginPages', () => {
  it('offers only the ways in this console has', () => {
    const token = loginPages(template, { token: true, oidc: false }).get('')!;
    expect(token).toContain('id="token"');
    expect(token).not.toContain('/auth/login');
    const oidc = loginPages(template, { token: false, oidc: true }).get('')!;
    expect(oidc).toContain('href="/auth/login"');
    expect(oidc).not.toContain('<form');
    const both = loginPages(template, { token: true, oidc: true }).get('')!;
    expect(both).toContain('href="/auth/login"');
    expect(both).toContain('<form');
    expect(both).not.toMatch(/bosun:(oidc|token)/);
  });

  it('says why a login was refused, in fixed words', () => {
    const pages = loginPages(template, { token: false, oidc: true });
    for (const [key, text] of Object.entries(LOGIN_REFUSALS))
      expect(pages.get(key as keyof typeof LOGIN_REFUSALS)).toContain(`role="alert">${text}</p>`);
    expect(pages.get('')).not.toContain('role="alert"');
  });

  it('refuses a template without its slot or sections', () => {
    expect(() => loginPages('<p></p>', { token: true, oidc: false })).toThrow(/has no <!-- bosun:login-message -->/);
    expect(() => loginPages('<!-- bosun:login-message -->', { token: true, oidc: false })).toThrow(/has no <!-- bosun:oidc -->/);
  });
});
