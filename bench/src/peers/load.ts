/**
 * The durable peers (LangGraph.js, Restate) live in `bench/peers/`, a folder with its own
 * package.json and lockfile, outside the workspace: the root `npm ci` never installs them. The
 * bench installs that folder when a peer scenario runs, and loads the packages from it at run
 * time; their types are not needed to build (see api.ts).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { note } from '../util.js';

/** The peers' folder under the repository root. */
export function peersDir(root: string): string {
  return join(root, 'bench', 'peers');
}

interface Lockfile {
  packages?: Record<string, { version?: string; optional?: boolean }>;
}

function readLock(path: string): Lockfile | undefined {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as Lockfile;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`${path} is not a readable lockfile: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * Whether `bench/peers/node_modules` holds exactly what the folder's lockfile pins: npm's hidden
 * lockfile (`node_modules/.package-lock.json`) lists every installed package with its version.
 */
export function peersInstalled(root: string): boolean {
  const dir = peersDir(root);
  const want = readLock(join(dir, 'package-lock.json'));
  if (!want?.packages) throw new Error(`${dir}/package-lock.json is missing: the peers' lockfile is part of the repository`);
  const have = readLock(join(dir, 'node_modules', '.package-lock.json'))?.packages;
  if (!have) return false;
  for (const [path, p] of Object.entries(want.packages)) {
    if (path === '') continue;
    const installed = have[path];
    // Optional platform packages of other systems (the Restate server for darwin…) are never installed.
    if (!installed) {
      if (p.optional) continue;
      return false;
    }
    if (installed.version !== p.version) return false;
  }
  return true;
}

/**
 * Installs the peers' folder from its lockfile unless it is installed already:
 * `npm ci --prefix bench/peers --ignore-scripts` (no install script runs: the Restate server
 * binary comes in a platform package, and @scarf/scarf's analytics script is one not to run).
 */
export function ensurePeers(root: string): void {
  if (peersInstalled(root)) return;
  note('peers: npm ci --prefix bench/peers --ignore-scripts (LangGraph.js, Restate; once)');
  execFileSync('npm', ['ci', '--prefix', peersDir(root), '--ignore-scripts', '--no-audit', '--no-fund'], {
    cwd: root,
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, SCARF_ANALYTICS: 'false' },
  });
  if (!peersInstalled(root)) throw new Error('npm ci in bench/peers finished but the installed packages do not match its lockfile');
}

/**
 * Loads a package (or a subpath export) from the peers' folder. Packages are loaded through
 * their CommonJS builds (`require` resolved from bench/peers), all of them, so that one copy of
 * each (@langchain/core above all) is shared between them.
 */
export function peerModule<T>(root: string, specifier: string): T {
  const require = createRequire(join(peersDir(root), 'package.json'));
  try {
    return require(specifier) as T;
  } catch (err) {
    throw new Error(`cannot load ${specifier} from bench/peers (${(err as Error).message}); run npm ci --prefix bench/peers`, {
      cause: err,
    });
  }
}

/** The installed version of a package of the peers' folder. */
export function peerVersion(root: string, name: string): string {
  try {
    const pkg = JSON.parse(readFileSync(join(peersDir(root), 'node_modules', name, 'package.json'), 'utf8')) as { version?: string };
    return pkg.version ?? '?';
  } catch {
    return 'not installed';
  }
}

/** The absolute path of a file of a package of the peers' folder (`require.resolve` from bench/peers). */
export function peerResolve(root: string, specifier: string): string {
  const require = createRequire(join(peersDir(root), 'package.json'));
  try {
    return require.resolve(specifier);
  } catch (err) {
    throw new Error(`cannot find ${specifier} in bench/peers (${(err as Error).message}); run npm ci --prefix bench/peers`, {
      cause: err,
    });
  }
}
