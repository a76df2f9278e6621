import { readFileSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { configDefaults, defineConfig, type TestProjectInlineConfiguration } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

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

/**
 * The layers whose files share their worker processes (`isolate: false`): a worker runs one file
 * after another with the modules it has loaded (Bosun's packages, BullMQ, NATS) kept, instead of a
 * fresh process that imports them again for each file. That import was most of the unit layer's
 * CPU time: 216 s of CPU with a process per file, 59 s with shared workers (integration: 69 s and
 * 43 s). The files of these layers close what they open and leave process-wide state as they
 * found it; the ones that cannot are listed in {@link OWN_PROCESS}. The cluster layers keep a
 * process per file: there the services' own processes cost the CPU, and sharing saved 3 %.
 */
const SHARED_WORKERS = new Set(['unit', 'integration']);

/**
 * Test files that need a process of their own in a layer of {@link SHARED_WORKERS}: OpenTelemetry's
 * global tracer provider (`@bosun/transport` takes its tracer, and whether an SDK records, once
 * per process) and module mocks (`vi.mock`). They run in the layer's `-isolated` project, which
 * `npm run test:<layer>` runs as well.
 */
const OWN_PROCESS: Partial<Record<keyof typeof LAYERS, string[]>> = {
  unit: [
    'libs/transport/src/base/tracing.test.ts',
    'libs/otel/src/index.test.ts',
    'services/coordinator/src/run-trace.test.ts',
    'services/tool-gateway/src/gateway-spans.test.ts',
    'services/specialist/src/specialist.test.ts',
  ],
};

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

/**
 * Files known to be slow start first, so that the last file of a layer is a short one and no
 * worker waits idle at its end: a fresh clone has no vitest cache of past durations, and without
 * one vitest starts the largest files first, which puts `test/e2e/demo.test.ts` (132 lines, the
 * slowest file) near the end. `test/durations.json` holds seconds per file from a JSON-reporter
 * run (files under 3 s left out); the rest keep vitest's own order, after these.
 */
class SlowFirst extends BaseSequencer {
  private readonly seconds = JSON.parse(readFileSync(join(import.meta.dirname, 'test/durations.json'), 'utf8')) as Record<string, number>;

  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const known = (f: TestSpecification) => this.seconds[relative(import.meta.dirname, f.moduleId).replaceAll('\\', '/')] ?? 0;
    // Projects stay in vitest's order; within one, the slowest first (sort is stable: files of
    // equal weight keep vitest's order).
    const byProject = new Map<string, TestSpecification[]>();
    for (const f of await super.sort(files)) byProject.set(f.project.name, [...(byProject.get(f.project.name) ?? []), f]);
    return [...byProject.values()].flatMap((group) => group.sort((a, b) => known(b) - known(a)));
  }
}

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // 2-core machines: two files at a time keeps end-to-end clusters from starving each other.
    maxWorkers: 2,
    pool: 'forks',
    // Bosun's own packages, as built (`dist/`), load as Node loads them, not through Vite's
    // transform: the test files and the sources next to them are still transformed.
    server: { deps: { external: [/\/(libs|services|mcp-servers)\/[^/]+\/dist\//, /\/(cli|bench)\/dist\//] } },
    globalSetup: ['test/helpers/global-setup.ts'],
    setupFiles: ['test/helpers/setup.ts'],
    sequence: { sequencer: SlowFirst },
    projects: Object.entries(LAYERS).flatMap(([name, include]): TestProjectInlineConfiguration[] => {
      if (!SHARED_WORKERS.has(name)) return [{ extends: true, test: { name, include: [...include] } }];
      const own = OWN_PROCESS[name as keyof typeof LAYERS] ?? [];
      const shared: TestProjectInlineConfiguration = {
        extends: true,
        test: { name, include: [...include], exclude: [...configDefaults.exclude, ...own], isolate: false },
      };
      return own.length === 0 ? [shared] : [shared, { extends: true, test: { name: `${name}-isolated`, include: own } }];
    }),
  },
});
