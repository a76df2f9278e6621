import { describe, expect, it } from 'vitest';

import { childResults } from './run-parts.js';
import type { ChildrenRead } from './run-ports.js';
import { describeOutput, inDoubtLine, parseRouting } from './run-text.js';

const KNOWN = ['kubernetes', 'database'] as const;

describe('parseRouting', () => {
  it('reads a JSON object with specialists', () => {
    expect(parseRouting('{"specialists":["database","kubernetes"]}', KNOWN)).toEqual(['database', 'kubernetes']);
    expect(parseRouting('  {"specialists": ["kubernetes"]}\n', KNOWN)).toEqual(['kubernetes']);
  });

  it('reads a bare JSON array', () => {
    expect(parseRouting('["database"]', KNOWN)).toEqual(['database']);
  });

  it('reads JSON wrapped in prose or a code fence', () => {
    expect(parseRouting('Here is my routing:\n```json\n{"specialists": ["database"]}\n```\nThanks.', KNOWN)).toEqual(['database']);
    expect(parseRouting('Route to: ["kubernetes", "database"] please', KNOWN)).toEqual(['kubernetes', 'database']);
  });

  it('keeps unknown names in JSON form (the coordinator reports them) and drops non-strings', () => {
    expect(parseRouting('{"specialists":["kubernetes","networking"]}', KNOWN)).toEqual(['kubernetes', 'networking']);
    expect(parseRouting('["networking", 3, null, "database"]', KNOWN)).toEqual(['networking', 'database']);
  });

  it('an explicit empty list is an empty routing', () => {
    expect(parseRouting('{"specialists": []}', KNOWN)).toEqual([]);
  });

  it('falls back to known names mentioned as words in prose', () => {
    expect(parseRouting('This looks like a database problem, maybe kubernetes too.', KNOWN)).toEqual(['kubernetes', 'database']);
    expect(parseRouting('The database is slow.', KNOWN)).toEqual(['database']);
    // Whole words only, and never an unknown name.
    expect(parseRouting('Check the databases and networking.', KNOWN)).toEqual([]);
    expect(parseRouting('', KNOWN)).toEqual([]);
  });

  it('falls back to prose when the JSON has no specialists list', () => {
    expect(parseRouting('{"answer": "database"} — send it to the database team', KNOWN)).toEqual(['database']);
  });
});

describe('childResults', () => {
  const read = (values: Record<string, unknown>, failures: Record<string, string> = {}): ChildrenRead => ({
    values: new Map(Object.entries(values)),
    failures: new Map(Object.entries(failures)),
  });
  it('reads again when a read made early misses a delegation, and not otherwise', async () => {
    let reads = 0;
    const late = (): Promise<ChildrenRead> => {
      reads++;
      return Promise.resolve(read({ 'r1-d0-kubernetes': { ok: 1 }, 'r1-d1-database': { ok: 2 } }));
    };
    const early = Promise.resolve(read({ 'r1-d0-kubernetes': { ok: 1 } }));
    const ds = [{ taskId: 'r1-d0-kubernetes' }, { taskId: 'r1-d1-database' }];
    const got = await childResults(ds, early, late);
    expect(reads).toBe(1);
    expect([...got.values.keys()].sort()).toEqual(['r1-d0-kubernetes', 'r1-d1-database']);

    // Complete early read (a failure counts as an answer), or a delegation already decided: no second read.
    const early2 = Promise.resolve(read({ 'r1-d0-kubernetes': { ok: 1 } }, { 'r1-d1-database': 'boom' }));
    const got2 = await childResults(ds, early2, late);
    expect(reads).toBe(1);
    expect(got2.failures.get('r1-d1-database')).toBe('boom');
    await childResults([{ taskId: 'r1-d0-kubernetes' }, { taskId: 'r1-d1-database', result: {} }], early, late);
    expect(reads).toBe(1);
    // No early read: one read.
    await childResults(ds, undefined, late);
    expect(reads).toBe(2);
  });
});

describe('inDoubtLine', () => {
  it('names every call in doubt with its tool, agent and key, and what an operator does about it', () => {
    const one = inDoubtLine({ count: 1, calls: [{ key: 'r1-d0-kubernetes-s1-c0', tool: 'demo__restart_pod', agent: 'kubernetes' }] });
    expect(one).toBe(
      'IN DOUBT: 1 mutating tool call was sent, but whether it took effect is unknown; it was not retried and an operator must resolve it ' +
        'with bosun ack <key> --done|--retry|--skip: demo__restart_pod by kubernetes (key r1-d0-kubernetes-s1-c0).',
    );
    const two = inDoubtLine({
      count: 2,
      calls: [
        { key: 'k1', tool: 'demo__restart_pod', agent: 'kubernetes' },
        { key: 'k2', tool: 'demo__rollback_deployment', agent: 'kubernetes' },
      ],
    });
    expect(two).toMatch(/^IN DOUBT: 2 mutating tool calls were sent/);
    expect(two).toContain('demo__restart_pod by kubernetes (key k1); demo__rollback_deployment by kubernetes (key k2).');
  });
});

describe('describeOutput', () => {
  it('writes a report as its summary, findings and cause, and anything else as it is or as JSON', () => {
    expect(
      describeOutput({
        summary: 'pods restart',
        findings: [{ title: 'OOM', detail: 'limit 256Mi' }, { title: 'no detail' }, 'plain', { title: 7, detail: { a: 1 } }],
        suspectedCause: 'memory leak',
        recommendedAction: 'raise the limit',
      }),
    ).toBe(
      'pods restart\n- OOM: limit 256Mi\n- no detail\n- plain\n- 7: {"a":1}\nsuspectedCause: memory leak\nrecommendedAction: raise the limit',
    );
    expect(describeOutput(undefined)).toBe('(no output)');
    expect(describeOutput(null)).toBe('(no output)');
    expect(describeOutput('text')).toBe('text');
    expect(describeOutput(42)).toBe('42');
    expect(describeOutput({ other: 1 })).toBe('{\n  "other": 1\n}');
  });
});
