import { defineConfig } from 'vitest/config';

// One config for the whole workspace. Unit tests sit next to the code (`*/src/**/*.test.ts`);
// integration, end-to-end, contract and chaos tests live in `test/`. Everything runs against
// compiled packages: `npm test` builds first.
export default defineConfig({
  test: {
    include: [
      'libs/*/src/**/*.test.ts',
      'services/*/src/**/*.test.ts',
      'mcp-servers/*/src/**/*.test.ts',
      'cli/src/**/*.test.ts',
      'bench/src/**/*.test.ts',
      'test/**/*.test.ts',
    ],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // 2-core machines: two files at a time keeps end-to-end clusters from starving each other.
    maxWorkers: 2,
    pool: 'forks',
    globalSetup: ['test/helpers/global-setup.ts'],
  },
});
