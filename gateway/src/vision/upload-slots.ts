/** What one `take` says: a slot held (give it back with `release`), or why not. */
export type SlotTake = 'ok' | 'device_busy' | 'full';

/**
 * Uploads in flight, from the token check to the answer: each holds its photo in memory (up to
 * vision.maxPhotoBytes) while its body arrives (as slowly as the sender likes) and while the explainer
 * answers. The per-device rate limit bounds how many start, not how many are open at once.
 */
export class UploadSlots {
  private readonly byDevice = new Map<string, number>();
  private open = 0;

  constructor(private readonly limits: { total: number; perDevice: number }) {}

  take(deviceId: string): SlotTake {
    const mine = this.byDevice.get(deviceId) ?? 0;
    if (mine >= this.limits.perDevice) return 'device_busy';
    if (this.open >= this.limits.total) return 'full';
    this.byDevice.set(deviceId, mine + 1);
    this.open++;
    return 'ok';
  }

  release(deviceId: string): void {
    const mine = (this.byDevice.get(deviceId) ?? 1) - 1;
    if (mine <= 0) this.byDevice.delete(deviceId);
    else this.byDevice.set(deviceId, mine);
    this.open--;
  }

  get size(): number {
    return this.open;
  }
}
