import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProcessGroup, launchProcess, type ServiceProcess } from './launcher.js';
import { READY_LINE, readyLine } from './service.js';

// The process launcher with small Node scripts standing in for services.

let dir: string;
const script = (name: string, body: string): string => {
  const file = join(dir, `${name}.mjs`);
  writeFileSync(file, body);
  return file;
};
const started: ServiceProcess[] = [];
const launch = (name: string, body: string, more: { keepLines?: number; onKill?: () => void } = {}) => {
  const p = launchProcess({ name, script: script(name, body), env: { PATH: process.env.PATH }, ...more });
  started.push(p);
  return p;
};

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'bosun-launcher-'));
});
afterAll(() => {
  for (const p of started) p.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/** Keeps the process alive until SIGTERM, then exits 0 (or never, with `ignore`). */
const SERVICE = (service: string, ignoreTerm = false) => `
process.stdout.write('starting\\n');
setTimeout(() => process.stdout.write(JSON.stringify({ bosun: 'ready', service: ${JSON.stringify(service)}, pid: process.pid }) + '\\n'), 100);
process.on('SIGTERM', () => { process.stdout.write('got SIGTERM\\n'); ${ignoreTerm ? '' : 'process.exit(0);'} });
setInterval(() => undefined, 1000);
`;

describe('launchProcess', () => {
  it("waits for a service's documented ready line, its own service's when named", async () => {
    const p = launch('svc', SERVICE('coordinator'));
    await expect(p.ready({ service: 'specialist', timeoutMs: 1_000 })).rejects.toMatchObject({ code: 'process_timeout' });
    await p.ready({ service: 'coordinator', timeoutMs: 10_000 });
    const line = p.lines.find((l) => READY_LINE.test(l))!;
    expect(line).toBe(readyLine('coordinator', p.pid));
    expect(p.running).toBe(true);
    expect(await p.stop(5_000)).toEqual({ code: 0, signal: null });
    expect(p.lines).toEqual(['starting', line, 'got SIGTERM']);
    expect(p.running).toBe(false);
  });

  it('reads stdout and stderr line by line, whatever the chunks, and keeps a last line without a newline', async () => {
    const p = launch(
      'chunks',
      `process.stdout.write('a'); setTimeout(() => process.stdout.write('b\\nc\\r\\nd'), 50);
       process.stderr.write('err 1\\n'); setTimeout(() => process.exit(3), 150);`,
    );
    const seen: string[] = [];
    p.onLine((l) => seen.push(l));
    expect(await p.exited).toEqual({ code: 3, signal: null });
    expect([...p.lines].sort()).toEqual(['ab', 'c', 'd', 'err 1']);
    expect(seen.filter((l) => l !== 'err 1')).toEqual(['ab', 'c', 'd']);
  });

  it('finds a line already printed, and rejects naming the process and its last lines when it exits first', async () => {
    const p = launch('early', `console.log('hello'); console.log('bye'); process.exit(2);`);
    expect(await p.waitForLine(/^hel/, 5_000)).toBe('hello');
    const err = (await p.waitForLine(/never/, 5_000).catch((e: unknown) => e)) as Error & { code: string };
    expect(err.code).toBe('process_exited');
    expect(err.message).toMatch(
      /^early exited \(code 2, signal null\) before printing a line matching \/never\/\. Last lines:\nhello\nbye$/,
    );
    await expect(p.ready({ timeoutMs: 5_000 })).rejects.toThrow(/before printing its ready line/);
  });

  it('sends SIGKILL when SIGTERM is not enough within the grace period, and says so', async () => {
    let killed = 0;
    const p = launch('stubborn', SERVICE('tool-gateway', true), { onKill: () => killed++ });
    await p.ready({ timeoutMs: 10_000 });
    const t0 = Date.now();
    expect(await p.stop(300)).toEqual({ code: null, signal: 'SIGKILL' });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(300);
    expect(killed).toBe(1);
    expect(p.lines).toContain('got SIGTERM');
  });

  it('keeps only the last keepLines lines', async () => {
    const p = launch('many', `for (let i = 0; i < 50; i++) console.log('line ' + i);`, { keepLines: 3 });
    await p.exited;
    expect(p.lines).toEqual(['line 47', 'line 48', 'line 49']);
  });
});

describe('ProcessGroup', () => {
  it('stops every process it started, and forgets those that have ended', async () => {
    const group = new ProcessGroup();
    const a = group.launch({ name: 'a', script: script('ga', SERVICE('coordinator')), env: { PATH: process.env.PATH } });
    const b = group.launch({ name: 'b', script: script('gb', `process.exit(0);`), env: { PATH: process.env.PATH } });
    started.push(a, b);
    await b.exited;
    await a.ready({ timeoutMs: 10_000 });
    expect(group.running).toEqual([a]);
    expect(await group.stopAll(5_000)).toEqual([{ code: 0, signal: null }]);
    expect(group.running).toEqual([]);
  });

  it('kills every process still running at once (what it does at exit with killOnExit)', async () => {
    const group = new ProcessGroup();
    const ps = ['k1', 'k2'].map((n) =>
      group.launch({ name: n, script: script(n, SERVICE('specialist', true)), env: { PATH: process.env.PATH } }),
    );
    started.push(...ps);
    await Promise.all(ps.map((p) => p.ready({ timeoutMs: 10_000 })));
    group.killAll();
    expect(await Promise.all(ps.map((p) => p.exited))).toEqual([
      { code: null, signal: 'SIGKILL' },
      { code: null, signal: 'SIGKILL' },
    ]);
  });
});
