import { describe, expect, it } from 'vitest';
import { BosunError, CodedError } from '@bosun/contract';
import { UsageError } from './args.js';
import { CliError } from './errors.js';
import { OPERATOR_HTTP_STATUS, OperatorError } from './operator.js';

// Why an operator's request failed travels as data: the exit code and the console's status come from the reason, never the message.

describe('OperatorError', () => {
  it('exits 2 for a bad request, 4 when not allowed, and 1 for every other reason', () => {
    expect(new OperatorError('bad_request', 'dead letter d1 is poison').exitCode).toBe(2);
    expect(new OperatorError('forbidden', 'approve: rita lacks the approve role').exitCode).toBe(4);
    for (const reason of ['not_found', 'conflict', 'corrupt', 'unavailable'] as const)
      expect(new OperatorError(reason, 'x').exitCode).toBe(1);
  });

  it("answers the console by its reason, whatever its message says (a message starting 'no ' is not a 404)", () => {
    const conflict = new OperatorError('conflict', 'no free retry id: retried too often');
    expect(OPERATOR_HTTP_STATUS[conflict.reason]).toBe(409);
    expect(OPERATOR_HTTP_STATUS[new OperatorError('not_found', 'run r1 is gone').reason]).toBe(404);
    expect(OPERATOR_HTTP_STATUS).toEqual({
      not_found: 404,
      bad_request: 400,
      conflict: 409,
      corrupt: 500,
      unavailable: 503,
      forbidden: 403,
    });
    expect(conflict).toMatchObject({ code: 'operator', data: { reason: 'conflict' } });
  });
});

describe('CliError', () => {
  it('carries the codes of the CLI alone: coded errors, but not the contract’s BosunError', () => {
    const usage = new UsageError('unknown option --x');
    const refused = new OperatorError('forbidden', 'no');
    for (const err of [usage, refused, new CliError('demo_server', 'redis does not answer')]) {
      expect(err).toBeInstanceOf(CliError);
      expect(err).toBeInstanceOf(CodedError);
      expect(err).not.toBeInstanceOf(BosunError);
    }
    expect([usage.code, refused.code, usage.name]).toEqual(['usage', 'operator', 'UsageError']);
  });
});
