import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ENTRY, ROOT } from './paths.js';

/** The newest modification time of the compiled `.js` files under `dir`, bundles left out. */
function newestCompiled(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== 'bundle') newest = Math.max(newest, newestCompiled(path));
    } else if (entry.name.endsWith('.js')) newest = Math.max(newest, statSync(path).mtimeMs);
  }
  return newest;
}

/** The `dist` folders of every workspace package: what the bundles are made from. */
function distFolders(): string[] {
  const workspaces = ['libs', 'services', 'mcp-servers'].flatMap((group) =>
    readdirSync(join(ROOT, group), { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => join(ROOT, group, d.name, 'dist')),
  );
  return [...workspaces, join(ROOT, 'cli/dist')].filter((d) => {
    try {
      return statSync(d).isDirectory();
    } catch {
      return false; // a package not built (or with nothing to build) has no dist
    }
  });
}

/**
 * Why the processes the tests start would not run the code under test, or undefined: a bundle
 * missing, or older than a compiled file (`tsc -b` run without `npm run build`). The tests run
 * the bundles, as the services' commands do (scripts/bundle.mjs).
 */
export function staleBundles(): string | undefined {
  const bundles = Object.entries(ENTRY)
    .filter(([, path]) => path.includes('/dist/bundle/'))
    .map(([name, path]) => {
      try {
        return { name, mtime: statSync(path).mtimeMs };
      } catch {
        return { name, mtime: -1 };
      }
    });
  const missing = bundles.filter((b) => b.mtime < 0).map((b) => b.name);
  if (missing.length > 0) return `no bundle for ${missing.join(', ')}: run \`npm run build\``;
  const compiled = Math.max(...distFolders().map(newestCompiled));
  const oldest = Math.min(...bundles.map((b) => b.mtime));
  if (oldest < compiled) return 'the bundles are older than the compiled files (tsc -b ran alone): run `npm run build`';
  return undefined;
}

let checked = false;

/**
 * Throws {@link staleBundles}'s reason, if any: called before a test starts a process (once per
 * test process), so that a test never passes or fails on code older than the code under test.
 */
export function assertFreshBundles(): void {
  if (checked) return;
  const stale = staleBundles();
  if (stale) throw new Error(stale);
  checked = true;
}
