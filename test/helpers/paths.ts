import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root. */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** Compiled entry points of the processes the tests start. */
export const ENTRY = {
  coordinator: resolve(ROOT, 'services/coordinator/dist/bundle/main.js'),
  specialist: resolve(ROOT, 'services/specialist/dist/bundle/main.js'),
  gateway: resolve(ROOT, 'services/tool-gateway/dist/bundle/main.js'),
  intake: resolve(ROOT, 'services/intake/dist/bundle/main.js'),
  a2a: resolve(ROOT, 'services/a2a/dist/bundle/main.js'),
  console: resolve(ROOT, 'cli/dist/bundle/console.js'),
  cli: resolve(ROOT, 'cli/dist/bundle/main.js'),
  demoMcp: resolve(ROOT, 'mcp-servers/demo/dist/bundle/main.js'),
  demoConfig: resolve(ROOT, 'infra/demo/bosun.yaml'),
};
