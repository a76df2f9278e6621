#!/usr/bin/env node
/*
 * Bundles each process's entry point (after `tsc -b`) into `<package>/dist/bundle/main.js`, the
 * file every start script, manifest, test and the demo run. Why: a process start spent most of its
 * CPU resolving and instantiating modules one file at a time (BullMQ alone: 0.30 s of CPU as its
 * files, 0.08 s bundled), and the tests start about a thousand processes. Measured on the
 * development machine: `bosun --help` 0.58 → 0.28 s of CPU, a coordinator until ready 0.90 → 0.50 s
 * (docs/testing.md, "Why the processes run bundles").
 *
 * What stays outside the bundle, loaded from node_modules at run time:
 * - `@bosun/sandbox`: its pool starts worker threads from its own `dist/thread.js` and loads a
 *   WebAssembly file by package path, so it must keep its files;
 * - the import() of a module named at run time (none today): resolved from the bundle's folder.
 * Dynamic imports of fixed names (the model providers' SDKs, the OpenTelemetry SDK, the demo)
 * become chunks of their own in dist/bundle, loaded at their first use as before.
 *
 * Usage: node scripts/bundle.mjs   (run by `npm run build`, after `tsc -b`)
 */
import { existsSync, rmSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** The processes: each `dist/<entry>` becomes `dist/bundle/<name>.js`. */
const ENTRIES = [
  { pkg: 'services/coordinator', entries: { main: 'main.js' } },
  { pkg: 'services/specialist', entries: { main: 'main.js' } },
  { pkg: 'services/tool-gateway', entries: { main: 'main.js' } },
  { pkg: 'services/intake', entries: { main: 'main.js' } },
  { pkg: 'services/a2a', entries: { main: 'main.js' } },
  { pkg: 'mcp-servers/demo', entries: { main: 'main.js' } },
  // The CLI and the console share one folder (and their chunks).
  { pkg: 'cli', entries: { main: 'main.js', console: 'console/main.js' } },
];

/** ESM bundles of CommonJS packages call `require` for Node's own modules: give them one. */
const REQUIRE_BANNER = "import { createRequire as __bosunRequire } from 'node:module'; const require = __bosunRequire(import.meta.url);";

async function bundle({ pkg, entries }) {
  const dist = join(root, pkg, 'dist');
  const missing = Object.values(entries).filter((file) => !existsSync(join(dist, file)));
  if (missing.length > 0) throw new Error(`${pkg}: ${missing.map((f) => `dist/${f}`).join(', ')} missing: run \`tsc -b\` first`);
  const outdir = join(dist, 'bundle');
  rmSync(outdir, { recursive: true, force: true });
  await build({
    entryPoints: Object.fromEntries(Object.entries(entries).map(([name, file]) => [name, join(dist, file)])),
    outdir,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20.19',
    // Class and function names stay as written: errors and logs print them, and code checks `name`.
    keepNames: true,
    external: ['@bosun/sandbox'],
    banner: { js: REQUIRE_BANNER },
    logLevel: 'warning',
  });
  return relative(root, outdir);
}

const started = Date.now();
const done = await Promise.all(ENTRIES.map(bundle));
process.stdout.write(`bundled ${done.length} packages (${done.join(', ')}) in ${Date.now() - started} ms\n`);
