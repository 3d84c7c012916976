import type { Logger } from 'pino';
import type { Store } from '../store/store.js';

/** The store collection of send claims: one document per queued call being (or once) sent, key = call id. */
export const SEND_CLAIMS_COLLECTION = 'call-sends';

/** won: this instance sends the call. lost: another instance holds it. stale: held so long its holder must be gone. */
export type ClaimOutcome = 'won' | 'lost' | 'stale';

interface ClaimDoc {
  at: string;
}

/**
 * With a shared store (the cluster's KV bucket) two instances can both see a device ready during a takeover,
 * each with the call still `queued` in its memory: `queued → sent` alone would let both send it. The claim is
 * a put-if-absent document (`Store.create`), so exactly one instance wins the right to send a call; it is
 * released only when the call is put back unsent, and deleted with the call once the call is forgotten.
 */
export class SendClaims {
  constructor(
    private readonly d: {
      store: Store & Required<Pick<Store, 'create'>>;
      log: Logger;
      /** A claim held this long whose call is still `queued`: its holder died between claiming and writing `sent`. */
      staleMs: number;
      now: () => number;
    },
  ) {}

  async claim(callId: string): Promise<ClaimOutcome> {
    const doc: ClaimDoc = { at: new Date(this.d.now()).toISOString() };
    if (await this.d.store.create(SEND_CLAIMS_COLLECTION, callId, doc)) return 'won';
    const held = (await this.d.store.get(SEND_CLAIMS_COLLECTION, callId)) as Partial<ClaimDoc> | undefined;
    // Released in between: the next kick tries again.
    if (!held) return 'lost';
    const at = typeof held.at === 'string' ? Date.parse(held.at) : NaN;
    return Number.isFinite(at) && this.d.now() - at <= this.d.staleMs ? 'lost' : 'stale';
  }

  /** The call was put back unsent (the device was busy, or this instance stopped): it may be claimed again. */
  async release(callId: string): Promise<void> {
    await this.forget(callId);
  }

  /** The call is gone from the store: so is its claim. */
  async forget(callId: string): Promise<void> {
    await this.d.store
      .delete(SEND_CLAIMS_COLLECTION, callId)
      .catch((err: unknown) => this.d.log.warn({ err, callId }, 'could not delete the send claim of a queued call'));
  }
}

/** Claims only where another process shares the store and the store can put-if-absent. */
export function sendClaims(store: Store, o: { shared: boolean; log: Logger; staleMs: number; now: () => number }): SendClaims | undefined {
  if (!o.shared || !store.create) return undefined;
  return new SendClaims({ store: store as Store & Required<Pick<Store, 'create'>>, log: o.log, staleMs: o.staleMs, now: o.now });
}
