import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readEnv } from '@bosun/config';
import { cliViewer } from './identity.js';
import { OperatorError } from './operator.js';

// Who `bosun approvals show` records as a viewer (issue 23 item 3): the operator of a token
// presented, checked for `read`; nobody without a token (and the config is not even read then).

const sha = (t: string) => createHash('sha256').update(t).digest('hex');
const operators = [{ name: 'rita', tokenSha256: sha('rita-token-0123456789'), roles: ['read' as const] }];
// A config file that does not parse: reading it would throw.
const dir = mkdtempSync(join(tmpdir(), 'bosun-identity-'));
const broken = join(dir, 'bosun.yaml');
writeFileSync(broken, 'coordinator: [not, a, config');
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const env = (token?: string) => readEnv({ BOSUN_CONFIG: broken, ...(token ? { BOSUN_TOKEN: token } : {}) });

describe('cliViewer', () => {
  it('is nobody without a token, without reading the config', () => {
    expect(cliViewer(env(), undefined, 'reading approval ap-1')).toBeUndefined();
  });

  it('is the operator of the token; nobody when the config names no operators; a stranger’s token is refused', () => {
    expect(cliViewer(env('rita-token-0123456789'), undefined, 'reading approval ap-1', operators)?.actor).toEqual({
      name: 'rita',
      verified: true,
      path: 'cli',
    });
    expect(cliViewer(env('rita-token-0123456789'), undefined, 'reading approval ap-1', [])).toBeUndefined();
    expect(() => cliViewer(env('who-knows'), undefined, 'reading approval ap-1', operators)).toThrow(OperatorError);
  });
});
