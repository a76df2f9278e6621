import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The nearest folder, from the folder of `from` (a module's `import.meta.url`) upwards, that holds
 * `relativePath`. A module finds the files it ships beside (the demo config, the console's pages)
 * this way, not by a fixed number of `..`: the same code runs as compiled files
 * (`<package>/dist/x.js`) and inside a bundle (`<package>/dist/bundle/chunk-….js`,
 * scripts/bundle.mjs), one folder deeper.
 */
export function findUp(from: string | URL, relativePath: string): string {
  const start = dirname(fileURLToPath(from));
  for (let dir = start; ; dir = dirname(dir)) {
    if (existsSync(join(dir, relativePath))) return dir;
    if (dirname(dir) === dir) throw new Error(`no ${relativePath} in ${start} or any folder above it`);
  }
}
