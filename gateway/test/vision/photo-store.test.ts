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
      const a = new PhotoStore(dir, { perDevice: 2, total: 3 });
      for (const q of ['a1', 'a2', 'a3']) a.save('02:00:00:00:00:0a', JPEG, { mimeType: 'image/jpeg', question: q });
      for (const q of ['b1', 'b2']) a.save('02:00:00:00:00:0b', JPEG, { mimeType: 'image/jpeg', question: q });
      expect(a.list('02:00:00:00:00:0a').map((p) => p.question)).toEqual(['a3']);
      expect(a.list('02:00:00:00:00:0b').map((p) => p.question)).toEqual(['b2', 'b1']);
      const b = new PhotoStore(dir, { perDevice: 1, total: 3 });
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
      const store = new PhotoStore(dir, { perDevice: 5, total: 6 }, (id) => (id === acme ? 'acme' : undefined));
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
});
