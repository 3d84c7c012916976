import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { TENANT_PATTERN } from '../config/fields.js';

export interface PhotoRecord {
  id: string;
  deviceId: string;
  at: string;
  bytes: number;
  mimeType: string;
  question: string;
  /**
   * The device's tenant when the photo came (absent: none, or a sidecar from before 2026-11-30): a tenant's key sees
   * only its tenant's photos, so a device moved to another tenant takes none of them along (vision/photo-routes.ts).
   */
  tenant?: string | undefined;
}

const PhotoMeta = z.object({
  id: z.string().regex(/^[0-9a-z]{1,40}$/),
  deviceId: z.string().max(64),
  at: z.string().max(64),
  bytes: z.number().int().min(0),
  mimeType: z.string().max(64),
  question: z.string().max(4096),
  tenant: z.string().regex(TENANT_PATTERN).optional(),
});

export interface PhotoStoreLimits {
  perDevice: number;
  total: number;
  /** Image bytes kept in all: `total` photos of up to `vision.maxPhotoBytes` each was 5 GB of disk by default. */
  totalBytes: number;
}

/** What a party holds, by which eviction picks: photos past `total`, image bytes past `totalBytes`. */
type Weight = (list: readonly PhotoRecord[]) => number;
const byCount: Weight = (list) => list.length;
const byBytes: Weight = (list) => list.reduce((sum, r) => sum + r.bytes, 0);

/**
 * The photos devices upload for vision, kept in `<dataDir>/photos/<device>/`: each image beside a small
 * JSON sidecar. Bounded: past `perDevice` a device's oldest photo goes; past `total` photos or `totalBytes`
 * image bytes in all, one of the party holding the most (see `evictable`).
 * The index lives in memory (rebuilt from the sidecars at start), so listing never touches the disk.
 */
export class PhotoStore {
  private readonly byDevice = new Map<string, PhotoRecord[]>();
  private count = 0;
  private bytes = 0;
  private seq = 0;

  constructor(
    private readonly dir: string,
    private readonly limits: PhotoStoreLimits,
    /** A device's tenant: past `total`, the tenant holding the most photos gives one up (devices without one are one share). */
    private readonly tenantOf: (deviceId: string) => string | undefined = () => undefined,
  ) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.load();
  }

  save(deviceId: string, data: Buffer, meta: { mimeType: string; question: string }): PhotoRecord {
    // Ids sort in arrival order (time, then a per-process counter), also after a restart.
    const id = `${Date.now().toString(36).padStart(9, '0')}${(this.seq++ % 36 ** 4).toString(36).padStart(4, '0')}${randomBytes(4).toString('hex')}`;
    const tenant = this.tenantOf(deviceId);
    const record: PhotoRecord = { id, deviceId, at: new Date().toISOString(), bytes: data.length, mimeType: meta.mimeType, question: meta.question };
    if (tenant !== undefined) record.tenant = tenant;
    const dir = this.deviceDir(deviceId);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    writeFileSync(join(dir, `${id}.img`), data, { mode: 0o600 });
    writeFileSync(join(dir, `${id}.json`), JSON.stringify(record), { mode: 0o600 });
    const list = this.byDevice.get(deviceId) ?? [];
    list.push(record);
    this.byDevice.set(deviceId, list);
    this.count++;
    this.bytes += record.bytes;
    this.trim();
    return record;
  }

  /** Newest first. */
  list(deviceId: string): PhotoRecord[] {
    return [...(this.byDevice.get(deviceId) ?? [])].reverse();
  }

  read(deviceId: string, id: string): { record: PhotoRecord; data: Buffer } | undefined {
    const record = this.byDevice.get(deviceId)?.find((r) => r.id === id);
    if (!record) return undefined;
    return { record, data: readFileSync(join(this.deviceDir(deviceId), `${id}.img`)) };
  }

  private deviceDir(deviceId: string): string {
    return join(this.dir, deviceId.replace(/[^0-9a-f]/g, ''));
  }

  /**
   * The photo that goes past `total`: the oldest of the device holding the most, within the tenant holding the most
   * (ties: the older photo). It was the oldest of all: one party's devices (any device, where enrollment is open)
   * uploading as fast as their rate limits let them pushed every other tenant's photos out.
   */
  private evictable(weight: Weight): PhotoRecord | undefined {
    const shares = new Map<string, number>();
    const held = new Map<string, number>();
    for (const [deviceId, list] of this.byDevice) {
      const share = this.tenantOf(deviceId) ?? '';
      held.set(deviceId, weight(list));
      shares.set(share, (shares.get(share) ?? 0) + held.get(deviceId)!);
    }
    let best: { photo: PhotoRecord; share: number; held: number } | undefined;
    for (const [deviceId, list] of this.byDevice) {
      const photo = list[0];
      if (!photo) continue;
      const share = shares.get(this.tenantOf(deviceId) ?? '')!;
      const h = held.get(deviceId)!;
      const better = !best || share > best.share || (share === best.share && (h > best.held || (h === best.held && photo.id < best.photo.id)));
      if (better) best = { photo, share, held: h };
    }
    return best?.photo;
  }

  /** Apply the bounds: a device's own count first, then the totals (photos, then bytes; by the same rule, weighed apart). */
  private trim(): void {
    for (const list of [...this.byDevice.values()]) while (list.length > this.limits.perDevice) this.remove(list[0]!);
    while (this.count > this.limits.total) this.remove(this.evictable(byCount)!);
    while (this.bytes > this.limits.totalBytes) this.remove(this.evictable(byBytes)!);
  }

  private remove(r: PhotoRecord): void {
    const list = this.byDevice.get(r.deviceId);
    const i = list?.indexOf(r) ?? -1;
    if (!list || i < 0) return;
    list.splice(i, 1);
    if (list.length === 0) this.byDevice.delete(r.deviceId);
    this.count--;
    this.bytes -= r.bytes;
    const dir = this.deviceDir(r.deviceId);
    rmSync(join(dir, `${r.id}.img`), { force: true });
    rmSync(join(dir, `${r.id}.json`), { force: true });
  }

  private load(): void {
    const all: PhotoRecord[] = [];
    for (const sub of readdirSync(this.dir, { withFileTypes: true })) {
      if (!sub.isDirectory()) continue;
      for (const f of readdirSync(join(this.dir, sub.name))) {
        if (!f.endsWith('.json')) continue;
        try {
          const meta = PhotoMeta.safeParse(JSON.parse(readFileSync(join(this.dir, sub.name, f), 'utf8')));
          // What the image takes on disk, not what its sidecar says, is what the byte bound counts.
          if (meta.success) all.push({ ...meta.data, bytes: statSync(join(this.dir, sub.name, `${meta.data.id}.img`)).size });
        } catch {
          // an unreadable sidecar is skipped; its image is left for the operator
        }
      }
    }
    all.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    for (const r of all) {
      const list = this.byDevice.get(r.deviceId) ?? [];
      list.push(r);
      this.byDevice.set(r.deviceId, list);
      this.count++;
      this.bytes += r.bytes;
    }
    this.trim();
  }
}
