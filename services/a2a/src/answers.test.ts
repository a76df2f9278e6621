import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { UnsupportedOperationError } from '@a2a-js/sdk/errors';
import type { Message } from '@a2a-js/sdk';
import { A2aConfig, createLogger } from '@bosun/config';
import type { A2aTaskRecord, Decision } from '@bosun/contract';
import { ApprovalAnswers } from './answers.js';
import { TokenTable, type Caller } from './auth.js';

// A2A operator tokens that name a person of the config: the answer is recorded as that person,
// verified, and needs their `approve` role; a tenant's operator token stays unverified.

const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const operators = [
  { name: 'alice', tokenSha256: sha('alice-own'), roles: ['approve' as const, 'read' as const] },
  { name: 'rita', tokenSha256: sha('rita-own'), roles: ['read' as const] },
];
const table = new TokenTable(
  A2aConfig.parse({
    port: 1,
    tokens: [
      { sha256: sha('alice-a2a'), tenant: 'ops', person: 'alice' },
      { sha256: sha('rita-a2a'), tenant: 'ops', person: 'rita' },
      { sha256: sha('team'), tenant: 'ops', operator: true },
    ],
  }),
  operators,
);

/** Answers over fakes that keep the decision the store was given. */
function answers() {
  const decided: Decision[] = [];
  const deps = {
    approvals: { decide: (_id: string, d: Decision) => (decided.push(d), Promise.resolve({ id: 'ap-1', status: 'approved', runId: 'r' })) },
    runs: { pendingApproval: () => Promise.resolve({ id: 'ap-1' }) },
    store: { append: (r: A2aTaskRecord) => Promise.resolve(r) },
    events: { emit: () => undefined, flush: () => Promise.resolve() },
    log: createLogger({ service: 'test', level: 'silent' }),
  };
  return { decided, answers: new ApprovalAnswers(deps as never) };
}

const record = { taskId: 't1', contextId: 'c1', runId: 'r' } as unknown as A2aTaskRecord;
const approve = (by?: string) =>
  ({
    messageId: 'm',
    parts: [{ content: { $case: 'data', value: { decision: 'approve', ...(by ? { by } : {}) } } }],
  }) as unknown as Message;

describe('A2A answers by named people', () => {
  it('a token naming a person resolves to that person (operator implied)', () => {
    const alice = table.resolve('Bearer alice-a2a') as Caller;
    expect(alice).toMatchObject({ tenant: 'ops', operator: true, person: { name: 'alice' } });
    expect((table.resolve('Bearer team') as Caller).person).toBeUndefined();
  });

  it('records the person, verified, on path a2a; the tenant token unverified as a2a:<tenant>', async () => {
    const a = answers();
    await a.answers.answer(record, approve('mallory'), table.resolve('Bearer alice-a2a') as Caller, '10.0.0.9');
    expect(a.decided[0]).toMatchObject({
      by: 'alice',
      actor: { name: 'alice', verified: true, path: 'a2a', address: '10.0.0.9', note: 'mallory' },
    });
    await a.answers.answer(record, approve('mallory'), table.resolve('Bearer team') as Caller);
    expect(a.decided[1]).toMatchObject({ by: 'a2a:ops', actor: { name: 'a2a:ops', verified: false, path: 'a2a' } });
  });

  it('refuses a person without the approve role, deciding nothing', async () => {
    const a = answers();
    const refused = await a.answers.answer(record, approve(), table.resolve('Bearer rita-a2a') as Caller).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(UnsupportedOperationError);
    expect((refused as Error).message).toMatch(/rita may not do this: answering approval ap-1 needs the "approve" role/);
    expect(a.decided).toEqual([]);
  });
});
