import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ForbiddenError, OperatorDirectory, requireRole } from './identity.js';

// Who is asking: per-person tokens (verified, their roles) and the shared token (unverified, every role).

const sha = (t: string) => createHash('sha256').update(t).digest('hex');
const operators = [
  { name: 'alice', tokenSha256: sha('alice-token'), roles: ['approve' as const, 'read' as const] },
  { name: 'rita', tokenSha256: sha('rita-token'), roles: ['read' as const] },
];

describe('OperatorDirectory', () => {
  it('resolves a person’s token to them, verified, with their roles and the path and address', () => {
    const d = new OperatorDirectory({ operators, shared: { token: 'shared', name: 'http-operator' } });
    expect(d.named).toBe(true);
    expect(d.resolve('alice-token', 'http', '10.1.2.3')).toEqual({
      actor: { name: 'alice', verified: true, path: 'http', address: '10.1.2.3' },
      roles: ['approve', 'read'],
    });
    expect(d.resolve('shared', 'http')).toEqual({
      actor: { name: 'http-operator', verified: false, path: 'http' },
      roles: ['approve', 'cancel', 'retry', 'read'],
    });
    expect(d.resolve('nobody', 'http')).toBeNull();
    expect(d.byName('ALICE')?.name).toBe('alice');
    expect(new OperatorDirectory({ operators: [] }).resolve('', 'cli')).toBeNull();
  });

  it('refuses a missing role with a ForbiddenError naming the person, the role and what needed it', () => {
    const rita = new OperatorDirectory({ operators }).resolve('rita-token', 'cli')!;
    expect(() => requireRole(rita, 'read', 'reading')).not.toThrow();
    const err = (() => {
      try {
        requireRole(rita, 'approve', 'deciding approval ap-1');
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(ForbiddenError);
    expect(err).toMatchObject({
      code: 'forbidden',
      role: 'approve',
      message: 'rita may not do this: deciding approval ap-1 needs the "approve" role (rita has: read)',
    });
  });
});
