import type { Server as TlsServer, TLSSocket } from 'node:tls';
import type { Logger } from 'pino';
import type { Listener, Metrics } from '../metrics.js';

/**
 * A TLS socket that fails its handshake (a scanner, a client that distrusts the certificate, one that
 * never finishes within the listener's `handshakeTimeout`) is closed and counted. With a
 * 'tlsClientError' listener node leaves the socket open, so closing it here is what frees the descriptor.
 */
export function closeFailedHandshakes(server: TlsServer, listener: Listener, metrics: Metrics, log: Logger): void {
  server.on('tlsClientError', (err: NodeJS.ErrnoException, socket: TLSSocket) => {
    socket.destroy();
    // The peer left mid-handshake, or a connection limit refused the socket: nothing to report.
    if (err.code === 'ECONNRESET') return;
    const reason = err.code === 'ERR_TLS_HANDSHAKE_TIMEOUT' ? 'timeout' : 'error';
    metrics.tlsHandshakeFailures.inc({ listener, reason });
    log.debug({ listener, remote: socket.remoteAddress, reason, err: err.message }, 'TLS handshake failed; connection closed');
  });
}
