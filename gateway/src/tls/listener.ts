import type { Socket } from 'node:net';
import type { Server as TlsServer, TLSSocket } from 'node:tls';
import type { Logger } from 'pino';
import type { Listener, Metrics } from '../metrics.js';
import { ThrottledLog } from '../throttle/throttled-log.js';

/** What a plain-HTTP client gets from the HTTPS port: a readable answer instead of a reset with no hint. */
const PLAIN_HTTP_ANSWER = [
  'HTTP/1.1 400 Bad Request',
  'Content-Type: text/plain; charset=utf-8',
  'Connection: close',
  '',
  'This port speaks TLS: use https:// (and wss:// for devices) instead of http://.\n',
].join('\r\n');

/**
 * A TLS socket that fails its handshake (a scanner, a client that distrusts the certificate, one that
 * never finishes within the listener's `handshakeTimeout`) is closed and counted. With a
 * 'tlsClientError' listener node leaves the socket open, so closing it here is what frees the descriptor.
 * Plain HTTP sent to the HTTP listener (`http://` to an HTTPS port, OpenSSL's "http request") is counted
 * as `plain_http`, logged (throttled) and, where the raw socket is reachable, answered with a 400 that
 * says to use https://.
 */
export function closeFailedHandshakes(server: TlsServer, listener: Listener, metrics: Metrics, log: Logger): void {
  const plainHttpLog = new ThrottledLog(log, 'warn', { linesPerWindow: 5, windowMs: 60_000 });
  server.on('tlsClientError', (err: NodeJS.ErrnoException, socket: TLSSocket) => {
    // The peer left mid-handshake, or a connection limit refused the socket: nothing to report.
    if (err.code === 'ECONNRESET') return void socket.destroy();
    if (err.code === 'ERR_SSL_HTTP_REQUEST' && listener === 'http') {
      metrics.tlsHandshakeFailures.inc({ listener, reason: 'plain_http' });
      plainHttpLog.write({ listener, remote: socket.remoteAddress }, 'plain HTTP sent to the HTTPS port; answered 400 "use https://"');
      answerPlainHttp(socket);
      return;
    }
    socket.destroy();
    const reason = err.code === 'ERR_TLS_HANDSHAKE_TIMEOUT' ? 'timeout' : 'error';
    metrics.tlsHandshakeFailures.inc({ listener, reason });
    log.debug({ listener, remote: socket.remoteAddress, reason, err: err.message }, 'TLS handshake failed; connection closed');
  });
}

/** Write the 400 in clear on the TCP socket under the failed TLS one (node keeps it as `_parent`), then close both. */
function answerPlainHttp(socket: TLSSocket): void {
  const raw = (socket as TLSSocket & { _parent?: Socket | null })._parent;
  if (!raw || raw.destroyed || typeof raw.end !== 'function') return void socket.destroy();
  const done = () => {
    socket.destroy();
    raw.destroy();
  };
  raw.once('error', done);
  raw.setTimeout(5000, done);
  raw.end(PLAIN_HTTP_ANSWER, done);
}
