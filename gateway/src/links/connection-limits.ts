import { readFileSync } from 'node:fs';
import type { Server as HttpServer } from 'node:http';
import type { Server, Socket } from 'node:net';
import type { Logger } from 'pino';
import type { Listener, Metrics } from '../metrics.js';
import { bindGauge } from '../metrics-bound.js';
import { KeyCounts } from '../throttle/key-counts.js';
import { sourceKey } from '../throttle/source-key.js';
import { ThrottledLog } from '../throttle/throttled-log.js';

export interface ListenerLimits {
  /** Open sockets on this listener; the kernel-accepted one past it is closed at once. */
  maxConnections: number;
  /** Open sockets from one source (an IPv4 address, or an IPv6 /64). */
  maxConnectionsPerAddress: number;
}

/** Refusals come in floods, and a flood must not become a log flood: the counters carry the numbers. */
export const REFUSAL_LOG = { linesPerWindow: 1, windowMs: 10_000 };
export const REFUSAL_LOG_NOTE = ' (further ones are counted, not logged, for 10 s)';

/**
 * Caps the sockets of one listener, in total (`server.maxConnections`, enforced by node before any
 * byte is read) and per source. Runs first on 'connection': a refused socket is destroyed before the
 * listener's own handler sees it, so handlers skip a socket that is already `destroyed`. Several servers
 * (the broker's plain and TLS ports) share one set of caps: a second port is no second quota.
 */
export function limitConnections(servers: Server | readonly Server[], listener: Listener, limits: ListenerLimits, metrics: Metrics, log: Logger): void {
  const perSource = new KeyCounts<string>();
  let open = 0;
  // Moved on every connect and close: bound once, not hashed by label per move.
  const openGauge = bindGauge(metrics.connectionsOpen, { listener });

  const warns = new ThrottledLog(log, 'warn', REFUSAL_LOG);
  const refused = (reason: 'listener_full' | 'address_full', remote: string | undefined) => {
    metrics.connectionsRefused.inc({ listener, reason });
    warns.write({ listener, reason, remote, open, limits }, `connection refused by a connection limit${REFUSAL_LOG_NOTE}`);
  };

  // One handler for every socket (`this` is the socket; its address is cached by then): a closure and a `once`
  // wrapper per socket were ~250 B per device connection.
  function onClose(this: Socket): void {
    open--;
    openGauge.dec();
    perSource.add(sourceKey(this.remoteAddress), -1);
  }

  for (const server of ([] as Server[]).concat(servers)) {
    server.maxConnections = limits.maxConnections;
    server.on('drop', (d) => refused('listener_full', d?.remoteAddress));
    server.prependListener('connection', (socket: Socket) => {
      // Each server's maxConnections counts its own sockets; the total across servers is checked here.
      if (open >= limits.maxConnections) {
        refused('listener_full', socket.remoteAddress);
        socket.destroy();
        return;
      }
      const key = sourceKey(socket.remoteAddress);
      if (perSource.get(key) >= limits.maxConnectionsPerAddress) {
        refused('address_full', socket.remoteAddress);
        socket.destroy();
        return;
      }
      perSource.add(key, 1);
      open++;
      openGauge.inc();
      socket.on('close', onClose); // 'close' comes once
    });
  }
}

/** Counts the sockets node's `headersTimeout` closed for sending no complete request (or upgrade) in time. */
export function countRequestTimeouts(server: HttpServer, metrics: Metrics): void {
  server.on('clientError', (err: NodeJS.ErrnoException) => {
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') metrics.connectionsRefused.inc({ listener: 'http', reason: 'no_request' });
  });
}

/**
 * The process's open-file limit (soft), read from /proc on Linux; undefined elsewhere. Every socket is a
 * descriptor: listener caps above this let a flood on one port starve the other of descriptors.
 */
export function openFileLimit(procLimits = '/proc/self/limits'): number | undefined {
  try {
    const m = /^Max open files\s+(\d+|unlimited)/m.exec(readFileSync(procLimits, 'utf8'));
    return m && m[1] !== 'unlimited' ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}
