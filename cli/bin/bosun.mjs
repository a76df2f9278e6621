#!/usr/bin/env node
// The program is dist/bundle/main.js (made by `npm run build`, which `npm start` and `npm test`
// run). This file exists before the build, so that npm links the `bosun` command at install time.
import { existsSync } from 'node:fs';

const main = new URL('../dist/bundle/main.js', import.meta.url);
if (!existsSync(main)) {
  process.stderr.write('bosun: not built yet: run `npm run build` in the repository first\n');
  process.exit(1);
}
await import(main.href);
