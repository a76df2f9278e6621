import type { IncomingMessage } from 'node:http';
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Person } from './oidc.js';
import { SESSION_TTL_MS, SHARED_CONSOLE_NAME, Sessions, oidcIdentity, readCookie } from './session.js';

// The console's logins, sessions and CSRF tokens, with a clock of our own.

const req = (headers: Record<string, string>) => ({ headers }) as unknown as IncomingMessage;

describe('Sessions', () => {
  it('logs in with the operator token only, and gives each session its own CSRF token', () => {
    const s = new Sessions('op-token-123');
    expect(s.login('op-token-12')).toBeNull();
    expect(s.login('')).toBeNull();
    const a = s.login('op-token-123')!;
    const b = s.login('op-token-123')!;
    expect(a).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(a).not.toBe(b);
    const csrfA = s.csrfOf(req({ cookie: `x=1; bosun_console=${a}` }));
    expect(csrfA).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(csrfA).not.toBe(s.csrfOf(req({ cookie: `bosun_console=${b}` })));
    expect(s.csrfOf(req({ cookie: 'bosun_console=forged' }))).toBeNull();
    expect(s.csrfOf(req({}))).toBeNull();
  });

  it('accepts a POST only with the session’s own CSRF token', () => {
    const s = new Sessions('op-token-123');
    const a = s.login('op-token-123')!;
    const b = s.login('op-token-123')!;
    const csrfA = s.csrfOf(req({ cookie: `bosun_console=${a}` }))!;
    expect(s.csrfOk(req({ cookie: `bosun_console=${a}`, 'x-csrf-token': csrfA }))).toBe(true);
    expect(s.csrfOk(req({ cookie: `bosun_console=${a}` }))).toBe(false);
    expect(s.csrfOk(req({ cookie: `bosun_console=${b}`, 'x-csrf-token': csrfA }))).toBe(false);
    expect(s.csrfOk(req({ 'x-csrf-token': csrfA }))).toBe(false);
  });

  it('ends a session after its lifetime, and at logout', () => {
    let now = 1_000;
    const s = new Sessions('op-token-123', () => now);
    const a = s.login('op-token-123')!;
    const r = req({ cookie: `bosun_console=${a}` });
    now += SESSION_TTL_MS - 1;
    expect(s.csrfOf(r)).not.toBeNull();
    now += 1;
    expect(s.csrfOf(r)).toBeNull();
    const b = s.login('op-token-123')!;
    s.logout(req({ cookie: `bosun_console=${b}` }));
    expect(s.csrfOf(req({ cookie: `bosun_console=${b}` }))).toBeNull();
  });

  it('sets an HttpOnly, SameSite=Strict cookie (Secure when asked), and clears it', () => {
    expect(Sessions.cookie('abc', false)).toBe('bosun_console=abc; HttpOnly; SameSite=Strict; Path=/; Max-Age=43200');
    expect(Sessions.cookie('abc', true)).toMatch(/; Secure$/);
    expect(Sessions.clearCookie()).toMatch(/^bosun_console=; HttpOnly; SameSite=Strict; Path=\/; Max-Age=0$/);
    expect(readCookie(req({ cookie: 'a=1;  bosun_console=v=x ; b=2' }), 'bosun_console')).toBe('v=x');
  });

  it('holds the identity of each session: the shared token unverified, a person from the provider verified; no token, no token login', () => {
    const s = new Sessions('op-token-123');
    const t = s.login('op-token-123')!;
    expect(s.identityOf(req({ cookie: `bosun_console=${t}` }))?.actor).toEqual({
      name: SHARED_CONSOLE_NAME,
      verified: false,
      path: 'console',
    });
    const ada: Person = { sub: 'u-1', name: 'Ada', email: 'ada@example.test', groups: ['sre'], role: 'read-only', via: 'oidc' };
    const a = s.open(oidcIdentity(ada, '10.0.0.9'));
    expect(s.identityOf(req({ cookie: `bosun_console=${a}` }))).toEqual({
      actor: { name: 'Ada', verified: true, path: 'console', sub: 'u-1', email: 'ada@example.test', address: '10.0.0.9' },
      roles: ['read'],
    });
    expect(s.csrfOf(req({ cookie: `bosun_console=${a}` }))).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(s.identityOf(req({ cookie: 'bosun_console=forged' }))).toBeNull();
    const oidcOnly = new Sessions(undefined);
    expect(oidcOnly.login('')).toBeNull();
    expect(oidcOnly.login('op-token-123')).toBeNull();
  });
});

describe('Sessions with the config’s operators', () => {
  const sha = (t: string) => createHash('sha256').update(t).digest('hex');
  const operators = [
    { name: 'alice', tokenSha256: sha('alice-token'), roles: ['approve', 'read'] as const },
    { name: 'rita', tokenSha256: sha('rita-token'), roles: ['read'] as const },
  ].map((o) => ({ ...o, roles: [...o.roles] }));

  it('opens a person’s session with their token (verified, their roles), the shared one unverified', () => {
    const s = new Sessions('shared-token', Date.now, operators);
    const a = s.login('alice-token', '10.0.0.7')!;
    expect(s.identityOf(req({ cookie: `bosun_console=${a}` }))).toEqual({
      actor: { name: 'alice', verified: true, path: 'console', address: '10.0.0.7' },
      roles: ['approve', 'read'],
    });
    const shared = s.login('shared-token')!;
    expect(s.identityOf(req({ cookie: `bosun_console=${shared}` }))?.actor).toEqual({
      name: 'console-operator',
      verified: false,
      path: 'console',
    });
    expect(s.login('nobody')).toBeNull();
    expect(s.identityOf(req({ cookie: 'bosun_console=forged' }))).toBeNull();
  });
});
