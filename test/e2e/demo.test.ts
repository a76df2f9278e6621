import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STALL_MARKER } from '@bosun/contract';
import { ENTRY, openContext, reap, type TestContext } from '../helpers/index.js';

// `npm start` runs `bosun demo`; with --once it exits after the sample incidents.

let ctx: TestContext;
beforeAll(async () => {
  ctx = await openContext('demo');
});
afterAll(async () => {
  await ctx?.close();
});

describe('npm start (bosun demo --once)', () => {
  it('starts the cluster as separate processes, shows events live, prints each result and exits 0', async () => {
    const child = reap(
      spawn(process.execPath, [ENTRY.cli, 'demo', '--once'], {
        env: { ...process.env, ...ctx.env, LOG_LEVEL: 'info' },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const code = await new Promise<number | null>((resolve) => {
      const t = setTimeout(() => child.kill('SIGKILL'), 120_000);
      child.on('exit', (c) => {
        clearTimeout(t);
        resolve(c);
      });
    });
    expect(code, out).toBe(0);
    expect(out).toContain('started: tool-gateway, coordinator, specialist-1, specialist-2 (separate processes)');
    expect(out).toContain('A2A server: agent card at http://127.0.0.1:8090/.well-known/agent-card.json');
    expect(out.match(/=== result of demo-\S+-crashloop .*: COMPLETED/)).not.toBeNull();
    expect(out.match(/=== result of demo-\S+-latency .*: COMPLETED/)).not.toBeNull();
    expect(out.match(/=== result of demo-\S+-errors .*: PARTIAL, 1 incomplete/)).not.toBeNull();
    expect(out).toContain(STALL_MARKER);
    // Events were shown as they arrived.
    expect(out).toMatch(/tool\.completed\s+database/);
    expect(out).toMatch(/agent\.stalled\s+database/);
  }, 150_000);
});
