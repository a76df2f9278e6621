import { describe, expect, it } from 'vitest';

import { parseRouting } from './coordinator.js';

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
