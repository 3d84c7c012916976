import type { Logger } from 'pino';
import type { Metrics } from '../metrics.js';
import { takeTokens, type RateLimit, type Tokens } from '../throttle/token-bucket.js';
import type { BadInputLog } from './bad-input-log.js';
import { CLOSE_INTERNAL_ERROR, type DeviceLink } from './link.js';
import type { SourceShare, SourceReadBudgets } from './source-read-budgets.js';

/** What a read budget works on: the session's link and its frame handlers. */
export interface ReadBudgetDeps {
  /** Stop and restart reading the device's socket (TCP backpressure: the device's own writes wait). */
  pauseReading(): void;
  resumeReading(): void;
  /** Handle a held text frame; false when it was unsolicited (it spends from the budget). */
  handleText(text: string): boolean;
  /** Handle a held audio frame; false when no voice session took it (it spends from the budget). */
  handleAudio(data: Buffer): boolean;
  /** The budget ran out and reading paused (`by`: the device's own, or its address's shared one). */
  paused(by: 'device' | 'address'): void;
  /** Frames past the hold's bound, dropped and counted. */
  dropped(frames: number): void;
  /** A held frame's handler threw (outside the link's frame guard, on a timer): end this connection only. */
  failed(err: unknown): void;
}

/**
 * Frames a paused link may still hand over: the rest of the socket read that was being parsed when reading paused
 * (64 KiB: ~11 000 empty WebSocket frames, 6 bytes each with the client's mask). Past these the frames are dropped;
 * a link that pauses never gets near them.
 */
export const MAX_HELD_FRAMES = 4096;
export const MAX_HELD_BYTES = 1024 * 1024;

/** Bytes a frame may hold for the price of one: past them it costs one more per started block (parsing is per byte). */
export const FRAME_COST_BYTES = 4096;

/** What a frame of `length` bytes (or UTF-16 units) spends: one, and one more per further 4 KiB (a 60 KB frame: 15). */
export function frameCost(length: number): number {
  return 1 + Math.floor(length / FRAME_COST_BYTES);
}

/**
 * One device's budget for unsolicited frames: every text frame but the replies to the gateway's own requests (those
 * are paced by the gateway, one call at a time), and audio that no voice session takes. A voice session's audio never
 * counts: its pace is the codec's, ~17 frames a second, and the relay's saturated rows carry thousands.
 *
 * A device may send `burst` at once and `ratePerSecond` after, a frame counting once per 4 KiB it holds (`frameCost`:
 * what a frame costs the gateway is its parse, per byte); past that its link stops reading until a frame's worth
 * is back, so a flood costs its sender time, not the other devices' CPU: its frames wait in its own socket and the
 * kernel's window instead of being parsed. Nothing the link already read is dropped (up to the hold's bound): frames
 * that arrive while reading is paused are held and handled in order, audio among them, once the budget allows.
 *
 * Every device from one source address also spends from that address's budget (`source`, source-read-budgets.ts):
 * many devices each under their own budget cannot add up to a flood, and past the address's budget each of them
 * pauses as it would past its own, for whichever deficit is longer.
 *
 * Made for a session on its first unsolicited frame (most devices send a few an hour): no memory or timer before.
 */
export class ReadBudget {
  private readonly own: Tokens;
  private timer: NodeJS.Timeout | undefined;
  private held: Array<string | Buffer> = [];
  private next = 0;
  private heldBytes = 0;
  /** The link is not being read. */
  private stopped = false;
  private closed = false;

  constructor(
    private readonly limit: RateLimit,
    private readonly d: ReadBudgetDeps,
    private readonly now: () => number = performance.now.bind(performance),
    private readonly source?: SourceShare,
  ) {
    this.own = { tokens: limit.burst, at: this.now() };
  }

  /** Reading is paused: frames the link still hands over are to be held (`hold`), not handled. */
  get paused(): boolean {
    return this.stopped;
  }

  /** Frames waiting (tests, the operator's view). */
  get waiting(): number {
    return this.held.length - this.next;
  }

  /** An unsolicited frame was handled: spend its cost (`frameCost`), and pause reading when the budget is out. */
  spend(cost = 1): void {
    const now = this.now();
    const own = takeTokens(this.own, this.limit, now, cost);
    const shared = this.source ? takeTokens(this.source.tokens, this.source.limit, now, cost) : 0;
    if ((own >= 0 && shared >= 0) || this.timer !== undefined || this.closed) return;
    // Back when the longer deficit is refilled: the frame just handled was paid for in advance.
    const ownWait = -own / this.limit.ratePerSecond;
    const sharedWait = this.source ? -shared / this.source.limit.ratePerSecond : 0;
    if (!this.stopped) {
      this.stopped = true;
      this.d.pauseReading();
      this.d.paused(sharedWait > ownWait ? 'address' : 'device');
    }
    this.timer = setTimeout(this.resume, Math.ceil(Math.max(ownWait, sharedWait) * 1000));
  }

  /** A frame that came while reading was paused: handled later, in order (after close: dropped with the connection). */
  hold(frame: string | Buffer): void {
    if (this.closed) return;
    if (this.held.length - this.next >= MAX_HELD_FRAMES || this.heldBytes + frame.length > MAX_HELD_BYTES) return this.d.dropped(1);
    this.held.push(frame);
    this.heldBytes += frame.length;
  }

  private readonly resume = (): void => {
    this.timer = undefined;
    // Handle what is held until the budget is out again (spend sets the timer) or nothing waits.
    try {
      while (!this.closed && this.timer === undefined && this.next < this.held.length) {
        const frame = this.held[this.next]!;
        this.held[this.next++] = '';
        this.heldBytes -= frame.length;
        const solicited = typeof frame === 'string' ? this.d.handleText(frame) : this.d.handleAudio(frame);
        if (!solicited) this.spend(frameCost(frame.length));
      }
    } catch (err) {
      this.close();
      return this.d.failed(err);
    }
    if (this.next === this.held.length) {
      this.held = [];
      this.next = 0;
    }
    if (this.closed || this.timer !== undefined) return;
    this.stopped = false;
    this.d.resumeReading();
  };

  /** The connection is gone: what is held goes with it. */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.held = [];
    this.next = 0;
    this.heldBytes = 0;
  }
}

/** What a device session lends its read budget (devices/session.ts). */
export interface BudgetedSession {
  readonly settings: { readonly unsolicitedFrames: RateLimit; readonly sourceFrames: SourceReadBudgets };
  readonly transport: 'websocket' | 'mqtt';
  readonly metrics: Pick<Metrics, 'readsPaused' | 'framesRejected' | 'handlerErrors'>;
  readonly badInput: BadInputLog;
  readonly log: Logger;
}

/** A session's budget: its link paused and resumed, its held frames handed to its handlers, what happens counted and logged. */
export function sessionReadBudget(
  s: BudgetedSession,
  link: DeviceLink,
  handleText: (text: string) => boolean,
  handleAudio: (data: Buffer) => boolean,
): ReadBudget {
  const now = performance.now.bind(performance);
  const source = s.settings.sourceFrames.share(link.remoteAddress, now());
  return new ReadBudget(
    s.settings.unsolicitedFrames,
    {
      pauseReading: () => link.pauseReading?.(),
      resumeReading: () => link.resumeReading?.(),
      handleText,
      handleAudio,
      paused: (by) => {
        s.metrics.readsPaused.inc({ transport: s.transport, budget: by });
        const { ratePerSecond, burst } = by === 'address' ? source.limit : s.settings.unsolicitedFrames;
        const msg =
          by === 'address'
            ? "devices at this device's address send unsolicited frames past their shared budget"
            : 'device sends unsolicited frames past its budget';
        s.badInput.note('warn', { reason: 'frame_rate', budget: by, ratePerSecond, burst, remote: link.remoteAddress }, `${msg}; reading paused`);
      },
      dropped: (frames) => s.metrics.framesRejected.inc({ reason: 'over_rate' }, frames),
      failed: (err) => {
        // As the links' frame guard does (links/frame-guard.ts): counted, logged, this connection ended.
        s.metrics.handlerErrors.inc({ transport: s.transport });
        s.log.error({ err }, 'unexpected error handling a held device frame; closing this connection');
        link.close(CLOSE_INTERNAL_ERROR, 'internal error');
      },
    },
    now,
    source,
  );
}
