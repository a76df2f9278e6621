import { describe, expect, it } from 'vitest';
import { runbookField, withRunbook } from './runbook.js';

describe('runbooks in the run', () => {
  const incident = { payload: { runbook: { name: 'crashloop', text: '1. Look at the restarts.' }, runbookUrl: 'https://rb.example/x' } };

  it('the runbook follows the system instruction, as instructions', () => {
    expect(withRunbook('You are a specialist.', incident)).toBe(
      'You are a specialist.\n\nThe team\'s runbook "crashloop" applies to this incident. Follow it as your instructions where it concerns your work:\n\n1. Look at the restarts.',
    );
    expect(withRunbook('S', { payload: { runbook: { name: '' } } })).toBe('S');
    expect(withRunbook('S', {})).toBe('S');
  });

  it("the run result names the runbook and the alert's link", () => {
    expect(runbookField(incident)).toEqual({ runbook: { name: 'crashloop', url: 'https://rb.example/x' } });
    expect(runbookField({ payload: { runbookUrl: 'https://rb.example/y' } })).toEqual({ runbook: { url: 'https://rb.example/y' } });
    expect(runbookField({ payload: 'text' })).toEqual({});
  });
});
