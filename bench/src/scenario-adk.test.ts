import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, vi } from 'vitest';
import type { LlmRequest } from '@google/adk';
import { ADK_PLAN, fakeTurn, startAdk } from './scenario-adk.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** A request with `contents` only: what the fake model reads. */
function request(contents: LlmRequest['contents']): LlmRequest {
  return { contents, liveConnectConfig: {}, toolsDict: {} };
}

/** This process's children that run the demo MCP server. */
function demoServers(): number[] {
  let pids: number[];
  try {
    pids = readFileSync(`/proc/${process.pid}/task/${process.pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
  return pids.filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('mcp-servers/demo/dist/bundle/main.js');
    } catch {
      return false; // ended meanwhile
    }
  });
}

describe('bench scenario 8: the fake ADK model', () => {
  it('calls the planned tools in order, from the history alone, then answers', () => {
    const user = { role: 'user', parts: [{ text: 'incident' }] };
    const first = fakeTurn(request([user]));
    expect(first.content?.parts?.[0]?.functionCall).toEqual({ name: 'get_pods', args: { service: 'checkout' } });
    const answered = (name: string) => ({ role: 'user', parts: [{ functionResponse: { name, response: { ok: true } } }] });
    const second = fakeTurn(request([user, answered('get_pods')]));
    expect(second.content?.parts?.[0]?.functionCall?.name).toBe('get_deployments');
    const last = fakeTurn(request([user, answered('get_pods'), answered('get_deployments')]));
    expect(last.content?.parts?.[0]?.functionCall).toBeUndefined();
    expect(last.content?.parts?.[0]?.text).toContain('get_pods, get_deployments');
  });

  it('runs the standard incident through ADK and the demo MCP server over one stdio session, and closes it', async () => {
    const h = await startAdk(root, 'session');
    try {
      for (const user of ['u1', 'u2']) {
        const r = await h.run(user);
        expect(r.toolCalls).toEqual(ADK_PLAN.map((c) => c.tool));
        expect(r.answer).toContain('Summary');
      }
      expect(demoServers()).toHaveLength(1);
    } finally {
      await h.close();
    }
    await vi.waitFor(() => expect(demoServers()).toHaveLength(0), { timeout: 10_000, interval: 50 });
  });
});
