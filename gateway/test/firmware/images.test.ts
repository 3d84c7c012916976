import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FirmwareImages, isSafeImageName } from '../../src/firmware/images.js';

const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

describe('isSafeImageName', () => {
  it('takes plain file names only: no separators, no leading dot, no "..", at most 128 characters', () => {
    for (const ok of ['fw-1.2.3.bin', 'a', 'Board_v2.bin', 'x'.repeat(128)]) expect([ok, isSafeImageName(ok)]).toEqual([ok, true]);
    for (const bad of ['', '.hidden', '../secrets.json', 'a/b.bin', 'a\\b.bin', 'fw..bin', 'x'.repeat(129), 'fw 1.bin', '-rf', 'fw%2f.bin'])
      expect([bad, isSafeImageName(bad)]).toEqual([bad, false]);
  });
});

describe('FirmwareImages', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'voxgate-fw-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('measures an image: its path, size and SHA-256', async () => {
    const body = Buffer.alloc(300_000, 7);
    writeFileSync(join(dir, 'fw.bin'), body);
    expect(await new FirmwareImages(dir).info('fw.bin')).toEqual({ path: join(dir, 'fw.bin'), size: body.length, sha256: sha(body) });
  });

  it('answers undefined for an unsafe name, a missing file or a directory', async () => {
    mkdirSync(join(dir, 'sub'));
    const images = new FirmwareImages(dir);
    expect(await images.info('../fw.bin')).toBeUndefined();
    expect(await images.info('missing.bin')).toBeUndefined();
    expect(await images.info('sub')).toBeUndefined();
  });

  it('hashes a file once for many readers, and again when it is replaced (write, then rename)', async () => {
    writeFileSync(join(dir, 'fw.bin'), 'version one');
    const images = new FirmwareImages(dir);
    const [a, b] = await Promise.all([images.info('fw.bin'), images.info('fw.bin')]);
    expect(a).toBe(b);
    expect(await images.info('fw.bin')).toBe(a); // cached
    writeFileSync(join(dir, 'fw.bin.tmp'), 'version two, longer');
    renameSync(join(dir, 'fw.bin.tmp'), join(dir, 'fw.bin'));
    expect((await images.info('fw.bin'))?.sha256).toBe(sha('version two, longer'));
  });

  it('keeps at most maxCached digests, forgetting the oldest', async () => {
    const images = new FirmwareImages(dir, 2);
    for (const n of ['a.bin', 'b.bin', 'c.bin']) writeFileSync(join(dir, n), n);
    const a = await images.info('a.bin');
    await images.info('b.bin');
    await images.info('c.bin');
    // a.bin was forgotten: measured again (a new object, the same digest).
    const again = await images.info('a.bin');
    expect(again).not.toBe(a);
    expect(again).toEqual(a);
  });
});
