import { sourceKey } from '../throttle/source-key.js';

/**
 * Devices the gateway refused at connect (no token, a bad signature, ...), so an operator can see a fleet
 * stranded by a move from `open` to `hmac`: the firmware redials its stored URL without credentials and
 * asks OTA only at boot, so nothing else would show it. Bounded: `max` ids; past it the source holding the most
 * (an IPv4 address, an IPv6 /64) gives up its least recently refused id. It was the least recently refused of
 * all, so refusals under random ids from one address pushed a real stranded device out of the list. No fixed
 * share per source: a fleet stranded behind one NAT (a school, an office) is one source, and is listed whole
 * while nobody else needs the room.
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
  private readonly byId = new Map<string, RefusedDevice & { loggedAt: number; unlogged: number; source: string }>();
  /** Each source's ids, least recently refused first (as in `byId`). */
  private readonly bySource = new Map<string, Set<string>>();
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
    const source = sourceKey(r.remoteAddress);
    // Least recently refused first out: re-inserting keeps the maps in refusal order.
    this.forget(r.deviceId);
    const e = known
      ? { ...known, ...r, source, count: known.count + 1, lastAt: now, unlogged: known.unlogged + 1 }
      : { ...r, source, count: 1, firstAt: now, lastAt: now, loggedAt: -Infinity, unlogged: 1 };
    this.byId.set(r.deviceId, e);
    const ids = this.bySource.get(source) ?? new Set<string>();
    ids.add(r.deviceId);
    this.bySource.set(source, ids);
    if (this.byId.size > this.max) this.forget(this.largestSource().values().next().value!);
    if (now - e.loggedAt < this.logIntervalMs) return undefined;
    const due = { refusals: e.unlogged, total: e.count };
    e.loggedAt = now;
    e.unlogged = 0;
    return due;
  }

  /** The device got in: it is no longer stranded. */
  forget(deviceId: string): void {
    const e = this.byId.get(deviceId);
    if (!e) return;
    this.byId.delete(deviceId);
    const ids = this.bySource.get(e.source);
    ids?.delete(deviceId);
    if (ids?.size === 0) this.bySource.delete(e.source);
  }

  /** The ids of the source holding the most (ties: the one whose oldest was refused first). */
  private largestSource(): Set<string> {
    let best: Set<string> | undefined;
    let bestOldest = Infinity;
    for (const ids of this.bySource.values()) {
      const oldest = this.byId.get(ids.values().next().value!)!.lastAt;
      if (!best || ids.size > best.size || (ids.size === best.size && oldest < bestOldest)) [best, bestOldest] = [ids, oldest];
    }
    return best!;
  }

  /** Most recently refused first. */
  list(): RefusedDevice[] {
    return [...this.byId.values()].reverse().map(({ loggedAt: _l, unlogged: _u, source: _s, ...d }) => d);
  }
}
