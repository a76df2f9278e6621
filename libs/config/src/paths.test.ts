import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { findUp } from './paths.js';

describe('findUp', () => {
  const root = mkdtempSync(join(tmpdir(), 'bosun-findup-'));
  mkdirSync(join(root, 'infra/demo'), { recursive: true });
  writeFileSync(join(root, 'infra/demo/bosun.yaml'), '');
  mkdirSync(join(root, 'cli/dist/bundle'), { recursive: true });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('finds the folder holding the path from a compiled file and from a bundle one folder deeper', () => {
    expect(findUp(pathToFileURL(join(root, 'cli/dist/main.js')), 'infra/demo/bosun.yaml')).toBe(root);
    expect(findUp(pathToFileURL(join(root, 'cli/dist/bundle/chunk-1.js')).href, 'infra/demo/bosun.yaml')).toBe(root);
  });

  it('names the path and the starting folder when no folder above holds it', () => {
    expect(() => findUp(pathToFileURL(join(root, 'cli/dist/main.js')), 'no/such/file.yaml')).toThrow(
      `no no/such/file.yaml in ${join(root, 'cli/dist')} or any folder above it`,
    );
  });
});
