import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import type { Store } from '../store/store.js';
import { sourceKey } from '../throttle/source-key.js';
import { REFUSAL_LINES, ThrottledLog } from '../throttle/throttled-log.js';
import { Claims, type PageQuery } from './claims.js';
import type { EnrollmentCredentials, OtaProof } from './credentials.js';
import { BindingSchema, ClaimSchema, type Binding, type Claim } from './records.js';
import { RefusedDevices } from './refused.js';

export type EnrollmentPolicy = 'open' | 'approve' | 'allowlist';

export interface EnrollmentOptions {
  policy: EnrollmentPolicy;
  /** Normalized device ids admitted by `allowlist`. */
  allowlist: ReadonlySet<string>;
  pendingTtlSeconds: number;
  maxPending: number;
  /** Codes one source holds for one device id (past it, its oldest for the id goes); sources never block each other. */
  maxPendingPerDevice: number;
  /** Claims waiting from one source (throttle/source-key.ts). */
  maxPendingPerAddress: number;
  credentials: EnrollmentCredentials;
  store: Store;
  log: Logger;
  metrics: Metrics;
  /** Called after an operator revokes a device's credentials (re-enroll): close its live connection. */
  onRevoked?: (deviceId: string) => void;
  /** Enrollments kept for device ids not recorded (no connection yet, or forgotten): `enrollment.maxUnconnected`. */
  maxUnconnected?: number | undefined;
  /** An enrollment dropped past maxUnconnected: what else was kept for that id (its tenant) goes too. */
  onDropped?: ((deviceId: string) => void) | undefined;
}

/** What enrollment follows of the device records (devices/records.ts), a port: which enrolled ids ever connected. */
export interface EnrolledRecords {
  has(deviceId: string): boolean;
  onRecorded(fn: (deviceId: string) => void): () => void;
  onForgotten(fn: (deviceId: string) => void): () => void;
}

/**
 * Enrollments of ids the gateway has not recorded (the device never connected, or was forgotten), kept at most (the
 * default of `enrollment.maxUnconnected`): past it the oldest of them is dropped. Under the `open` policy every OTA
 * check naming a new id enrolled it, and anyone may send checks; under `approve` a tenant's key could approve its own
 * rule's claims for made-up ids, one after another: each was a row kept for ever, read whole at every start, and a
 * device forgotten past devices.maxKnown kept its enrollment too (red team 9).
 */
export const MAX_UNCONNECTED_OPEN_ENROLLMENTS = 10_000;

export interface OtaRequest {
  deviceId: string;
  clientId: string;
  proof: OtaProof;
  remoteAddress: string;
  userAgent?: string | undefined;
  firmwareVersion?: string | undefined;
  /** The OTA body's `board.type`, as the device reported it. */
  board?: string | undefined;
}

/**
 * What the OTA answer carries: the device's credentials, its connection settings without credentials (an
 * enrolled device that did not prove itself keeps what it stored), or an activation code to show.
 */
export type OtaDecision = { kind: 'credentials'; binding: Binding } | { kind: 'withheld'; binding: Binding } | { kind: 'activation'; claim: Claim };

export type ActivationState = 'done' | 'pending' | 'rejected' | 'unknown';

const BINDINGS = 'enrollments';
const CLAIMS = 'enrollment-claims';
/** Outcomes a flood of made-up checks causes (from any address): logged a bounded number of times per kind. */
const REFUSALS: ReadonlySet<string> = new Set(['proof_refused', 'refused', 'busy', 'busy_address', 'no_free_code']);
/** Fresh codes tried for a new claim before giving up: a code is taken only when another instance chose it at once. */
const CODE_TRIES = 5;

/**
 * Which devices may join and with which credentials. The in-memory maps answer every read (auth runs on
 * each connection); every change goes to the store first, one at a time, and only then into memory, so
 * what a caller was told has been persisted.
 */
export class Enrollment {
  private readonly bindings = new Map<string, Binding>();
  private readonly claims = new Claims();
  /** Enrollments of ids not recorded, oldest first (followRecords): bounded by maxUnconnected. */
  private readonly unconnected = new Set<string>();
  private records: EnrolledRecords | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  /** Devices refused at connect, for the operator (per instance). */
  readonly refused: RefusedDevices;
  private readonly refusals: ThrottledLog;

  private constructor(private readonly o: EnrollmentOptions) {
    this.refused = new RefusedDevices();
    this.refusals = new ThrottledLog(o.log, 'warn', REFUSAL_LINES);
  }

  static async open(o: EnrollmentOptions): Promise<Enrollment> {
    const e = new Enrollment(o);
    for (const { key, value } of await o.store.list(BINDINGS)) {
      const b = BindingSchema.safeParse(value);
      if (b.success) e.bindings.set(b.data.deviceId, b.data);
      else o.log.error({ key }, 'ignoring an unreadable enrollment record');
    }
    const claims: Claim[] = [];
    for (const { key, value } of await o.store.list(CLAIMS)) {
      const c = ClaimSchema.safeParse(value);
      if (c.success) claims.push(c.data);
      else o.log.error({ key }, 'ignoring an unreadable enrollment claim');
    }
    // Oldest first: each goes at the end of the listing's order (claims.ts), not into the middle of what is read.
    for (const c of claims.sort((a, b) => a.createdAt - b.createdAt)) e.claims.set(c);
    // A shared store (cluster): another instance's approvals, claims and revocations reach this one's maps.
    o.store.onChange?.(BINDINGS, (c) => e.bindingChanged(c.key, c.value));
    o.store.onChange?.(CLAIMS, (c) => e.claimChanged(c.key, c.value));
    return e;
  }

  private bindingChanged(deviceId: string, value: unknown): void {
    if (value === undefined) {
      if (this.bindings.delete(deviceId)) this.o.onRevoked?.(deviceId);
      return;
    }
    const b = BindingSchema.safeParse(value);
    if (b.success && b.data.deviceId === deviceId) {
      this.bindings.set(deviceId, b.data);
      if (this.records && !this.records.has(deviceId)) this.unconnected.add(deviceId);
    } else this.o.log.error({ deviceId }, 'ignoring an unreadable enrollment record from the shared store');
  }

  private claimChanged(code: string, value: unknown): void {
    if (value === undefined) return void this.claims.delete(code);
    const c = ClaimSchema.safeParse(value);
    if (c.success && c.data.code === code) this.claims.set(c.data);
    else this.o.log.error({ code }, 'ignoring an unreadable enrollment claim from the shared store');
  }

  /**
   * Follow the device records: an enrollment of an id that is not recorded (the device has not connected, or was
   * forgotten) is one of at most `maxUnconnected`, the oldest dropped past it. Without this (parts, tests), none is.
   */
  followRecords(records: EnrolledRecords): void {
    this.records = records;
    for (const b of [...this.bindings.values()].sort((x, y) => x.issuedAt - y.issuedAt)) if (!records.has(b.deviceId)) this.unconnected.add(b.deviceId);
    records.onRecorded((id) => void this.unconnected.delete(id));
    records.onForgotten((id) => {
      if (this.bindings.has(id)) this.unconnected.add(id);
    });
    void this.exclusive(() => this.dropUnconnected()).catch((err: unknown) => this.o.log.warn({ err }, 'could not drop enrollments past the bound'));
  }

  /** Enrollments of ids not recorded (what maxUnconnected bounds). */
  get unconnectedSize(): number {
    return this.unconnected.size;
  }

  /** Past maxUnconnected, the oldest enrollments of ids not recorded go (their devices enroll again at their next check). Inside exclusive. */
  private async dropUnconnected(): Promise<void> {
    const max = this.o.maxUnconnected ?? MAX_UNCONNECTED_OPEN_ENROLLMENTS;
    let dropped = 0;
    for (const id of this.unconnected) {
      if (this.unconnected.size <= max) break;
      this.unconnected.delete(id);
      const b = this.bindings.get(id);
      if (!b || this.records?.has(id)) continue;
      await this.o.store.delete(BINDINGS, id);
      this.bindings.delete(id);
      this.o.onDropped?.(id);
      this.o.metrics.enrollments.inc({ outcome: 'dropped_unconnected' });
      dropped++;
    }
    if (dropped > 0)
      this.refusals.write(
        { dropped, max },
        'enrollments of device ids that never connected dropped past enrollment.maxUnconnected (oldest first); such a device enrolls again at its next OTA check',
        'dropped_unconnected',
      );
  }

  get policy(): EnrollmentPolicy {
    return this.o.policy;
  }

  get credentials(): EnrollmentCredentials {
    return this.o.credentials;
  }

  binding(deviceId: string): Binding | undefined {
    return this.bindings.get(deviceId);
  }

  /** `POST /xiaozhi/ota/`: decide what this request may receive. Throws a GatewayError to refuse. */
  ota(r: OtaRequest): Promise<OtaDecision> {
    return this.exclusive(async () => {
      await this.dropExpired();
      const bound = this.bindings.get(r.deviceId);
      if (bound) return this.otaForEnrolled(bound, r);
      if (this.o.policy === 'open') return { kind: 'credentials', binding: await this.bind(r.deviceId, r.clientId, 'open', true) } as const;
      if (this.o.policy === 'allowlist') {
        if (!this.o.allowlist.has(r.deviceId)) {
          this.outcome('refused', r, 'not on the allowlist');
          throw new GatewayError('ENROLLMENT_REFUSED', 'this device is not on the enrollment allowlist; ask the operator to add it');
        }
        return { kind: 'credentials', binding: await this.bind(r.deviceId, r.clientId, 'allowlist', true) } as const;
      }
      return { kind: 'activation', claim: await this.claimFor(r) } as const;
    });
  }

  private async otaForEnrolled(b: Binding, r: OtaRequest): Promise<OtaDecision> {
    if (!b.delivered && r.clientId === b.clientId) {
      // The first check after an operator approved this exact client: it collects the credentials once.
      const delivered = { ...b, delivered: true };
      await this.o.store.put(BINDINGS, b.deviceId, delivered);
      this.bindings.set(b.deviceId, delivered);
      this.outcome('delivered', r);
      return { kind: 'credentials', binding: delivered };
    }
    const presented = r.proof.bearer !== undefined || r.proof.basic !== undefined;
    if (presented && this.o.credentials.proves(b, r.proof)) {
      this.outcome('proven', r);
      return { kind: 'credentials', binding: b };
    }
    // Anyone can send a device's id: without proof, the answer names no credential (the device keeps its own).
    this.outcome(presented ? 'proof_refused' : 'withheld', r);
    return { kind: 'withheld', binding: b };
  }

  /** The device's pending claim (the same code on every retry), or a new one. */
  private async claimFor(r: OtaRequest): Promise<Claim> {
    const existing = this.claims.ofClient(r.deviceId, r.clientId);
    if (existing?.status === 'rejected') {
      this.outcome('rejected', r);
      throw new GatewayError('ENROLLMENT_REJECTED', 'an operator rejected this device; it may ask again later');
    }
    if (!existing) return this.newClaim(r);
    const refreshed = { ...existing, expiresAt: Date.now() + this.o.pendingTtlSeconds * 1000 };
    await this.o.store.put(CLAIMS, refreshed.code, refreshed);
    this.claims.set(refreshed);
    this.outcome('pending', r);
    return refreshed;
  }

  /**
   * Several devices may claim one id (one the real one): each gets its own code, the operator approves the one shown on
   * the device in front of them. One source holds at most maxPendingPerDevice codes for an id (past it its oldest for
   * the id goes); sources never block each other (when an id's codes were bounded in all, four addresses naming a
   * device's MAC, broadcast over WiFi, kept the real device at ENROLLMENT_BUSY).
   */
  private async newClaim(r: OtaRequest): Promise<Claim> {
    const source = sourceKey(r.remoteAddress);
    const mine = this.claims.ofDeviceFrom(r.deviceId, source);
    const giving = mine.slice(0, Math.max(0, mine.length - this.o.maxPendingPerDevice + 1));
    const displacing = this.checkRoom(r, source, giving.length);
    const claim = await this.createClaim(r);
    for (const old of giving) await this.dropClaim(old.code);
    if (displacing) await this.displace(displacing, r);
    this.outcome('claimed', r);
    this.o.log.info({ deviceId: r.deviceId, clientId: r.clientId, code: claim.code, remote: r.remoteAddress }, 'device waits for enrollment approval');
    return claim;
  }

  /**
   * Throws ENROLLMENT_BUSY when a new claim (replacing `giving` of its source's codes) has no place. When every place is
   * held, the claim whose place it takes: the largest holder's, if that holds more than this source would (red team 11:
   * refused, four sources of a quarter each held every place by refreshing their claims, and no other device enrolled).
   */
  private checkRoom(r: OtaRequest, source: string, giving: number): Claim | undefined {
    // maxPending bounds the claims, and anyone may ask for one: without a share per source, one host filled every
    // place with made-up ids (at the OTA rate limit, a few minutes) and each real device heard ENROLLMENT_BUSY.
    // Rejected codes count too: they hold places in maxPending until they expire, and an operator rejecting a flood
    // made room for as much again from the same source.
    const fromSource = this.claims.heldBy(source) - giving;
    if (fromSource >= this.o.maxPendingPerAddress) {
      this.outcome('busy_address', r);
      throw new GatewayError('ENROLLMENT_BUSY', `too many devices from this address are waiting for approval (${fromSource}); try again later`, {
        retryAfterSeconds: 60,
      });
    }
    if (this.claims.size - giving < this.o.maxPending) return undefined;
    const displaced = this.claims.largestHoldersOldest(source, fromSource + 1);
    if (displaced) return displaced;
    this.outcome('busy', r);
    throw new GatewayError('ENROLLMENT_BUSY', 'too many devices are waiting for approval; try again later', { retryAfterSeconds: 60 });
  }

  /** A claim gives its place to a smaller source's (checkRoom); that device gets a new code at its next check. */
  private async displace(c: Claim, by: OtaRequest): Promise<void> {
    await this.dropClaim(c.code);
    this.o.metrics.enrollments.inc({ outcome: 'displaced' });
    const line = { deviceId: c.deviceId, code: c.code, remote: c.remoteAddress, forDevice: by.deviceId, forRemote: by.remoteAddress };
    this.refusals.write(
      line,
      "enrollment.maxPending reached: a claim from a smaller address took the place of the largest one's least recently refreshed",
      'displaced',
    );
  }

  /**
   * A new claim under a code no other claim holds, here or on another instance: the store's put-if-absent decides, as two
   * instances may pick the same code at once (with a plain put, the second overwrote the first's claim).
   */
  private async createClaim(r: OtaRequest): Promise<Claim> {
    const now = Date.now();
    for (let i = 0; i < CODE_TRIES; i++) {
      const claim: Claim = {
        code: this.claims.freeCode(),
        deviceId: r.deviceId,
        clientId: r.clientId,
        challenge: randomBytes(16).toString('hex'),
        status: 'pending',
        createdAt: now,
        expiresAt: now + this.o.pendingTtlSeconds * 1000,
        remoteAddress: r.remoteAddress,
        ...(r.userAgent ? { userAgent: r.userAgent.slice(0, 256) } : {}),
        ...(r.firmwareVersion ? { firmwareVersion: r.firmwareVersion.slice(0, 64) } : {}),
        ...(r.board ? { board: r.board.slice(0, 128) } : {}),
      };
      if (await this.putNew(claim)) {
        this.claims.set(claim);
        return claim;
      }
    }
    this.outcome('no_free_code', r);
    throw new GatewayError('ENROLLMENT_BUSY', `no free enrollment code: each of the ${CODE_TRIES} tried was taken (by another instance); try again`, {
      retryAfterSeconds: 5,
    });
  }

  /** Put-if-absent; a store without it (tests' doubles) is one process's, where the code checked in memory is free. */
  private async putNew(claim: Claim): Promise<boolean> {
    if (this.o.store.create) return this.o.store.create(CLAIMS, claim.code, claim);
    await this.o.store.put(CLAIMS, claim.code, claim);
    return true;
  }

  private async dropClaim(code: string): Promise<void> {
    await this.o.store.delete(CLAIMS, code);
    this.claims.delete(code);
  }

  /** `POST <ota>/activate`: the device polls until an operator decided. */
  activate(deviceId: string, clientId: string, challenge: string | undefined): ActivationState {
    const b = this.bindings.get(deviceId);
    if (b && b.clientId === clientId) return 'done';
    const claim = this.claims.ofClient(deviceId, clientId);
    // A v2 device echoes the challenge of the answer it received: another answer's challenge is not its claim.
    if (!claim || claim.expiresAt <= Date.now() || (challenge !== undefined && challenge !== claim.challenge)) return 'unknown';
    return claim.status === 'rejected' ? 'rejected' : 'pending';
  }

  /** The pending claim behind a code, if it is live. */
  pendingClaim(code: string): Claim | undefined {
    const c = this.claims.get(code);
    return c?.status === 'pending' && c.expiresAt > Date.now() ? c : undefined;
  }

  /** Pending claims, oldest first (every one: parts and tests; the API reads pages). */
  pending(): Claim[] {
    return this.pendingPage({ limit: Number.MAX_SAFE_INTEGER }).claims;
  }

  /** One page of the pending claims (claims.ts: walked in their order, with no sort and no copy of every claim per call). */
  pendingPage(o: PageQuery): { claims: Claim[]; more: boolean } {
    return this.claims.pendingPage(o, Date.now());
  }

  approve(code: string): Promise<Binding> {
    return this.exclusive(async () => {
      const claim = this.liveClaim(code);
      if (claim.status !== 'pending') throw new GatewayError('ENROLLMENT_NOT_FOUND', `enrollment ${code} was rejected; the device must ask again`);
      const b = await this.bind(claim.deviceId, claim.clientId, 'approve', false);
      for (const c of this.claims.ofDevice(claim.deviceId)) await this.dropClaim(c.code);
      this.o.log.info({ deviceId: b.deviceId, clientId: b.clientId, code }, 'enrollment approved');
      return b;
    });
  }

  reject(code: string): Promise<Claim> {
    return this.exclusive(async () => {
      const claim = this.liveClaim(code);
      const rejected: Claim = { ...claim, status: 'rejected' };
      await this.o.store.put(CLAIMS, code, rejected);
      this.claims.set(rejected);
      this.o.log.info({ deviceId: claim.deviceId, clientId: claim.clientId, code }, 'enrollment rejected');
      return rejected;
    });
  }

  /** Revoke the device's credentials: its next OTA check enrolls it again under the policy. */
  reenroll(deviceId: string): Promise<boolean> {
    return this.exclusive(async () => {
      if (!this.bindings.has(deviceId)) return false;
      await this.o.store.delete(BINDINGS, deviceId);
      this.bindings.delete(deviceId);
      this.unconnected.delete(deviceId);
      this.o.log.warn({ deviceId }, 'device credentials revoked by an operator; it must enroll again');
      this.o.onRevoked?.(deviceId);
      return true;
    });
  }

  private liveClaim(code: string): Claim {
    const claim = this.claims.get(code);
    if (!claim || claim.expiresAt <= Date.now()) throw new GatewayError('ENROLLMENT_NOT_FOUND', `no pending enrollment has code ${code}`);
    return claim;
  }

  private async bind(deviceId: string, clientId: string, via: Binding['via'], delivered: boolean): Promise<Binding> {
    const b: Binding = {
      deviceId,
      clientId,
      credId: randomBytes(18).toString('base64url'),
      issuedAt: Math.floor(Date.now() / 1000),
      delivered,
      via,
      enrolledAt: new Date().toISOString(),
    };
    await this.o.store.put(BINDINGS, deviceId, b);
    this.bindings.set(deviceId, b);
    this.o.log.info({ deviceId, clientId, via }, 'device enrolled');
    if (this.records && !this.records.has(deviceId)) {
      this.unconnected.delete(deviceId);
      this.unconnected.add(deviceId);
      await this.dropUnconnected();
    }
    return b;
  }

  private async dropExpired(): Promise<void> {
    const now = Date.now();
    for (let c = this.claims.firstExpired(now); c; c = this.claims.firstExpired(now)) await this.dropClaim(c.code);
  }

  private outcome(outcome: string, r: OtaRequest, detail?: string): void {
    this.o.metrics.enrollments.inc({ outcome });
    const line = { deviceId: r.deviceId, clientId: r.clientId, remote: r.remoteAddress, outcome, ...(detail ? { detail } : {}) };
    if (REFUSALS.has(outcome)) this.refusals.write(line, 'OTA: no credentials for this request', outcome);
    else this.o.log.info(line, 'OTA enrollment decision');
  }

  /** One change at a time: a change reads memory, writes the store, then memory. */
  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }
}
