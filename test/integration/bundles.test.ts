/**
 * The bundles every command runs (`dist/bundle/`, scripts/bundle.mjs) behave as the compiled
 * files they are made from: the CLI answers the same, a service's `--check` reaches the same
 * verdict on the same config, and the staleness check that guards the tests says they are fresh.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { staleBundles } from '../helpers/bundles.js';
import { runEntry } from '../helpers/harness.js';
import { ENTRY, ROOT } from '../helpers/paths.js';

const compiled = (bundle: string) => bundle.replace('/dist/bundle/', '/dist/').replace('/bundle/console.js', '/console/main.js');
const ENV = { BOSUN_PREFIX: `bundles-${process.pid}`, BOSUN_CONFIG: ENTRY.demoConfig };

describe('the bundles', () => {
  it('are at least as new as every compiled file', () => {
    expect(staleBundles()).toBeUndefined();
  });

  it('bosun --help and an unknown command answer as the compiled CLI does', async () => {
    for (const args of [['--help'], ['frobnicate']]) {
      const [bundled, files] = await Promise.all([runEntry(ENTRY.cli, ENV, args), runEntry(compiled(ENTRY.cli), ENV, args)]);
      expect(bundled.stdout.length + bundled.stderr.length).toBeGreaterThan(0);
      expect({ code: bundled.code, stdout: bundled.stdout, stderr: bundled.stderr }).toEqual({
        code: files.code,
        stdout: files.stdout,
        stderr: files.stderr,
      });
    }
  });

  it('a service bundle finds the demo config it defaults to, and the demo MCP server bundle it names, as the compiled service does', async () => {
    const saved = process.env.BOSUN_CONFIG;
    delete process.env.BOSUN_CONFIG; // runEntry passes the test's environment on
    try {
      const env = { BOSUN_PREFIX: ENV.BOSUN_PREFIX };
      const [bundled, files] = await Promise.all([
        runEntry(ENTRY.gateway, env, ['--check']),
        runEntry(compiled(ENTRY.gateway), env, ['--check']),
      ]);
      expect(compiled(ENTRY.gateway)).toBe(join(ROOT, 'services/tool-gateway/dist/main.js'));
      const verdict = `config ${ENTRY.demoConfig}; Redis`;
      expect(bundled).toMatchObject({ code: 0, stdout: expect.stringContaining(verdict) as unknown });
      expect(bundled.stdout).toMatch(/MCP servers: demo \(\d+ tools\)/);
      expect(bundled.stdout).toBe(files.stdout);
    } finally {
      if (saved !== undefined) process.env.BOSUN_CONFIG = saved;
    }
  });
});
