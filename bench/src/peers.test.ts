import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { peersInstalled } from './peers/load.js';
import {
  KILL_TOOL,
  STANDARD_CALLS,
  checkOutcome,
  effectsPerKey,
  fakeDecision,
  killCalls,
  parseIncidentText,
  peerIncident,
} from './peers/plan.js';
import { OFFLINE_HOSTS, OFFLINE_RESOLV_CONF, fakeRestateModel, offlineCommand, restateConfig } from './peers/restate.js';

// The parts of the peer scenarios (bench/src/peers) that run without the peers installed.

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'bosun-peers-test-'));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('the fake model plan of the peers', () => {
  it('calls the planned tools in order, one per turn, then answers', () => {
    const incident = peerIncident('i1');
    expect(fakeDecision(incident, 0)).toEqual({ call: STANDARD_CALLS[0] });
    expect(fakeDecision(incident, 1)).toEqual({ call: STANDARD_CALLS[1] });
    expect(fakeDecision(incident, 2)).toEqual({ answer: 'Summary: checked get_pods, get_deployments for checkout.' });
  });

  it('reads the incident back from the first message and refuses what is not one, saying why', () => {
    const incident = peerIncident('k1', killCalls('k1'));
    expect(parseIncidentText(JSON.stringify(incident))).toEqual(incident);
    expect(() => parseIncidentText('hello')).toThrow(/not JSON/);
    expect(() => parseIncidentText('{"payload":{}}')).toThrow(/payload\.fake\.calls/);
  });

  it("Restate's fake model decides from the conversation it is given", () => {
    const incident = peerIncident('r1');
    const user = { role: 'user' as const, content: JSON.stringify(incident) };
    expect(fakeRestateModel([user])).toEqual({ call: STANDARD_CALLS[0] });
    const tool = { role: 'tool' as const, name: 'get_pods', content: {} };
    expect(fakeRestateModel([user, { role: 'assistant', content: '' }, tool, tool])).toHaveProperty('answer');
  });

  it('checks an outcome: the planned calls in order and an answer, else an error naming the run', () => {
    const incident = peerIncident('c1');
    const good = { answer: 'Summary: checked', toolCalls: ['get_pods', 'get_deployments'] };
    expect(checkOutcome('c1', incident, good)).toBe(good);
    expect(() => checkOutcome('c1', incident, { ...good, toolCalls: ['get_pods'] })).toThrow(/run c1 made the calls \[get_pods\]/);
    expect(() => checkOutcome('c1', incident, { ...good, toolCalls: ['get_pods', 'get_pods', 'get_deployments'] })).toThrow(
      /not the planned/,
    );
    expect(() => checkOutcome('c1', incident, { ...good, answer: '' })).toThrow(/without the final answer/);
  });
});

describe('effects per key, from the demo server call log', () => {
  it('counts the mutating tool per reason, ignores other tools and a line cut short by a kill, and counts 0 for keys never seen', () => {
    const line = (tool: string, args: Record<string, unknown>) => JSON.stringify({ tool, args, pid: 1, at: 'now' });
    const log = [
      line('get_pods', { service: 'checkout' }),
      line(KILL_TOOL, { service: 'checkout', pod: 'p', reason: 'a' }),
      line(KILL_TOOL, { service: 'checkout', pod: 'p', reason: 'b' }),
      line(KILL_TOOL, { service: 'checkout', pod: 'p', reason: 'a' }),
      line(KILL_TOOL, { service: 'checkout', pod: 'p', reason: 'other-run' }),
      '{"tool":"restart_pod","args":{"reas',
    ].join('\n');
    expect(Object.fromEntries(effectsPerKey(log, ['a', 'b', 'c']))).toEqual({ a: 2, b: 1, c: 0 });
  });
});

describe('the Restate server without the network', () => {
  it('configures loopback ports, its data in the temp folder, telemetry off; fsync off only when asked', () => {
    const on = restateConfig({ dir: '/tmp/x', ingressPort: 18080, adminPort: 19070, fsync: true });
    expect(on).toContain('bind-address = "127.0.0.1:18080"');
    expect(on).toContain('bind-address = "127.0.0.1:19070"');
    expect(on).toContain('base-dir = "/tmp/x/data"');
    expect(on).toContain('disable-telemetry = true');
    expect(on).not.toContain('fsync');
    expect(restateConfig({ dir: '/tmp/x', ingressPort: 1, adminPort: 2, fsync: false })).toContain('rocksdb-disable-wal-fsync = true');
  });

  it.skipIf(process.getuid?.() !== 0)(
    'runs the program in a mount namespace where names resolve on the loopback only, leaving the machine files as they are',
    () => {
      const before = readFileSync('/etc/resolv.conf', 'utf8');
      const { command, args } = offlineCommand(tempDir(), ['cat', '/etc/resolv.conf', '/etc/hosts']);
      const inside = execFileSync(command, args, { encoding: 'utf8' });
      expect(inside).toBe(OFFLINE_RESOLV_CONF + OFFLINE_HOSTS);
      expect(inside).toMatch(/^127\.0\.0\.1 api\.github\.com$/m);
      expect(readFileSync('/etc/resolv.conf', 'utf8')).toBe(before);
    },
  );
});

describe('whether bench/peers is installed', () => {
  function root(lock: Record<string, unknown>, installed?: Record<string, unknown>): string {
    const r = tempDir();
    mkdirSync(join(r, 'bench/peers/node_modules'), { recursive: true });
    writeFileSync(join(r, 'bench/peers/package-lock.json'), JSON.stringify({ packages: lock }));
    if (installed) writeFileSync(join(r, 'bench/peers/node_modules/.package-lock.json'), JSON.stringify({ packages: installed }));
    return r;
  }
  const lock = {
    '': { name: 'x' },
    'node_modules/pg': { version: '8.23.1' },
    'node_modules/@restatedev/restate-server-darwin-arm64': { version: '1.7.12', optional: true },
  };

  it('is when every package of the lockfile is there at its version (optional ones of other platforms aside)', () => {
    expect(peersInstalled(root(lock, { 'node_modules/pg': { version: '8.23.1' } }))).toBe(true);
  });

  it('is not when nothing was installed, a package is missing or at another version', () => {
    expect(peersInstalled(root(lock))).toBe(false);
    expect(peersInstalled(root(lock, {}))).toBe(false);
    expect(peersInstalled(root(lock, { 'node_modules/pg': { version: '8.0.0' } }))).toBe(false);
  });

  it('refuses a folder without its lockfile', () => {
    const r = tempDir();
    expect(() => peersInstalled(r)).toThrow(/package-lock\.json is missing/);
  });
});
