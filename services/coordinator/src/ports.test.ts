import { describe, expect, it } from 'vitest';

import { taskIdOfKey } from './ports.js';

describe('taskIdOfKey', () => {
  it("reads the task id from a child job's key, whatever the prefix", () => {
    expect(taskIdOfKey('bull:pfx:specialist-kubernetes:r1-d0-kubernetes')).toBe('r1-d0-kubernetes');
    expect(taskIdOfKey('{bosun}:specialist-database:r0123456789abcdef0123-d1-database')).toBe('r0123456789abcdef0123-d1-database');
  });
});
