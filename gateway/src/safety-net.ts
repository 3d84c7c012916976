import type { Logger } from 'pino';
import { ThrottledLog } from './throttle/throttled-log.js';

export type UnhandledKind = 'rejection' | 'exception';

export interface SafetyNetOptions {
  log: Logger;
  /** Count one (a prom counter once the gateway is up). */
  count(kind: UnhandledKind): void;
  /** After an uncaught exception has been logged: stop the gateway (gracefully) and exit non-zero. */
  onException(err: unknown): void;
  /** Log lines per minute for rejections; past it they are only counted (one hostile peer must not flood the log). */
  maxLogsPerMinute?: number;
}

/**
 * The process-level safety net, for errors no handler caught (per-connection handlers have their own guard,
 * which closes that connection: links/frame-guard.ts).
 *
 * - An unhandled promise rejection is logged and counted, and the gateway goes on: the rejected promise
 *   unwound nothing (no synchronous code was cut short), so the state others depend on is intact, and
 *   exiting would drop every device for a fault that belongs to one request.
 * - An uncaught exception is logged (fatal) and counted, and the gateway stops gracefully and exits 1:
 *   the throw cut some code short at an unknown point, so state may be half-updated (Node's own advice),
 *   and serving on could answer wrongly. A supervisor (systemd `Restart=on-failure`, a container restart
 *   policy) starts it again; devices reconnect by themselves.
 */
export function installSafetyNet(o: SafetyNetOptions): () => void {
  // Past the cap, the next line written says how many were held back (`suppressed`).
  const rejections = new ThrottledLog(o.log, 'error', { linesPerWindow: o.maxLogsPerMinute ?? 20, windowMs: 60_000 });
  const onRejection = (reason: unknown) => {
    o.count('rejection');
    rejections.write({ err: reason }, 'unhandled promise rejection; the gateway goes on');
  };
  const onException = (err: unknown, origin: string) => {
    o.count('exception');
    o.log.fatal({ err, origin }, 'uncaught exception; stopping the gateway (state may be inconsistent)');
    o.onException(err);
  };
  process.on('unhandledRejection', onRejection);
  process.on('uncaughtException', onException);
  return () => {
    process.off('unhandledRejection', onRejection);
    process.off('uncaughtException', onException);
  };
}
