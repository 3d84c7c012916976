import { randomInt } from 'node:crypto';
import { DeadlineQueue } from '../throttle/deadline-queue.js';
import { sourceKey } from '../throttle/source-key.js';
import type { Claim } from './records.js';

/** A claim's expiry as queued: `deadline` is the claim's `expiresAt` when it was queued. */
interface Expiry {
  deadline: number;
  seq: number;
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
  /**
   * Every claim by (createdAt, code), oldest first: what `GET /v1/enrollments` pages through from its cursor. It was
   * sorted whole, filtered and answered whole at every call (red team 10).
   */
  private readonly ordered: Claim[] = [];
  /** Codes held per source (throttle/source-key.ts), any id, least recently set first. */
  private readonly bySource = new Map<string, Set<string>>();
  /** Sources by how many codes they hold, and the most any holds: the largest holder without a scan of every source. */
  private readonly byHeld = new Map<number, Set<string>>();
  private mostHeld = 0;
  /** Expiries, earliest first; an entry whose claim was refreshed or deleted since is dropped when it reaches the top. */
  private readonly expiries = new DeadlineQueue<Expiry>();
  private seq = 0;

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

  /** A random six-digit code no claim here holds (another instance may hold it: the store's put-if-absent decides). */
  freeCode(): string {
    for (;;) {
      const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
      if (!this.byCode.has(code)) return code;
    }
  }

  /** Codes one source holds, for any id. */
  heldBy(source: string): number {
    return this.bySource.get(source)?.size ?? 0;
  }

  /**
   * The least recently set claim of the source holding the most codes, if that source is not `except` and holds more
   * than `above`: what a new claim from a smaller source takes the place of when every place is held.
   */
  largestHoldersOldest(except: string, above: number): Claim | undefined {
    for (let held = this.mostHeld; held > above; held--)
      for (const source of this.byHeld.get(held) ?? []) if (source !== except) for (const code of this.bySource.get(source)!) return this.byCode.get(code);
    return undefined;
  }

  set(claim: Claim): void {
    const old = this.byCode.get(claim.code);
    if (old) this.unindex(old);
    this.byCode.set(claim.code, claim);
    this.index(claim);
    if (old?.expiresAt !== claim.expiresAt) this.queueExpiry(claim);
  }

  delete(code: string): boolean {
    const old = this.byCode.get(code);
    if (!old) return false;
    this.unindex(old);
    this.byCode.delete(code);
    return true;
  }

  /**
   * Hands `take` the claims after `after` (a claim's place in the listing's order), oldest first, until it answers false
   * (that claim is left for the next page); only `deviceId`'s when given. Whether it stopped so: no sort and no copy of
   * every claim per call.
   */
  walk(after: ClaimPlace | undefined, take: (c: Claim) => boolean, deviceId?: string): boolean {
    if (deviceId !== undefined) {
      // One device's codes, from its index (a few: the per-source share bounds them), in the same order.
      for (const c of this.ofDevice(deviceId).sort(compare)) if ((after === undefined || compare(c, after) > 0) && !take(c)) return true;
      return false;
    }
    for (let i = after === undefined ? 0 : this.placeOf(after, true); i < this.ordered.length; i++) if (!take(this.ordered[i]!)) return true;
    return false;
  }

  /**
   * One page of the claims pending at `now` that `sees` keeps (of `deviceId` only, when given), oldest first, after
   * `after` (the last of the previous page), at most `limit`; `more` when another follows.
   */
  pendingPage(o: PageQuery, now: number): { claims: Claim[]; more: boolean } {
    const claims: Claim[] = [];
    const more = this.walk(
      o.after,
      (c) => {
        if (c.status !== 'pending' || c.expiresAt <= now || (o.sees && !o.sees(c))) return true;
        if (claims.length === o.limit) return false;
        claims.push(c);
        return true;
      },
      o.deviceId,
    );
    return { claims, more };
  }

  /** The claim that expired first by `now`, if any; it stays until deleted (the store goes first). */
  firstExpired(now: number): Claim | undefined {
    for (let top = this.expiries.peek(); top && top.deadline <= now; top = this.expiries.peek()) {
      const c = this.byCode.get(top.code);
      if (c?.expiresAt === top.deadline) return c;
      this.expiries.pop();
    }
    return undefined;
  }

  /** Where `p` is (or would go) in `ordered`; `after`: the first place past every claim at or before `p`. */
  private placeOf(p: ClaimPlace, after = false): number {
    let lo = 0;
    let hi = this.ordered.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const c = compare(this.ordered[mid]!, p);
      if (c < 0 || (after && c === 0)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private index(c: Claim): void {
    this.ordered.splice(this.placeOf(c), 0, c);
    const source = sourceKey(c.remoteAddress);
    let sources = this.byDevice.get(c.deviceId);
    if (!sources) this.byDevice.set(c.deviceId, (sources = new Map()));
    let codes = sources.get(source);
    if (!codes) sources.set(source, (codes = new Set()));
    codes.add(c.code);
    this.byClient.set(clientKey(c.deviceId, c.clientId), c.code);
    let held = this.bySource.get(source);
    if (!held) this.bySource.set(source, (held = new Set()));
    held.add(c.code);
    this.moveHeld(source, held.size - 1, held.size);
  }

  private unindex(c: Claim): void {
    const at = this.placeOf(c);
    if (this.ordered[at] === c) this.ordered.splice(at, 1);
    const source = sourceKey(c.remoteAddress);
    const sources = this.byDevice.get(c.deviceId);
    const codes = sources?.get(source);
    codes?.delete(c.code);
    if (codes?.size === 0) sources!.delete(source);
    if (sources?.size === 0) this.byDevice.delete(c.deviceId);
    // Two instances may have claimed one (id, client) at once: only this code's entry goes.
    const key = clientKey(c.deviceId, c.clientId);
    if (this.byClient.get(key) === c.code) this.byClient.delete(key);
    const held = this.bySource.get(source);
    if (!held?.delete(c.code)) return;
    if (held.size === 0) this.bySource.delete(source);
    this.moveHeld(source, held.size + 1, held.size);
  }

  /** A source's count moved by one: its place among the levels, and the top level. */
  private moveHeld(source: string, from: number, to: number): void {
    const level = this.byHeld.get(from);
    level?.delete(source);
    if (level?.size === 0) this.byHeld.delete(from);
    if (to > 0) {
      let next = this.byHeld.get(to);
      if (!next) this.byHeld.set(to, (next = new Set()));
      next.add(source);
    }
    if (to > this.mostHeld) this.mostHeld = to;
    else if (from === this.mostHeld && !this.byHeld.has(from)) this.mostHeld = to;
  }

  private queueExpiry(c: Claim): void {
    // Each refresh leaves a stale entry until its time comes: past twice the claims, the queue is made again from them.
    if (this.expiries.size > 2 * this.byCode.size + 64) {
      this.expiries.drain();
      for (const live of this.byCode.values()) this.expiries.push({ deadline: live.expiresAt, seq: this.seq++, code: live.code });
    } else this.expiries.push({ deadline: c.expiresAt, seq: this.seq++, code: c.code });
  }
}

/** What a page of pending claims asks for (GET /v1/enrollments). */
export interface PageQuery {
  after?: ClaimPlace | undefined;
  limit: number;
  sees?: (c: Claim) => boolean;
  deviceId?: string | undefined;
}

/** A claim's place in the listing's order: its creation time, then its code. */
export interface ClaimPlace {
  createdAt: number;
  code: string;
}
/** The listing's order: creation time, then code. */
export const compare = (c: ClaimPlace, p: ClaimPlace): number => c.createdAt - p.createdAt || (c.code < p.code ? -1 : c.code > p.code ? 1 : 0);

const clientKey = (deviceId: string, clientId: string) => `${deviceId}\n${clientId}`;
