/**
 * Devices the gateway refused at connect (no token, a bad signature, ...), so an operator can see a fleet
 * stranded by a move from `open` to `hmac`: the firmware redials its stored URL without credentials and
 * asks OTA only at boot, so nothing else would show it. Bounded: the `max` most recently refused ids.
 * `record` says when a refusal is due a log line: at most once per id per `logIntervalMs`.
 */
export interface RefusedDevice {
  deviceId: string;
  clientId: string;
  transport: 'websocket' | 'mqtt';
  reason: string;
  count: number;
  firstAt: number;
  lastAt: number;
  remoteAddress: string;
}

export interface RefusedDevicesOptions {
  max?: number;
  logIntervalMs?: number;
  now?: () => number;
}

export class RefusedDevices {
  private readonly byId = new Map<string, RefusedDevice & { loggedAt: number; unlogged: number }>();
  private readonly max: number;
  private readonly logIntervalMs: number;
  private readonly now: () => number;

  constructor(o: RefusedDevicesOptions = {}) {
    this.max = o.max ?? 256;
    this.logIntervalMs = o.logIntervalMs ?? 60_000;
    this.now = o.now ?? Date.now;
  }

  /**
   * Counts a refusal. Returns the fields for a log line when one is due for this device (its first refusal,
   * then at most one per `logIntervalMs`, with the refusals it sums up), undefined otherwise.
   */
  record(r: Pick<RefusedDevice, 'deviceId' | 'clientId' | 'transport' | 'reason' | 'remoteAddress'>): { refusals: number; total: number } | undefined {
    const now = this.now();
    const known = this.byId.get(r.deviceId);
    // Least recently refused first out: re-inserting keeps the map in refusal order.
    this.byId.delete(r.deviceId);
    const e = known
      ? { ...known, ...r, count: known.count + 1, lastAt: now, unlogged: known.unlogged + 1 }
      : { ...r, count: 1, firstAt: now, lastAt: now, loggedAt: -Infinity, unlogged: 1 };
    this.byId.set(r.deviceId, e);
    if (this.byId.size > this.max) this.byId.delete(this.byId.keys().next().value!);
    if (now - e.loggedAt < this.logIntervalMs) return undefined;
    const due = { refusals: e.unlogged, total: e.count };
    e.loggedAt = now;
    e.unlogged = 0;
    return due;
  }

  /** The device got in: it is no longer stranded. */
  forget(deviceId: string): void {
    this.byId.delete(deviceId);
  }

  /** Most recently refused first. */
  list(): RefusedDevice[] {
    return [...this.byId.values()].reverse().map(({ loggedAt: _l, unlogged: _u, ...d }) => d);
  }
}
