import { describe, expect, it } from 'vitest';
import { createLogger } from '@bosun/config';
import type { Approval } from '@bosun/transport';
import { ApprovalSweep } from './face-sweep.js';

// The MCP face's expiry sweep with stand-ins for the approval store and the waiter.

const approval = (id: string, runId: string, timeoutAt: string, status: Approval['status'] = 'pending'): Approval => ({
  id,
  runId,
  incidentId: runId,
  agent: 'mcp-client',
  taskId: `k-${id}`,
  calls: [],
  reason: 'r',
  createdAt: timeoutAt,
  timeoutAt,
  status,
});

const PAST = new Date(Date.now() - 60_000).toISOString();
const FUTURE = new Date(Date.now() + 3_600_000).toISOString();

function setup(pending: () => Promise<Approval[]>, expire: (a: Approval) => Promise<Approval>) {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger({ service: 'sweep-unit', level: 'info', destination: { write: (l: string) => void lines.push(JSON.parse(l)) } });
  const sweep = new ApprovalSweep({ approvals: { pending }, waiter: { expire }, owns: (a) => a.runId === 'mcp', everyMs: 3_600_000, log });
  return { sweep, lines };
}

describe('ApprovalSweep', () => {
  it("expires only the face's own approvals whose time is up, and goes on past one it cannot deny", async () => {
    const expired: string[] = [];
    const { sweep, lines } = setup(
      () =>
        Promise.resolve([approval('a', 'mcp', PAST), approval('b', 'r1', PAST), approval('c', 'mcp', FUTURE), approval('d', 'mcp', PAST)]),
      (a) => {
        expired.push(a.id);
        return a.id === 'a' ? Promise.reject(new Error('redis away')) : Promise.resolve({ ...a, status: 'denied' });
      },
    );
    await sweep.sweep();
    expect(expired).toEqual(['a', 'd']);
    expect(lines.find((l) => l.msg === 'could not deny an expired MCP face approval')).toMatchObject({
      approvalId: 'a',
      err: { message: 'redis away' },
    });
  });

  it('logs a failed listing, never overlaps sweeps, and stop waits for the one under way', async () => {
    let release: (list: Approval[]) => void = () => undefined;
    let listings = 0;
    const expired: string[] = [];
    const { sweep, lines } = setup(
      () => {
        listings++;
        if (listings === 1) return Promise.reject(new Error('no listing'));
        return new Promise<Approval[]>((r) => (release = r));
      },
      (a) => {
        expired.push(a.id);
        return Promise.resolve(a);
      },
    );
    await sweep.sweep();
    expect(lines.find((l) => l.msg === 'could not sweep expired MCP face approvals')).toMatchObject({ err: { message: 'no listing' } });
    const first = sweep.sweep();
    const second = sweep.sweep();
    expect(listings).toBe(2);
    let stopped = false;
    const stopping = sweep.stop().then(() => (stopped = true));
    await Promise.resolve();
    expect(stopped).toBe(false);
    release([approval('e', 'mcp', PAST)]);
    await Promise.all([first, second, stopping]);
    // Stopped while listing: nothing more is expired, and no sweep starts after stop.
    expect(expired).toEqual([]);
    await sweep.sweep();
    expect(listings).toBe(2);
  });
});
