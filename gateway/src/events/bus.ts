import type { Metrics } from '../metrics.js';

export const EVENT_TYPES = [
  'device.online',
  'device.ready',
  'device.offline',
  'device.tools_changed',
  'device.notification',
  'device.message',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export interface GatewayEvent {
  /** Increasing decimal integer: SSE `id`, and what `Last-Event-ID` names. */
  id: string;
  type: EventType;
  deviceId: string;
  at: string;
  data: Record<string, unknown>;
}

export type EventListener = (e: GatewayEvent) => void;

/**
 * One bus for every device event. Keeps the last `bufferSize` events in a ring so SSE clients can
 * resume with `Last-Event-ID`. Listeners run synchronously and must not throw; one that does is logged
 * by the caller's wrapper, never allowed to stop delivery to the others.
 */
export class EventBus {
  private seq = 0;
  private readonly ring: Array<GatewayEvent | undefined>;
  private readonly listeners = new Set<EventListener>();

  constructor(
    private readonly bufferSize: number,
    private readonly metrics?: Metrics,
    private readonly onListenerError: (e: unknown) => void = () => {},
  ) {
    this.ring = new Array<GatewayEvent | undefined>(bufferSize);
  }

  publish(type: EventType, deviceId: string, data: Record<string, unknown> = {}): GatewayEvent {
    const e: GatewayEvent = { id: String(++this.seq), type, deviceId, at: new Date().toISOString(), data };
    if (this.bufferSize > 0) this.ring[this.seq % this.bufferSize] = e;
    this.metrics?.events.inc({ type });
    for (const l of this.listeners) {
      try {
        l(e);
      } catch (err) {
        this.onListenerError(err);
      }
    }
    return e;
  }

  subscribe(listener: EventListener): () => boolean {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Buffered events after `lastId`, oldest first (all buffered ones if `lastId` is older than the buffer). */
  since(lastId: string): GatewayEvent[] {
    const last = /^\d{1,15}$/.test(lastId) ? Number(lastId) : NaN;
    if (!Number.isFinite(last) || this.bufferSize === 0) return [];
    const from = Math.max(last + 1, this.seq - this.bufferSize + 1, 1);
    const out: GatewayEvent[] = [];
    for (let s = from; s <= this.seq; s++) {
      const e = this.ring[s % this.bufferSize];
      if (e && Number(e.id) === s) out.push(e);
    }
    return out;
  }

  get lastId(): string {
    return String(this.seq);
  }
}
