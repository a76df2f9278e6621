import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root. */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** Compiled entry points of the processes the tests start. */
export const ENTRY = {
  coordinator: resolve(ROOT, 'services/coordinator/dist/main.js'),
  specialist: resolve(ROOT, 'services/specialist/dist/main.js'),
  gateway: resolve(ROOT, 'services/tool-gateway/dist/main.js'),
  intake: resolve(ROOT, 'services/intake/dist/main.js'),
  a2a: resolve(ROOT, 'services/a2a/dist/main.js'),
  console: resolve(ROOT, 'cli/dist/console/main.js'),
  cli: resolve(ROOT, 'cli/dist/main.js'),
  demoMcp: resolve(ROOT, 'mcp-servers/demo/dist/main.js'),
  demoConfig: resolve(ROOT, 'infra/demo/bosun.yaml'),
};
