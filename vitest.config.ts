import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { defineConfig } from 'vitest/config';

// The suite in layers, cheapest first; `npm test` runs them in this order and stops at the first
// layer that fails (docs/testing.md). A test file lands in its layer by its path alone:
//
//   unit         next to the code (`*/src/**/*.test.ts`, also the bench's): in-memory ports, a few with real Redis
//   integration  test/integration: our libraries against real Redis and NATS, in the test process
//   service      test/service: one service process (or the CLI) against real Redis and NATS, no cluster
//   e2e          test/e2e, test/contract, test/cluster: whole clusters of separate processes
//   chaos        test/chaos: whole clusters whose processes, Redis or NATS the test kills
//
// Everything runs against compiled packages: `npm test` builds first.
const LAYERS = {
  unit: [
    'libs/*/src/**/*.test.ts',
    'services/*/src/**/*.test.ts',
    'mcp-servers/*/src/**/*.test.ts',
    'cli/src/**/*.test.ts',
    'bench/src/**/*.test.ts',
  ],
  integration: ['test/integration/**/*.test.ts'],
  service: ['test/service/**/*.test.ts'],
  e2e: ['test/e2e/**/*.test.ts', 'test/contract/**/*.test.ts', 'test/cluster/**/*.test.ts'],
  chaos: ['test/chaos/**/*.test.ts'],
} as const;

/** The folders whose test files some layer holds: a test file elsewhere would never run. */
const HOMES = [
  /^(libs|services|mcp-servers)\/[^/]+\/src\//,
  /^(cli|bench)\/src\//,
  /^test\/(integration|service|e2e|contract|cluster|chaos)\//,
];

function testFiles(dir: string, out: string[] = []): string[] {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name === 'dist' || entry.name.startsWith('.')) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) testFiles(path, out);
    else if (entry.name.endsWith('.test.ts')) out.push(relative(import.meta.dirname, path));
  }
  return out;
}

const stray = testFiles(import.meta.dirname).filter((f) => !HOMES.some((home) => home.test(f.replaceAll('\\', '/'))));
if (stray.length > 0) throw new Error(`test files outside every layer of vitest.config.ts (they would never run): ${stray.join(', ')}`);

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // 2-core machines: two files at a time keeps end-to-end clusters from starving each other.
    maxWorkers: 2,
    pool: 'forks',
    globalSetup: ['test/helpers/global-setup.ts'],
    setupFiles: ['test/helpers/setup.ts'],
    projects: Object.entries(LAYERS).map(([name, include]) => ({ extends: true, test: { name, include: [...include] } })),
  },
});
