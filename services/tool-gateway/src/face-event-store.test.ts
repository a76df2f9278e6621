import { describe, expect, it } from 'vitest';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

import { SessionEventStore } from './face-event-store.js';

const PRIMING = {} as JSONRPCMessage;
const progress = (n: number): JSONRPCMessage => ({
  jsonrpc: '2.0',
  method: 'notifications/progress',
  params: { progressToken: 1, progress: n },
});
const answer = (id: number, text = 'done'): JSONRPCMessage => ({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text }] } });

async function replay(store: SessionEventStore, after: string): Promise<{ stream: string; sent: [string, JSONRPCMessage][] }> {
  const sent: [string, JSONRPCMessage][] = [];
  const stream = await store.replayEventsAfter(after, {
    send: (id, message) => {
      sent.push([id, message]);
      return Promise.resolve();
    },
  });
  return { stream, sent };
}

describe('SessionEventStore', () => {
  it('replays what a stream got after an event, without priming events, and maps ids to their stream', async () => {
    const store = new SessionEventStore();
    const primed = await store.storeEvent('s1', PRIMING);
    const other = await store.storeEvent('s2', PRIMING);
    const p1 = await store.storeEvent('s1', progress(1));
    await store.storeEvent('s2', progress(9));
    const done = await store.storeEvent('s1', answer(1));
    expect(await store.getStreamIdForEventId(primed)).toBe('s1');
    expect(await store.getStreamIdForEventId(other)).toBe('s2');

    expect(await replay(store, primed)).toEqual({
      stream: 's1',
      sent: [
        [p1, progress(1)],
        [done, answer(1)],
      ],
    });
    expect((await replay(store, p1)).sent).toEqual([[done, answer(1)]]);
    expect((await replay(store, done)).sent).toEqual([]);
    expect((await replay(store, other)).sent.map(([, m]) => m)).toEqual([progress(9)]);
  });

  it('does not know ids it did not issue', async () => {
    const store = new SessionEventStore();
    await store.storeEvent('s1', PRIMING);
    for (const id of ['s1', 's1.', 's1.0', 's1.x', 'nope.1', '.1', '']) expect(await store.getStreamIdForEventId(id)).toBeUndefined();
    await expect(replay(store, 'nope.1')).rejects.toThrow(/unknown event id/);
  });

  it('drops an answered request after retainMs, and keeps one still waiting', async () => {
    let now = 0;
    const store = new SessionEventStore({ retainMs: 1_000, now: () => now });
    const answered = await store.storeEvent('a', PRIMING);
    await store.storeEvent('a', answer(1));
    const waiting = await store.storeEvent('w', PRIMING);
    await store.storeEvent('w', progress(1));
    now = 1_001;
    await store.storeEvent('x', PRIMING);
    expect(await store.getStreamIdForEventId(answered)).toBeUndefined();
    expect(await store.getStreamIdForEventId(waiting)).toBe('w');
  });

  it('keeps the session under maxBytes by dropping the oldest answered requests first', async () => {
    const store = new SessionEventStore({ maxBytes: 1_000 });
    const big = 'x'.repeat(300);
    const first = await store.storeEvent('a', answer(1, big));
    const waiting = await store.storeEvent('w', progress(1));
    const second = await store.storeEvent('b', answer(2, big));
    expect(await store.getStreamIdForEventId(first)).toBe('a');
    await store.storeEvent('c', answer(3, big));
    expect(await store.getStreamIdForEventId(first)).toBeUndefined();
    expect(await store.getStreamIdForEventId(second)).toBe('b');
    expect(await store.getStreamIdForEventId(waiting)).toBe('w');
    expect(store.size).toBeLessThanOrEqual(1_000);
  });

  it('keeps the newest maxEventsPerStream events of a stream, still replayable after an older id', async () => {
    const store = new SessionEventStore({ maxEventsPerStream: 3 });
    const primed = await store.storeEvent('s', PRIMING);
    for (let i = 1; i <= 5; i++) await store.storeEvent('s', progress(i));
    const done = await store.storeEvent('s', answer(1));
    const { sent } = await replay(store, primed);
    expect(sent.map(([, m]) => m)).toEqual([progress(4), progress(5), answer(1)]);
    expect(sent.at(-1)?.[0]).toBe(done);
  });
});
