import { describe, expect, it } from 'vitest';

import { InvalidInputError, parseWith } from './errors.js';
import {
  TOOL_CALL_STATES,
  TOOL_CALL_TRANSITIONS,
  ToolCallRecord,
  resolvedResult,
  toolCallRecordKey,
  toolCallTransition,
} from './tool-record.js';

describe('the tool-call record', () => {
  it('lives at <prefix>:toolcall:<key>', () => {
    expect(toolCallRecordKey('bosun', 'r1-d0-k-s1-c0')).toBe('bosun:toolcall:r1-d0-k-s1-c0');
  });

  it('parses a hash as the gateway and bosun ack write it: JSON fields as values, flags as booleans', () => {
    const result = resolvedResult('k1', 'demo__restart_pod', 'done');
    const hash = {
      state: 'done',
      tool: 'demo__restart_pod',
      args: '{"pod":"p1"}',
      runId: 'r1',
      incidentId: 'inc-1',
      agent: 'kubernetes',
      startedAt: '2026-01-01T00:00:00.000Z',
      readOnly: 'false',
      approvalId: '',
      argsRedacted: 'false',
      result: JSON.stringify(result),
      resolution: '{"action":"done","by":"alice","at":"2026-01-01T00:01:00.000Z"}',
    };
    expect(ToolCallRecord.parse(hash)).toEqual({
      ...hash,
      args: { pod: 'p1' },
      readOnly: false,
      argsRedacted: false,
      result,
      resolution: { action: 'done', by: 'alice', at: '2026-01-01T00:01:00.000Z' },
    });
    // Only the state is required: a claim not yet written in full, or an old record.
    expect(ToolCallRecord.parse({ state: 'inflight' })).toEqual({ state: 'inflight' });
  });

  it('names the bad field of a corrupt record', () => {
    const bad = (hash: Record<string, string>) => () => parseWith(ToolCallRecord, hash, 'tool call record k');
    expect(bad({ state: 'paused' })).toThrow(InvalidInputError);
    expect(bad({ state: 'paused' })).toThrow(/^invalid tool call record k: state: /);
    expect(bad({ state: 'done', result: '{' })).toThrow('invalid tool call record k: result: is not valid JSON');
    expect(bad({ state: 'in-doubt', readOnly: 'yes' })).toThrow(/^invalid tool call record k: readOnly: /);
    expect(bad({ state: 'in-doubt', args: '[1]' })).toThrow(/^invalid tool call record k: args: /);
  });

  it('has transitions between its states only; done is final, and every state can be reached', () => {
    for (const t of TOOL_CALL_TRANSITIONS) {
      expect(['none', ...TOOL_CALL_STATES]).toContain(t.from);
      expect(TOOL_CALL_STATES).toContain(t.to);
    }
    expect(TOOL_CALL_TRANSITIONS.filter((t) => t.from === 'done')).toEqual([]);
    for (const s of TOOL_CALL_STATES) expect(TOOL_CALL_TRANSITIONS.some((t) => t.to === s)).toBe(true);
    expect(toolCallTransition('none', 'inflight')?.by).toBe('gateway');
    expect(toolCallTransition('in-doubt', 'retry')?.by).toBe('operator');
    expect(toolCallTransition('none', 'done')).toBeUndefined();
    expect(toolCallTransition('in-doubt', 'inflight')).toBeUndefined();
  });
});
