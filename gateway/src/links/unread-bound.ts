import type { Logger } from 'pino';
import type { Listener, Metrics } from '../metrics.js';
import { REFUSAL_LINES, ThrottledLog } from '../throttle/throttled-log.js';

/**
 * What a device link's peer may leave unread on top of the voice bound (`voice.maxBufferedBytes`, where audio and
 * relayed JSON are already dropped): a real device reads what it is sent, and an ESP32 holds far less than this.
 */
export const UNREAD_MARGIN_BYTES = 4 * 1024 * 1024;

/** The bound for the device links (WebSocket and MQTT): the voice bound plus the margin. */
export function maxUnreadBytes(voiceMaxBufferedBytes: number): number {
  return voiceMaxBufferedBytes + UNREAD_MARGIN_BYTES;
}

/**
 * Bytes written to a peer that it has not taken, per connection. A device (or an MQTT backend) that stops reading
 * while it keeps sending (each MCP request it sends is answered; an `abort` in a conversation is answered with a
 * larger `tts stop`), or while events or calls are written to it, had every answer kept in the gateway's memory
 * for as long as it liked: 80 MB for one device after 71 MB of requests (red team 2026-11-28). Past the bound the
 * connection is closed, counted (`voxgate_connections_refused_total{reason="unread"}`) and logged within
 * REFUSAL_LINES.
 */
export class UnreadBound {
  private readonly lines: ThrottledLog;

  constructor(
    readonly maxBytes: number,
    private readonly listener: Listener,
    private readonly metrics: Metrics,
    log: Logger,
  ) {
    this.lines = new ThrottledLog(log, 'warn', REFUSAL_LINES);
  }

  /** True (counted and logged) when `unread` is past the bound: the caller closes that connection. Callers compare with `maxBytes` first. */
  exceeded(unread: number, who: Record<string, unknown>): boolean {
    if (unread <= this.maxBytes) return false;
    this.metrics.connectionsRefused.inc({ listener: this.listener, reason: 'unread' });
    this.lines.write({ ...who, unread, maxUnreadBytes: this.maxBytes }, 'peer stopped reading what it is sent; closing its connection', 'unread');
    return true;
  }
}
