import type { Logger } from 'pino';
import type { Metrics } from '../metrics.js';

export interface FrameGuardOptions {
  transport: 'websocket' | 'mqtt';
  log: Logger;
  /** Who the connection is, for the log line (only built when something went wrong). */
  who: () => Record<string, unknown>;
  metrics: Metrics;
  /** Close this connection, and only this one. */
  close: () => void;
}

/**
 * The safety net around one frame's handler: a throw nobody foresaw is logged and counted, and ends the
 * connection that caused it, instead of reaching the event loop and ending the process (every device).
 */
export function guardFrame(handle: () => void, o: FrameGuardOptions): void {
  try {
    handle();
  } catch (err) {
    handlerFailed(err, o);
  }
}

/** What the guard does when a handler threw: count, log, and end that connection. */
export function handlerFailed(err: unknown, o: FrameGuardOptions): void {
  o.metrics.handlerErrors.inc({ transport: o.transport });
  o.log.error({ err, ...o.who() }, 'unexpected error handling a device frame; closing this connection');
  try {
    o.close();
  } catch {
    // The connection is already gone: nothing more to end.
  }
}
