import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/** docs/architecture.md's layout block must name the tree as it is, so a newcomer's map is never stale. */
const root = fileURLToPath(new URL('../../../', import.meta.url));
const doc = readFileSync(`${root}docs/architecture.md`, 'utf8');
const layout = /## Layout\n+```\n([\s\S]*?)```/.exec(doc)?.[1] ?? '';
const src = `${root}gateway/src`;
const named = new Set([...layout.matchAll(/([a-z][a-z0-9-]*(?:\.ts|\/))/g)].map((m) => m[1]!));

describe('docs/architecture.md matches gateway/src', () => {
  it('has a layout block', () => {
    expect(layout.length).toBeGreaterThan(200);
  });

  it('names every folder of gateway/src', () => {
    const folders = readdirSync(src, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => `${e.name}/`);
    expect(folders.filter((f) => !named.has(f))).toEqual([]);
  });

  it('names every root file of gateway/src', () => {
    const files = readdirSync(src).filter((f) => f.endsWith('.ts'));
    expect(files.filter((f) => !named.has(f))).toEqual([]);
  });

  it('names no folder that does not exist', () => {
    const folders = new Set(readdirSync(src, { withFileTypes: true }).map((e) => `${e.name}/`));
    const gatewayFolders = [...layout.matchAll(/^ {2}([a-z][a-z0-9-]*\/)/gm)].map((m) => m[1]!);
    expect(gatewayFolders.length).toBeGreaterThan(10);
    expect(gatewayFolders.filter((f) => !folders.has(f))).toEqual([]);
  });
});
