import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PhotoStore } from '../../src/vision/photo-store.js';

// The smallest thing that starts like a JPEG (SOI + APP0 marker) and some bytes.
const JPEG = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.alloc(600, 7), Buffer.from([0xff, 0xd9])]);

describe('PhotoStore', () => {
  it('keeps at most perDevice per device and total in all, across a restart', () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxgate-photos-'));
    try {
      const a = new PhotoStore(dir, { perDevice: 2, total: 3, totalBytes: 1 << 20 });
      for (const q of ['a1', 'a2', 'a3']) a.save('02:00:00:00:00:0a', JPEG, { mimeType: 'image/jpeg', question: q });
      for (const q of ['b1', 'b2']) a.save('02:00:00:00:00:0b', JPEG, { mimeType: 'image/jpeg', question: q });
      expect(a.list('02:00:00:00:00:0a').map((p) => p.question)).toEqual(['a3']);
      expect(a.list('02:00:00:00:00:0b').map((p) => p.question)).toEqual(['b2', 'b1']);
      const b = new PhotoStore(dir, { perDevice: 1, total: 3, totalBytes: 1 << 20 });
      expect(b.list('02:00:00:00:00:0b').map((p) => p.question)).toEqual(['b2']);
      expect(b.read('02:00:00:00:00:0a', a.list('02:00:00:00:00:0a')[0]!.id)?.data.equals(JPEG)).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("past the total, the tenant holding the most gives up a photo: a flood from other devices does not push a tenant's photos out", () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxgate-photos-'));
    try {
      const acme = '02:00:00:00:00:a1';
      const store = new PhotoStore(dir, { perDevice: 5, total: 6, totalBytes: 1 << 20 }, (id) => (id === acme ? 'acme' : undefined));
      for (const q of ['acme-1', 'acme-2']) store.save(acme, JPEG, { mimeType: 'image/jpeg', question: q });
      // Devices without a tenant (anyone's, where enrollment is open) upload twenty photos.
      for (let i = 0; i < 20; i++)
        store.save(`02:00:00:00:01:${(i % 4).toString(16).padStart(2, '0')}`, JPEG, { mimeType: 'image/jpeg', question: `flood-${i}` });
      expect(store.list(acme).map((p) => p.question)).toEqual(['acme-2', 'acme-1']);
      const flood = [0, 1, 2, 3].flatMap((i) => store.list(`02:00:00:00:01:0${i}`));
      expect(flood).toHaveLength(4);
      // The flooding share kept its newest, one per device (the device holding the most gave one up each time).
      expect(flood.map((p) => p.question).sort()).toEqual(['flood-16', 'flood-17', 'flood-18', 'flood-19']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('past the bytes bound, the tenant holding the most bytes gives up its oldest; what is on disk is counted after a restart', () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxgate-photos-'));
    try {
      const acme = '02:00:00:00:00:a1';
      const tenantOf = (id: string) => (id === acme ? 'acme' : undefined);
      const big = Buffer.concat([JPEG, Buffer.alloc(2 * JPEG.length, 1)]);
      // Room for ten small photos' bytes; the count bound (1000) never bites.
      const limits = { perDevice: 100, total: 1000, totalBytes: 10 * JPEG.length };
      const a = new PhotoStore(dir, limits, tenantOf);
      for (const q of ['acme-1', 'acme-2']) a.save(acme, JPEG, { mimeType: 'image/jpeg', question: q });
      // Devices without a tenant upload photos three times the size, far past the bytes bound.
      for (let i = 0; i < 12; i++) a.save(`02:00:00:00:01:0${i % 3}`, big, { mimeType: 'image/jpeg', question: `flood-${i}` });
      expect(a.list(acme).map((p) => p.question)).toEqual(['acme-2', 'acme-1']);
      const flood = (s: PhotoStore) => [0, 1, 2].flatMap((i) => s.list(`02:00:00:00:01:0${i}`)).map((p) => p.question);
      // 2 small + 2 big = 8 small photos' bytes; a third big one would be 11.
      expect(flood(a).sort()).toEqual(['flood-10', 'flood-11']);

      // A restart with a tighter bound counts the files on disk and trims at once: the flood's share, the larger, goes first.
      const b = new PhotoStore(dir, { ...limits, totalBytes: 5 * JPEG.length }, tenantOf);
      expect(b.list(acme).map((p) => p.question)).toEqual(['acme-2', 'acme-1']);
      expect(flood(b)).toEqual(['flood-11']);
      // It did not forget what it kept: one more big photo (3 + 3 + 3 > 5) pushes the older flood photo out.
      b.save('02:00:00:00:01:00', big, { mimeType: 'image/jpeg', question: 'flood-12' });
      expect(flood(b)).toEqual(['flood-12']);
      expect(b.list(acme)).toHaveLength(2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
