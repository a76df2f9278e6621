import { describe, expect, it } from 'vitest';
import type { Catalog, ToolCallJob, ToolCallResult } from '@bosun/contract';
import { DirectToolClient, type InProcessGateway } from './tools-direct.js';

const call: ToolCallJob = {
  v: 1,
  key: 'run1-kubernetes-s1-c0',
  runId: 'run1',
  incidentId: 'inc-1',
  agent: 'kubernetes',
  tool: 'demo__get_pods',
  args: { service: 'checkout' },
};

const ok: ToolCallResult = { v: 1, key: call.key, tool: call.tool, status: 'ok', isError: false, text: 'ok', durationMs: 3 };

const catalog: Catalog = { v: 1, updatedAt: '2026-12-02T00:00:00.000Z', tools: [], unavailable: {} };

/** A gateway whose calls the test answers: `answer` settles the call under way. */
function gateway(): InProcessGateway & { calls: ToolCallJob[]; answer(r: ToolCallResult): void; fail(e: Error): void } {
  const calls: ToolCallJob[] = [];
  let settle: { resolve(r: ToolCallResult): void; reject(e: Error): void } | undefined;
  return {
    calls,
    catalog: () => catalog,
    execute(c) {
      calls.push(c);
      return new Promise((resolve, reject) => (settle = { resolve, reject }));
    },
    answer: (r) => settle!.resolve(r),
    fail: (e) => settle!.reject(e),
  };
}

describe('DirectToolClient', () => {
  it('hands the call to the gateway as it is, and returns its result', async () => {
    const gw = gateway();
    const client = new DirectToolClient(gw);
    const pending = client.call(call);
    expect(gw.calls).toHaveLength(1);
    expect(gw.calls[0]).toMatchObject(call);
    gw.answer(ok);
    await expect(pending).resolves.toEqual(ok);
    await expect(client.catalog()).resolves.toBe(catalog);
  });

  it("passes the gateway's failure on (the gateway answers every call with a result; this is for a bug)", async () => {
    const gw = gateway();
    const pending = new DirectToolClient(gw).call(call);
    gw.fail(new Error('boom'));
    await expect(pending).rejects.toThrow('boom');
  });

  it('stops waiting when the signal aborts; the call runs on in the gateway (its record answers the next owner)', async () => {
    const gw = gateway();
    const stop = new AbortController();
    const pending = new DirectToolClient(gw).call(call, { signal: stop.signal });
    stop.abort(new Error('draining'));
    await expect(pending).rejects.toMatchObject({ name: 'AbortError', message: `tool call ${call.key}: stopped waiting (aborted)` });
    // The gateway's late answer is nobody's unhandled rejection.
    gw.answer(ok);
  });

  it('gives up after timeoutMs with a retryable error that names the call', async () => {
    const gw = gateway();
    const pending = new DirectToolClient(gw).call(call, { timeoutMs: 20 });
    await expect(pending).rejects.toMatchObject({
      code: 'retryable',
      message: `the tool call ${call.key} (demo__get_pods) did not finish within 20 ms`,
    });
    gw.fail(new Error('late'));
  });
});
