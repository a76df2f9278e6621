import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ConfigError, parseClusterConfig } from './cluster.js';

// The config's `operators`: people, their token hashes and roles, checked strictly.

const sha = (t: string) => createHash('sha256').update(t).digest('hex');

/** A small valid raw config with `operators` (and optionally `a2a`). */
function withOperators(operators: unknown, a2a?: unknown): Record<string, unknown> {
  return {
    coordinator: { defaultRoute: ['kubernetes'] },
    specialists: {
      kubernetes: { description: 'pods', tools: [], outputSchema: { type: 'object', properties: { summary: { type: 'string' } } } },
    },
    operators,
    ...(a2a === undefined ? {} : { a2a }),
  };
}

function problem(raw: unknown): string {
  try {
    parseClusterConfig(raw, { file: 'cluster.yaml', env: {} });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('expected a ConfigError');
}

describe('operators', () => {
  it('parses people with their token hashes (lower-cased) and roles; none by default', () => {
    const c = parseClusterConfig(withOperators([{ name: 'alice', tokenSha256: sha('a').toUpperCase(), roles: ['approve', 'read'] }]), {
      file: 'cluster.yaml',
      env: {},
    });
    expect(c.operators).toEqual([{ name: 'alice', tokenSha256: sha('a'), roles: ['approve', 'read'] }]);
    const { operators: _o, ...none } = withOperators([]);
    expect(parseClusterConfig(none, { file: 'cluster.yaml', env: {} }).operators).toEqual([]);
  });

  it('names the field at fault: a token in clear, an unknown role, no role, a duplicate name or token, an unknown field', () => {
    const ok = { name: 'alice', tokenSha256: sha('a'), roles: ['approve'] };
    expect(problem(withOperators([{ ...ok, tokenSha256: 'alice-token' }]))).toMatch(
      /operators\.0\.tokenSha256: must be the SHA-256 of the token, as 64 hex digits/,
    );
    expect(problem(withOperators([{ ...ok, roles: ['admin'] }]))).toMatch(/operators\.0\.roles\.0: /);
    expect(problem(withOperators([{ ...ok, roles: [] }]))).toMatch(/operators\.0\.roles: give at least one role/);
    expect(problem(withOperators([ok, { ...ok, name: 'Alice', tokenSha256: sha('b') }]))).toMatch(
      /operators\.1\.name: "Alice" is already the name of operators\.0/,
    );
    expect(problem(withOperators([ok, { ...ok, name: 'bob' }]))).toMatch(/operators\.1\.tokenSha256: the same token as operators\.0/);
    expect(problem(withOperators([{ ...ok, token: 'x' }]))).toMatch(/operators\.0: .*token/);
    expect(problem(withOperators([{ ...ok, name: 'al ice' }]))).toMatch(/operators\.0\.name: must be letters/);
  });

  it('refuses an A2A token whose person is not an operator', () => {
    const a2a = { port: 0, tokens: [{ sha256: sha('t'), tenant: 'ops', person: 'mallory' }] };
    expect(problem(withOperators([{ name: 'alice', tokenSha256: sha('a'), roles: ['read'] }], a2a))).toMatch(
      /a2a\.tokens\.0\.person: unknown operator "mallory" \(known: alice\)/,
    );
  });

  it('refuses a Slack app sink that maps a user to someone who is not an operator, once operators are named', () => {
    const slack = (users: Record<string, string>, emails: Record<string, string> = {}) => ({
      ...withOperators([{ name: 'alice', tokenSha256: sha('a'), roles: ['approve'] }]),
      delivery: {
        sinks: { oncall: { type: 'slack', botToken: 'xoxb-1', channel: 'C0ONCALL1', signingSecret: 's', users, emails } },
      },
    });
    expect(problem(slack({ U0BOB0001: 'bob' }))).toMatch(
      /delivery\.sinks\.oncall\.users\.U0BOB0001: unknown operator "bob" \(known: alice\)/,
    );
    expect(problem(slack({}, { 'bob@example.com': 'bob' }))).toMatch(
      /delivery\.sinks\.oncall\.emails\.bob@example\.com: unknown operator "bob"/,
    );
    expect(parseClusterConfig(slack({ U0ALICE01: 'alice' }), { file: 'cluster.yaml', env: {} }).operators).toHaveLength(1);
  });
});
