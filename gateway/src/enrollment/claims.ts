import { sourceKey } from '../throttle/source-key.js';
import type { Claim } from './records.js';

interface Expiry {
  at: number;
  code: string;
}

/**
 * The codes waiting for an operator, in memory, indexed so an OTA check costs the codes of its own device id and
 * source, not a scan of every claim: anyone may send checks, and maxPending may be 100 000 (each check scanned them all).
 * Every change goes through `set` and `delete`, local or heard from another instance, so the indexes follow the codes.
 */
export class Claims {
  private readonly byCode = new Map<string, Claim>();
  /** Device id → source → codes: what one source holds for one id, and every code of an id. */
  private readonly byDevice = new Map<string, Map<string, Set<string>>>();
  /** The code of each (device id, client id): the same code on every retry. */
  private readonly byClient = new Map<string, string>();
  /** Codes held per source (throttle/source-key.ts), any id. */
  private readonly perSource = new Map<string, number>();
  /** A binary min-heap of expiries; an entry whose claim was refreshed or deleted since is dropped when it reaches the top. */
  private expiries: Expiry[] = [];

  get size(): number {
    return this.byCode.size;
  }

  get(code: string): Claim | undefined {
    return this.byCode.get(code);
  }

  values(): IterableIterator<Claim> {
    return this.byCode.values();
  }

  /** The claim of this device id and client id, if any. */
  ofClient(deviceId: string, clientId: string): Claim | undefined {
    const code = this.byClient.get(clientKey(deviceId, clientId));
    return code === undefined ? undefined : this.byCode.get(code);
  }

  /** Every code waiting for this device id, whichever source asked. */
  ofDevice(deviceId: string): Claim[] {
    const out: Claim[] = [];
    for (const codes of this.byDevice.get(deviceId)?.values() ?? []) for (const code of codes) out.push(this.byCode.get(code)!);
    return out;
  }

  /** The codes one source holds for one device id, oldest first. */
  ofDeviceFrom(deviceId: string, source: string): Claim[] {
    const codes = this.byDevice.get(deviceId)?.get(source) ?? [];
    return [...codes].map((code) => this.byCode.get(code)!).sort((a, b) => a.createdAt - b.createdAt);
  }

  /** Codes one source holds, for any id. */
  heldBy(source: string): number {
    return this.perSource.get(source) ?? 0;
  }

  set(claim: Claim): void {
    const old = this.byCode.get(claim.code);
    if (old) this.unindex(old);
    this.byCode.set(claim.code, claim);
    this.index(claim);
    if (old?.expiresAt !== claim.expiresAt) this.pushExpiry({ at: claim.expiresAt, code: claim.code });
  }

  delete(code: string): boolean {
    const old = this.byCode.get(code);
    if (!old) return false;
    this.unindex(old);
    this.byCode.delete(code);
    return true;
  }

  /** The claim that expired first by `now`, if any; it stays until deleted (the store goes first). */
  firstExpired(now: number): Claim | undefined {
    for (let top = this.expiries[0]; top && top.at <= now; top = this.expiries[0]) {
      const c = this.byCode.get(top.code);
      if (c?.expiresAt === top.at) return c;
      this.popExpiry();
    }
    return undefined;
  }

  private index(c: Claim): void {
    const source = sourceKey(c.remoteAddress);
    let sources = this.byDevice.get(c.deviceId);
    if (!sources) this.byDevice.set(c.deviceId, (sources = new Map()));
    let codes = sources.get(source);
    if (!codes) sources.set(source, (codes = new Set()));
    codes.add(c.code);
    this.byClient.set(clientKey(c.deviceId, c.clientId), c.code);
    this.perSource.set(source, (this.perSource.get(source) ?? 0) + 1);
  }

  private unindex(c: Claim): void {
    const source = sourceKey(c.remoteAddress);
    const sources = this.byDevice.get(c.deviceId);
    const codes = sources?.get(source);
    codes?.delete(c.code);
    if (codes?.size === 0) sources!.delete(source);
    if (sources?.size === 0) this.byDevice.delete(c.deviceId);
    // Two instances may have claimed one (id, client) at once: only this code's entry goes.
    const key = clientKey(c.deviceId, c.clientId);
    if (this.byClient.get(key) === c.code) this.byClient.delete(key);
    const held = (this.perSource.get(source) ?? 1) - 1;
    if (held > 0) this.perSource.set(source, held);
    else this.perSource.delete(source);
  }

  private pushExpiry(e: Expiry): void {
    // Each refresh leaves a stale entry until its time comes: past twice the claims, the heap is built again from them.
    if (this.expiries.length > 2 * this.byCode.size + 64) return this.rebuildExpiries();
    const h = this.expiries;
    h.push(e);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (h[parent]!.at <= h[i]!.at) return;
      [h[parent], h[i]] = [h[i]!, h[parent]!];
      i = parent;
    }
  }

  private popExpiry(): void {
    const h = this.expiries;
    const last = h.pop()!;
    if (h.length === 0) return;
    h[0] = last;
    let i = 0;
    for (;;) {
      let least = i;
      for (const child of [2 * i + 1, 2 * i + 2]) if (child < h.length && h[child]!.at < h[least]!.at) least = child;
      if (least === i) return;
      [h[least], h[i]] = [h[i]!, h[least]!];
      i = least;
    }
  }

  /** Sorted by expiry, an array is a heap already. */
  private rebuildExpiries(): void {
    this.expiries = [...this.byCode.values()].map((c) => ({ at: c.expiresAt, code: c.code })).sort((a, b) => a.at - b.at);
  }
}

const clientKey = (deviceId: string, clientId: string) => `${deviceId}\n${clientId}`;
